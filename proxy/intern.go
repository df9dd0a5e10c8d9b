package proxy

import (
	"sync"
	"sync/atomic"
)

// names interns the model names and versions read from request frames, so
// that reading a name seen before allocates nothing (a string made of
// request bytes is an allocation per call otherwise).
var names internTable

// Bounds of an internTable: what a client sends must not grow the proxy's
// memory without limit. Past maxInterned names, or for a name longer than
// maxInternedLen, a string is allocated per call as before.
const (
	maxInterned    = 1024
	maxInternedLen = 128
)

// internTable is a bounded set of strings. Reads take no lock: the table
// is an immutable map, replaced by a copy with one more name under mu
// (names are few and settle quickly, so copies are rare).
type internTable struct {
	m  atomic.Pointer[map[string]string]
	mu sync.Mutex
}

// get returns b as a string, the interned one when b was seen before.
func (t *internTable) get(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if m := t.m.Load(); m != nil {
		if s, ok := (*m)[string(b)]; ok { // string(b) here does not allocate
			return s
		}
	}
	s := string(b)
	if len(b) <= maxInternedLen {
		t.add(s)
	}
	return s
}

// add interns s unless the table is full or has it already.
func (t *internTable) add(s string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var old map[string]string
	if p := t.m.Load(); p != nil {
		old = *p
	}
	if _, ok := old[s]; ok || len(old) >= maxInterned {
		return
	}
	m := make(map[string]string, len(old)+1)
	for k, v := range old {
		m[k] = v
	}
	m[s] = s
	t.m.Store(&m)
}
