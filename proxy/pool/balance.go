package pool

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
)

// Balance is how an upstream with several endpoints picks one per call.
type Balance uint8

const (
	// BalanceLatency (the default) sends a call to the endpoint with the
	// lowest load: its recent latency (a peak EWMA of infergate's own
	// measurements) times its calls in flight with this one. Every
	// endpoint is weighed in pools of up to scanAll; two taken at random
	// in larger ones (two random choices keep a stale view from sending
	// every call to one replica). The latency moves calls off a slow one
	// before it fails anything.
	BalanceLatency Balance = iota
	// BalanceLeastRequest takes two at random and keeps the one with
	// fewer calls in flight.
	BalanceLeastRequest
	// BalanceRoundRobin takes each in turn.
	BalanceRoundRobin
)

// Balances are the names of the Balance values, as YAML spells them.
var Balances = []string{"latency", "least_request", "round_robin"}

func (b Balance) String() string { return Balances[b] }

// ParseBalance reads a Balance by name; "" is the default.
func ParseBalance(s string) (Balance, error) {
	if s == "" {
		return BalanceLatency, nil
	}
	for i, n := range Balances {
		if n == s {
			return Balance(i), nil
		}
	}
	return 0, fmt.Errorf("%q is not one of %s", s, strings.Join(Balances, ", "))
}

// usable says whether e may take a call at now: its connections are up
// and it is not ejected.
func (e *Endpoint) usable(now int64) bool {
	return e.up.Load() && e.ejectedUntil.Load() <= now
}

// UsableFor says whether e may take a call of model at now: usable, and
// holding the model (endpoint_models.go).
func (e *Endpoint) UsableFor(model string, now int64) bool {
	return e.usable(now) && e.holds(model, now)
}

// takes says whether e may take a call of model at now that must not go
// to avoid (nil: any).
func (e *Endpoint) takes(model string, now int64, avoid *Endpoint) bool {
	return e != avoid && e.UsableFor(model, now)
}

// pick chooses the endpoint for one call. It never blocks and allocates
// nothing. When no endpoint is usable it returns one anyway (up if any
// is, ejected or not), so the call fails as the replica makes it fail,
// or reaches a replica that came back before the watcher saw it.
//
// model ("" for none) narrows the choice to endpoints holding it, unless
// none does: then the call goes as if it named none, for the replica's
// own answer.
func (u *Pool) pick(now int64, model string) *Endpoint {
	return u.pickAvoiding(now, model, nil)
}

// pickAvoiding is pick leaving avoid out of the choice (a hedge goes to
// another endpoint than its primary's) unless it is the only one.
func (u *Pool) pickAvoiding(now int64, model string, avoid *Endpoint) *Endpoint {
	list := u.eps.Load().list
	n := len(list)
	if n == 1 {
		return list[0]
	}
	if model != "" && !u.modelHeld(model, now) {
		model = ""
	}
	if u.balance == BalanceRoundRobin {
		start := int(u.next.Add(1) - 1)
		for k := range n {
			if e := list[(start+k)%n]; e.takes(model, now, avoid) {
				if k > 0 {
					u.next.Add(uint32(k)) // the next turn is the one after e's
				}
				return e
			}
		}
		return fallbackPick(list, now, start)
	}
	if n <= scanAll && u.balance == BalanceLatency {
		return u.pickLeastLoaded(list, now, model, avoid)
	}
	i := rand.IntN(n)
	j := rand.IntN(n - 1)
	if j >= i {
		j++
	}
	a, b := list[i], list[j]
	au, bu := a.takes(model, now, avoid), b.takes(model, now, avoid)
	switch {
	case !au && !bu:
		for k := range n {
			if e := list[(i+k)%n]; e.takes(model, now, avoid) {
				return e
			}
		}
		return fallbackPick(list, now, i)
	case !au:
		return b
	case !bu:
		return a
	}
	if u.balance == BalanceLeastRequest {
		wa, wb := a.weight(now, u.slowStart), b.weight(now, u.slowStart)
		if float64(b.inFlight.Load()+1)/wb < float64(a.inFlight.Load()+1)/wa {
			return b
		}
		return a
	}
	ca, cb := a.costAt(now), b.costAt(now)
	// One never measured (new, or back from an ejection) counts as
	// costing what the other does: its calls in flight decide.
	if ca == 0 {
		ca = cb
	} else if cb == 0 {
		cb = ca
	}
	if b.load(cb, now, u.slowStart) < a.load(ca, now, u.slowStart) {
		return b
	}
	return a
}

