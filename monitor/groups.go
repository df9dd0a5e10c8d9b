package monitor

// groups chains the indexes 0 to n-1 by their key without a slice per
// group: the readers that group every series each second (Recent, the
// request histogram's scrape) allocated one per model. Walk a group with
//
//	for i := g.first(k); i >= 0; i = g.next[i] { ... }
type groups[K comparable] struct {
	order []K            // the keys as first seen
	ends  map[K][2]int32 // a group's first and last index
	next  []int32        // the index after i in its group, -1 at the end
}

// groupsOf groups the indexes 0 to n-1 by keyOf (ok false leaves an index
// out).
func groupsOf[K comparable](n int, keyOf func(i int) (k K, ok bool)) *groups[K] {
	// At most n groups: sized once, not grown by doubling every read.
	g := &groups[K]{ends: make(map[K][2]int32, n), next: make([]int32, n)}
	for i := range n {
		g.next[i] = -1
		k, ok := keyOf(i)
		if !ok {
			continue
		}
		e, seen := g.ends[k]
		if seen {
			g.next[e[1]] = int32(i)
		} else {
			e[0] = int32(i)
			g.order = append(g.order, k)
		}
		e[1] = int32(i)
		g.ends[k] = e
	}
	return g
}

// first returns the first index of group k, -1 when it has none.
func (g *groups[K]) first(k K) int32 {
	if e, ok := g.ends[k]; ok {
		return e[0]
	}
	return -1
}
