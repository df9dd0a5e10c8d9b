package monitor

import "time"

// RecentStats is one group's statistics over its most recent slices, from
// Registry.Recent.
type RecentStats struct {
	// Stats is indexed by Component.
	Stats [NumComponents]Stats
	// Bounds holds each component's lower confidence bounds on the
	// quantiles of Stats: what a rule may conclude from these calls.
	Bounds [NumComponents]Bounds
	// Failed counts the group's calls that did not end OK, by gRPC code
	// name ("Internal", "Unavailable", ...); nil when none failed. The
	// calls, failed or not, are Stats[ComponentTotal].Count.
	Failed map[string]uint64
	// QueueSeen reports whether any series of the group ever queued.
	QueueSeen bool
	// Stream is the group's stream quantities; nil when its series had no
	// stream samples in those slices (most groups: it is a pointer so that
	// they do not carry 288 bytes of zeros, per group, per read, every
	// second).
	Stream *RecentStream
}

// RecentStream is a group's stream quantities (indexed by
// StreamQuantity) and their lower confidence bounds.
type RecentStream struct {
	Stats  [NumStreamQuantities]Stats
	Bounds [NumStreamQuantities]Bounds
}

// StreamOf returns the group's quantity q and its bounds; zero when the
// group had no stream samples.
func (rs *RecentStats) StreamOf(q StreamQuantity) (Stats, Bounds) {
	if rs.Stream == nil {
		return Stats{}, Bounds{}
	}
	return rs.Stream.Stats[q], rs.Stream.Bounds[q]
}

// FailedOf returns how many of the calls failed with one of codes (gRPC
// code names); nil codes means every code but OK.
func (rs RecentStats) FailedOf(codes []string) uint64 {
	var n uint64
	for code, k := range rs.Failed {
		if codes == nil {
			n += k
			continue
		}
		for _, c := range codes {
			if c == code {
				n += k
				break
			}
		}
	}
	return n
}

// Recent merges, per group, the last n completed slices of every series
// whose group(key) is not "" (the overflow series is left out): a window
// finer than 1m, for readers that need a fresh signal (the GPU correlation
// wants seconds-old p99 per model, not per series). n is clamped to 1 and
// to the slices of one minute. Groups without calls or stream samples in
// those slices are absent. It reads like Snapshot and changes nothing.
func (r *Registry) Recent(n int, group func(SeriesKey) string) (map[string]RecentStats, time.Time) {
	at := r.cfg.now()
	n = min(max(n, 1), r.cfg.slicesPerMinute)
	list := r.state.Load().list
	gs := groupsOf(len(list), func(i int) (string, bool) {
		g := group(list[i].key)
		return g, g != ""
	})
	order := gs.order
	out := make(map[string]RecentStats, len(order))
	m := newMerger()
	r.winMu.RLock()
	defer r.winMu.RUnlock()
	for _, g := range order {
		var rs RecentStats
		var calls int64
		for i := gs.first(g); i >= 0; i = gs.next[i] {
			s := list[i]
			w := &s.win
			for k := range n {
				if sl := w.fine[(w.finePos-k+len(w.fine))%len(w.fine)]; sl != nil {
					calls += int64(sl.count)
					for _, cc := range sl.failures() {
						if rs.Failed == nil {
							rs.Failed = map[string]uint64{}
						}
						rs.Failed[codeNames[cc.code]] += uint64(cc.n)
					}
				}
			}
		}
		for c := range Component(NumComponents) {
			m.reset(calls >= denseMinCalls)
			for i := gs.first(g); i >= 0; i = gs.next[i] {
				s := list[i]
				w := &s.win
				for k := range n {
					m.add(w.fine[(w.finePos-k+len(w.fine))%len(w.fine)], c)
				}
				rs.QueueSeen = rs.QueueSeen || w.queueSeen
			}
			rs.Stats[c] = m.stats()
			rs.Bounds[c] = m.bounds()
		}
		var st RecentStream
		streamed := false
		for q := range StreamQuantity(NumStreamQuantities) {
			m.reset(false)
			for i := gs.first(g); i >= 0; i = gs.next[i] {
				s := list[i]
				if sp := s.stream.Load(); sp != nil {
					sp.recent(m, q, n)
				}
			}
			st.Stats[q] = m.stats()
			st.Bounds[q] = m.bounds()
			streamed = streamed || st.Stats[q].Count > 0
		}
		if streamed {
			rs.Stream = new(RecentStream)
			*rs.Stream = st // a copy: st stays on the stack for the others
		}
		// A group whose streams are all still open has stream samples
		// and no finished call yet.
		if rs.Stats[ComponentTotal].Count > 0 || streamed {
			out[g] = rs
		}
	}
	return out, at
}

// RecentCalls counts, per code class, the calls of the last n completed
// slices of every series, the overflow series included. It reads only the
// slices' call counts, so it is cheap enough to poll every few seconds
// over thousands of series (the readiness probe does).
func (r *Registry) RecentCalls(n int) map[string]uint64 {
	n = min(max(n, 1), r.cfg.slicesPerMinute)
	out := map[string]uint64{}
	r.winMu.RLock()
	defer r.winMu.RUnlock()
	count := func(s *Series) {
		w := &s.win
		for k := range n {
			if sl := w.fine[(w.finePos-k+len(w.fine))%len(w.fine)]; sl != nil {
				out[s.key.CodeClass] += uint64(sl.count)
			}
		}
	}
	for _, s := range r.state.Load().list {
		count(s)
	}
	count(r.overflow)
	return out
}

// CallSums is a group's calls and their summed upstream time.
type CallSums struct {
	Calls    uint64
	Upstream time.Duration
}

// RecentSums sums, per group, the calls and upstream time of the last n
// completed slices of every series whose group(key) is not "". It reads
// only the slices' counts and sums, no histogram, so a reader can poll it
// every slice over thousands of series (cost attribution does).
func (r *Registry) RecentSums(n int, group func(SeriesKey) string) map[string]CallSums {
	n = min(max(n, 1), r.cfg.slicesPerMinute)
	out := map[string]CallSums{}
	r.winMu.RLock()
	defer r.winMu.RUnlock()
	for _, s := range r.state.Load().list {
		g := group(s.key)
		if g == "" {
			continue
		}
		w := &s.win
		for k := range n {
			if sl := w.fine[(w.finePos-k+len(w.fine))%len(w.fine)]; sl != nil && sl.count > 0 {
				cs := out[g]
				cs.Calls += uint64(sl.count)
				cs.Upstream += time.Duration(sl.sum[ComponentUpstream])
				out[g] = cs
			}
		}
	}
	return out
}
