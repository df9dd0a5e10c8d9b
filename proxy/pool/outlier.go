package pool

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// Outlier ejection, as Envoy's outlier detection does it: an endpoint that
// fails is taken out of the picker's choices for a while, longer each
// time it is ejected again, and at most half of a pool is out at once (a
// pool that fails everywhere is the upstream's trouble, for its breaker,
// not a few replicas' to route around).
const (
	// ejectAfterFailures ejects an endpoint after this many server
	// errors in a row.
	ejectAfterFailures = 5
	// ejectBase is the first ejection's length; the n-th lasts n times
	// as long, up to ejectMax.
	ejectBase = 10 * time.Second
	ejectMax  = 5 * time.Minute
	// maxEjectedShare is the largest share of a pool out at once.
	maxEjectedShare = 0.5
	// An endpoint whose service time for a model (its least latency of
	// the last seconds, serviceMin) is over latencyOutlier times the
	// median of the others' for the model is ejected: a replica that
	// became slow (throttled, a noisy neighbour, a bad GPU) takes few
	// calls even when the rest are busy, where least-loaded picking
	// would give it one whenever the others' queues were as long as its
	// own time. Only when the difference matters and is established:
	//   - it is also more than latencyMargin above their median (a 2x
	//     ratio between two sub-millisecond numbers is a cold replica
	//     or a pause, nothing a caller would notice);
	//   - its least latency is over latencyEvidence answers or more in
	//     the windows (and it answered latencyEvidence since it was
	//     admitted), and, for a named model, above the q-quantile of the
	//     others' answers where (1-q)^n = latencyAlpha: were it no
	//     slower than they are, all n of its answers would lie there
	//     with a chance of latencyAlpha (the least of n answers lies
	//     higher than the least of thousands of the same: its own
	//     minimum is compared with what n of theirs would give);
	//   - it is not warming up (ejectGrace after it became able to take
	//     calls: added, connected again, back from an ejection).
	latencyOutlier  = 2.0
	latencyMargin   = time.Millisecond
	latencyEvidence = 10
	latencyAlpha    = 0.001
	// ejectGrace is the least time after an endpoint became able to take
	// calls before its latency is judged: its slow start, at least
	// DefaultEndpointSlowStart.
	ejectGrace = DefaultEndpointSlowStart
)

// noteFailure counts a failure against e and ejects it when the evidence
// says so: at once when it could not be reached (the call never got an
// answer), after ejectAfterFailures server errors in a row, or when at
// least ejectFailureRatio of the ratioMinCalls or more calls that judged
// it in the current window failed (a replica failing every other call
// never fails five in a row).
func (u *Pool) noteFailure(e *Endpoint, now time.Time, f Verdict) {
	n := e.fails.Add(1)
	calls, failed := e.countJudged(now.UnixNano(), true)
	switch {
	case f == Unreachable:
		u.eject(e, now, "unreachable: a call got no answer from it")
	case n >= ejectAfterFailures:
		u.eject(e, now, fmt.Sprintf("%d server errors in a row", n))
	case calls >= ratioMinCalls && float64(failed) >= ejectFailureRatio*float64(calls):
		u.eject(e, now, fmt.Sprintf("%d of its last %d calls failed", failed, calls))
	}
}

// Ejection on a failure ratio: over windows of ratioWindow, at least
// ratioMinCalls calls, ejectFailureRatio of them failed (Envoy's
// failure-percentage detection, on infergate's own calls).
const (
	ratioWindow       = 10 * time.Second
	ratioMinCalls     = 20
	ejectFailureRatio = 0.5
)

// warmingUp says whether e became able to take calls (added, connected
// again, back from an ejection) less than its slow start ago, or
// ejectGrace if that is shorter, at t: a cold replica's first answers
// are no evidence of its latency.
func (u *Pool) warmingUp(e *Endpoint, t int64) bool {
	s := e.since.Load()
	return s != 0 && t-s < int64(max(u.slowStart, ejectGrace))
}