// scanAll is the largest pool whose every endpoint the latency picker
// weighs for each call: a few atomic loads each, and the least loaded of
// all is a better choice than the better of two (with four replicas,
// two random choices missed the idle one often enough to double the
// healthy p99 against HAProxy's leastconn). Larger pools take two at
// random.
const scanAll = 16

// pickLeastLoaded is the usable endpoint with the lowest load, ties
// broken at random; an endpoint never measured counts as costing the
// cheapest measured one.
func (u *Pool) pickLeastLoaded(list []*Endpoint, now int64, model string, avoid *Endpoint) *Endpoint {
	n := len(list)
	var costs [scanAll]float64
	cheapest := 0.0
	for i, e := range list {
		c := e.costAt(now)
		costs[i] = c
		if c > 0 && (cheapest == 0 || c < cheapest) {
			cheapest = c
		}
	}
	start := rand.IntN(n)
	var best *Endpoint
	bestLoad := 0.0
	for k := range n {
		i := (start + k) % n
		e := list[i]
		if !e.takes(model, now, avoid) {
			continue
		}
		c := costs[i]
		if c == 0 {
			c = cheapest
		}
		if l := e.load(c, now, u.slowStart); best == nil || l < bestLoad {
			best, bestLoad = e, l
		}
	}
	if best == nil {
		return fallbackPick(list, now, start)
	}
	return best
}

// fallbackPick is pick's answer when no endpoint is usable: one whose
// connections are up (ejected), else list[start%n].
func fallbackPick(list []*Endpoint, now int64, start int) *Endpoint {
	n := len(list)
	for k := range n {
		if e := list[(start+k)%n]; e.up.Load() {
			return e
		}
	}
	return list[start%n]
}

// begin counts a call of model ("" for none known) starting on e; only
// a handle (handle.go) calls it, and release, paired with it.
func (u *Pool) begin(e *Endpoint, model string) {
	e.inFlight.Add(1)
	e.calls.Add(1)
	if model != "" && u.perModel.Load() {
		e.flowBegin(model)
	}
}

// Verdict is how a call failed, as its endpoint's evidence.
type Verdict uint8

const (
	Answered Verdict = iota
	// NoVerdict: the call says nothing of the endpoint (the
	// client gave up, the call's own deadline, the client's error).
	NoVerdict
	// Failed: the replica answered with a server error.
	Failed
	// Unreachable: the call never got an answer from it (no
	// connection, or the connection died under it).
	Unreachable
)

// VerdictOf judges a finished call for its endpoint: code is its status,
// fromUpstream whether the replica itself sent it, ctxDone whether the
// call's context ended (the client left or its deadline passed).
func VerdictOf(code codes.Code, fromUpstream, ctxDone bool) Verdict {
	switch {
	case code == codes.OK:
		return Answered
	case ctxDone:
		return NoVerdict
	case !fromUpstream && (code == codes.Unavailable || code == codes.Canceled):
		return Unreachable
	case fromUpstream && (code == codes.Unavailable || code == codes.Internal || code == codes.Unknown || code == codes.DataLoss):
		return Failed
	}
	return NoVerdict
}

// release ends a call of model ("" for none known) begin counted: took
// is its latency, f how it failed. A success feeds the endpoint's cost
// and its latency for the model; failures feed its ejection (outlier.go).
func (u *Pool) release(e *Endpoint, model string, now time.Time, took time.Duration, f Verdict) {
	e.inFlight.Add(-1)
	if model != "" && u.perModel.Load() {
		e.flowEnd(model, now, took, f == Answered)
	}
	switch f {
	case Answered:
		if e.fails.Load() != 0 {
			e.fails.Store(0)
		}
		if n := len(u.eps.Load().list); n > 1 { // one endpoint: no choice to inform
			t := now.UnixNano()
			e.countJudged(t, false)
			if e.cost.Load() == 0 {
				u.seedCost(e, t)
			}
			e.observe(now, took)
			sm := e.observeModel(model, t, took)
			if e.answers.Add(1) >= latencyEvidence && n >= 3 && n <= scanAll {
				if sm != nil {
					u.checkLatency(e, model, sm, now)
				}
				u.checkModelLatency(model, now)
			}
		}
	case Failed, Unreachable:
		e.failed.Add(1)
		u.noteFailure(e, now, f)
	case NoVerdict:
		// An answer it never gave (the client left, its deadline
		// passed, a hedge won): its latency was at least took. Above
		// its cost that is taken as a peak, so a replica that hangs is
		// avoided as one that got slow is; without it, its cost decayed
		// for every second without answers, as if they had been
		// instant, and the picker sent it more and more of the calls
		// it never answered. Below its cost it says nothing.
		if took > 0 && len(u.eps.Load().list) > 1 {
			e.observeAtLeast(now, took)
		}
	}
}
