// Package pool is an upstream's replicas (endpoints) and the choice of one
// for each call: their connections and whether they are up, the pick
// (peak EWMA of infergate's own latency, calls in flight, slow start),
// sequences and affinity keys kept on one replica, the models each holds,
// per-model latency, outlier ejection on errors and on latency, and the
// addresses of a dns:/// name.
//
// A call's endpoint is taken with Begin after a pick and given back with
// Release, once; package proxy pairs them in one place (its handle), so
// this package never sees a call, only picks and verdicts.
package pool

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// MaxConns bounds the connections to one endpoint (the proxy's
// upstream_conns, an upstream's conns).
const MaxConns = 64

// Pool is the endpoints of one upstream. Its zero value is an empty pool:
// Init it, then Set its endpoints.
type Pool struct {
	eps atomic.Pointer[endpoints]
	// balance is how a call's endpoint is picked; next is round robin's
	// turn.
	balance Balance
	next    atomic.Uint32
	// slowStart is its endpoints' ramp; 0 or negative none.
	slowStart time.Duration
	// ejectMu serialises ejections, which count the pool's ejected.
	ejectMu sync.Mutex
	// spreadAt is when a model's latency across the pool was last judged
	// for ejection (unix nanoseconds; outlier.go).
	spreadAt atomic.Int64
	// seqs pins each sequence to its endpoint (affinity.go).
	seqs sequences
	// affinity is the request header keeping a client's calls on one
	// endpoint (affinity.go); nil none.
	affinity atomic.Pointer[string]
	// perModel is set once flow control orders a model of the pool:
	// its endpoints then count their calls in flight per model.
	perModel atomic.Bool
	// stopModels ends the poll of its endpoints' models; pokeModels asks
	// for one now (endpoints changed).
	stopModels context.CancelFunc
	pokeModels chan struct{}
}

// endpoints is a pool's set of endpoints; replaced whole.
type endpoints struct {
	list []*Endpoint
}

// Members is the pool's set of endpoints now: the same value until the
// set changes (Replace), so a cache of what belongs to each endpoint
// (the relay's pools) knows when to renew itself.
// list is its endpoints, read with it.
func (u *Pool) Members() (set any, list []*Endpoint) {
	s := u.eps.Load()
	return s, s.list
}

// Init sets how the pool picks and how long a new endpoint's slow start
// lasts (0 or negative: none). Call it before the pool is used.
func (u *Pool) Init(b Balance, slowStart time.Duration) {
	u.balance, u.slowStart = b, slowStart
}

// Replace makes list the pool's endpoints (at least one).
func (u *Pool) Replace(list []*Endpoint) { u.eps.Store(&endpoints{list: list}) }

// Endpoints returns the pool's endpoints now.
func (u *Pool) Endpoints() []*Endpoint { return u.eps.Load().list }

// Len is how many endpoints the pool has now.
func (u *Pool) Len() int { return len(u.eps.Load().list) }

// Balance is how the pool picks.
func (u *Pool) Balance() Balance { return u.balance }

// SlowStart is the ramp of a new or returning endpoint.
func (u *Pool) SlowStart() time.Duration { return u.slowStart }

// CountPerModel makes the endpoints count their calls in flight per
// model from now on (flow control's limits need them).
func (u *Pool) CountPerModel() {
	if !u.perModel.Load() {
		u.perModel.Store(true)
	}
}

// PollModels asks each endpoint for its ready models now and every few
// seconds, and at once after PokeModels, until StopPolling.
func (u *Pool) PollModels() {
	ctx, cancel := context.WithCancel(context.Background())
	u.stopModels, u.pokeModels = cancel, make(chan struct{}, 1)
	go u.pollModels(ctx, u.pokeModels)
}

// PokeModels asks for the endpoints' models now (endpoints changed).
func (u *Pool) PokeModels() {
	if u.pokeModels == nil {
		return
	}
	select {
	case u.pokeModels <- struct{}{}:
	default:
	}
}

// StopPolling ends the poll of the endpoints' models.
func (u *Pool) StopPolling() {
	if u.stopModels != nil {
		u.stopModels()
	}
}

// Pick chooses the endpoint for one call of model ("" none) at now (unix
// nanoseconds), leaving avoid out unless it is the only choice (nil:
// none). It never blocks and counts nothing: Begin does.
func (u *Pool) Pick(now int64, model string, avoid *Endpoint) *Endpoint {
	return u.pickAvoiding(now, model, avoid)
}

// PickCall is Pick for one call of method whose request is msg and whose
// affinity header carries key ("" none): a call of a sequence goes where
// the sequence is pinned (pinned true: it must go nowhere else), one with
// a key where the key maps. It fails for a sequence that cannot be kept.
func (u *Pool) PickCall(now time.Time, method, model string, msg []byte, key string) (e *Endpoint, pinned bool, err error) {
	return u.pickCall(now, method, model, msg, key)
}

// Begin counts a call of model ("" none known) starting on e.
func (u *Pool) Begin(e *Endpoint, model string) { u.begin(e, model) }

// Release ends a call of model that Begin counted on e: at is when it
// ended, took its latency, v what it says of e.
func (u *Pool) Release(e *Endpoint, model string, at time.Time, took time.Duration, v Verdict) {
	u.release(e, model, at, took, v)
}

// Pooled says whether a call of method must be read for its sequence or
// its affinity header to be picked (PickCall).
func (u *Pool) Pooled(method string) bool { return u.pooled(method) }

// AffinityHeader is the pool's affinity header, "" when it has none or
// is no pool.
func (u *Pool) AffinityHeader() string { return u.affinityHeader() }

// SetAffinityHeader makes name (lower case; "" none) the pool's affinity
// header.
func (u *Pool) SetAffinityHeader(name string) { u.setAffinityHeader(name) }

// ModelHeld says whether some endpoint holds model at t (or none can
// say).
func (u *Pool) ModelHeld(model string, t int64) bool { return u.modelHeld(model, t) }