// checkLatency ejects e when its service time for model, sm (its own
// for calls naming none), is an outlier in its pool (pools of 3 to
// scanAll endpoints: with two, either may be the slow one), by the rules
// of latencyOutlier above.
func (u *Pool) checkLatency(e *Endpoint, model string, sm *serviceMin, now time.Time) {
	t := now.UnixNano()
	own, n := sm.at(t)
	if own <= latencyMargin || n < latencyEvidence || u.warmingUp(e, t) {
		return // under the margin, the others' can only be nearer
	}
	list := u.eps.Load().list
	var others [scanAll]time.Duration
	k := 0
	for _, x := range list {
		if x == e || !x.usable(t) {
			continue
		}
		if xs := x.serviceMinOf(model); xs != nil {
			if st, _ := xs.at(t); st > 0 {
				others[k] = st
				k++
			}
		}
	}
	if k < 2 {
		return
	}
	slices.Sort(others[:k])
	med := others[k/2]
	if k%2 == 0 {
		med = (others[k/2-1] + others[k/2]) / 2
	}
	if float64(own) <= latencyOutlier*float64(med) || own-med <= latencyMargin {
		return
	}
	if model != "" {
		var rest latCounts
		for _, x := range list {
			if x != e && x.usable(t) {
				x.modelLatencyAt(model, t, &rest)
			}
		}
		q := 1 - math.Pow(latencyAlpha, 1/float64(n))
		if rest.total < slowPoolEvidence || own <= rest.quantile(q) {
			return
		}
	}
	slow := "slow"
	if model != "" {
		slow += " for " + model
	}
	u.eject(e, now, fmt.Sprintf("%s: answers in %s at best of %d, %.1fx the pool's median %s", slow, own.Round(time.Microsecond),
		n, float64(own)/float64(med), med.Round(time.Microsecond)))
}

// checkModelLatency ejects the endpoint much slower than the rest of the
// pool for model (SlowEndpoint's evidence: its p99 at least twice theirs
// and its median above their p90), and its median more than
// latencyMargin above their p90, judged at most once a second per pool:
// a replica slow in its tail for one model, whose least latency is not.
// An endpoint warming up is not judged.
func (u *Pool) checkModelLatency(model string, now time.Time) {
	t := now.UnixNano()
	last := u.spreadAt.Load()
	if model == "" || t-last < int64(time.Second) || !u.spreadAt.CompareAndSwap(last, t) {
		return
	}
	s, ok := u.SlowEndpoint(model, t)
	if !ok || s.p50-s.poolP90 <= latencyMargin {
		return
	}
	for _, e := range u.eps.Load().list {
		if e.addr == s.Endpoint && e.answers.Load() >= latencyEvidence && !u.warmingUp(e, t) {
			u.eject(e, now, fmt.Sprintf("slow for %s: p99 %s, %.1fx the pool's %s", model,
				roundLatency(s.P99), s.Ratio(), roundLatency(s.PoolP99)))
		}
	}
}

// eject takes e out of the pool for its next ejection time, unless it is
// out already or the pool has its share out.
func (u *Pool) eject(e *Endpoint, now time.Time, why string) {
	list := u.eps.Load().list
	if len(list) < 2 {
		return // one endpoint: nothing to route around
	}
	t := now.UnixNano()
	u.ejectMu.Lock()
	defer u.ejectMu.Unlock()
	if e.ejectedUntil.Load() > t {
		return
	}
	out := 0
	for _, x := range list {
		if x.ejectedUntil.Load() > t {
			out++
		}
	}
	if float64(out+1) > maxEjectedShare*float64(len(list)) {
		return
	}
	k := e.ejections.Add(1)
	d := min(time.Duration(k)*ejectBase, ejectMax)
	e.ejectedUntil.Store(now.Add(d).UnixNano())
	e.since.Store(now.Add(d).UnixNano()) // its return starts slow
	e.fails.Store(0)
	e.answers.Store(0)
	e.ratioCalls.Store(0)
	e.ratioFailed.Store(0)
	e.svc.forget()
	// Its latency is judged again from its answers once back: the
	// answers that ejected it must not eject it again. Only the latency
	// is forgotten: its calls in flight and learnt limits (flow control)
	// stay true.
	if ls := e.lat.Load(); ls != nil {
		for _, m := range *ls {
			m.forget()
		}
	}
	e.why.Store(&why)
}
