package pool

import (
	"time"

	"github.com/infergate/infergate/flow"
)

// Flow control's share of an endpoint: a concurrency limit per model,
// learnt from its answers (flow.Limiter), and its calls in flight per
// model, counted once the pool counts per model (CountPerModel).

// FlowLimit is e's limit for model now: MinLimit until its first answer
// teaches one, and no limit (MaxLimit) for a model e keeps nothing of
// because it keeps maxLatModels already (model names are the clients':
// past the bound a model passes as without flow control).
func (e *Endpoint) FlowLimit(model string) int {
	em := e.endpointModelOf(model)
	if em == nil {
		if ls := e.lat.Load(); ls != nil && len(*ls) >= maxLatModels {
			return flow.MaxLimit
		}
		return flow.MinLimit
	}
	if l := em.lim.Load(); l != nil {
		return l.Limit()
	}
	return flow.MinLimit
}

// flowBegin counts a call of model starting on e, for its limiter (not
// for a model e says it lacks: made-up names must not take its slots).
func (e *Endpoint) flowBegin(model string) {
	if !e.holds(model, time.Now().UnixNano()) {
		return
	}
	if em := e.endpointModelFor(model); em != nil {
		em.inFlight.Add(1)
	}
}

// flowEnd counts a call of model on e ended; an answer (ok) that took
// took feeds its limiter.
func (e *Endpoint) flowEnd(model string, now time.Time, took time.Duration, ok bool) {
	em := e.endpointModelOf(model)
	if em == nil {
		return
	}
	n := em.inFlight.Add(-1) + 1
	if n <= 0 {
		em.inFlight.Store(0) // begun before flow control was on
		return
	}
	if !ok {
		return
	}
	l := em.lim.Load()
	if l == nil {
		em.lim.CompareAndSwap(nil, flow.NewLimiter(now))
		l = em.lim.Load()
	}
	l.Observe(now, took, int(n))
}

// FlowOf is what e's limiter says of model now: its calls in flight, its
// limit, and the latency it learnt without load; ok false when it knows
// nothing of the model.
func (e *Endpoint) FlowOf(model string) (inFlight int64, limit int, noLoad time.Duration, ok bool) {
	em := e.endpointModelOf(model)
	if em == nil {
		return 0, flow.MinLimit, 0, false
	}
	limit = flow.MinLimit
	if l := em.lim.Load(); l != nil {
		limit, noLoad = l.Limit(), l.NoLoad()
	}
	return int64(em.inFlight.Load()), limit, noLoad, true
}
