package route

import "time"

// What the proxy's tests (and tools) read of the table in force beyond
// Status: a model's route, a breaker, the breakers made on demand. They
// change nothing, except Learnt, which stands in for the router's loop.

// Route is model's route in the table in force; nil when it has none.
func (r *Router) Route(model string) *ModelRoute { return r.table.Load().models[model] }

// Breaker is model's breaker on up in the table in force: a route's, or
// one made on demand (DirectedBreaker); with model "", up's own (its
// transport breaker). nil when there is none; it makes nothing.
func (r *Router) Breaker(up Upstream, model string) *Breaker {
	t := r.table.Load()
	if model == "" {
		return t.breakers[up]
	}
	if b := t.modelBreakers[modelKey{up, model}]; b != nil {
		return b
	}
	if b, ok := t.directed.Load(modelKey{up, model}); ok {
		return b.(*Breaker)
	}
	return nil
}

// OnDemandBreakers is how many model breakers DirectedBreaker made for
// the table in force.
func (r *Router) OnDemandBreakers() int64 { return r.table.Load().ndirected.Load() }

// Forced is the mode the operator forced (ForceAuto, ForcePrimary,
// ForceFallback).
func (mr *ModelRoute) Forced() string { return mr.forced }

// PrimaryBreaker is the model's breaker on its primary; nil if none (a
// primary that is the director's choice has one per upstream: Breaker).
func (mr *ModelRoute) PrimaryBreaker() *Breaker { return mr.primary }

// Alert is the alert holding the model on its fallback; "" if none.
func (mr *ModelRoute) Alert() string { return mr.alert }

// Learnt sets what the router's loop learns of the primary from
// RouterOptions.Latency: its median, its tail (censoredTail) and the
// calls that tail was learnt from, for a test that needs them without
// the calls. With Latency set, the loop's next refresh replaces them.
func (l *Live) Learnt(p50, tail time.Duration, tailCalls uint64) {
	l.p50.Store(int64(p50))
	l.tail.Store(int64(tail))
	l.tailCalls.Store(tailCalls)
}
