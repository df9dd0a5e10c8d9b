package pool

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
)

// Endpoint is one replica of an upstream: its address, its connections on
// the gRPC path (the fast path keeps its own pool to the same address),
// and what the picker reads of it: whether its connections are up, the
// calls in flight, its recent latency, and whether it is ejected.
type Endpoint struct {
	addr string
	// relayAddr is the host:port the fast path dials; "" keeps its
	// calls on the gRPC path.
	relayAddr string
	conns     []*grpc.ClientConn
	next      atomic.Uint32

	// up: one of its connections is READY (watch); a connection that is
	// not is skipped by the picker, which so never sends a call to a
	// replica it cannot reach.
	up atomic.Bool
	// inFlight counts its calls in progress, on both paths.
	inFlight atomic.Int64
	// cost is its peak EWMA of call latency, in nanoseconds (float64
	// bits); stamp when it was last updated (unix nanoseconds).
	cost, stamp atomic.Uint64
	// Outlier ejection (outlier.go).
	fails        atomic.Int32 // failures in a row
	ejectedUntil atomic.Int64 // unix nanoseconds; 0: not ejected
	ejections    atomic.Int32 // how many times it was ejected
	// since is when it last became able to take calls (connected again,
	// back from an ejection; unix nanoseconds, 0: from the start), for
	// its slow start.
	since atomic.Int64
	why   atomic.Pointer[string]
	// calls and failed count its calls, for the API and metrics.
	calls, failed atomic.Uint64
	// The calls that judged it (answers and failures) in the current
	// window of ratioWindow, for ejection on a failure ratio (outlier.go);
	// ratioEpoch is the window's number.
	ratioCalls, ratioFailed atomic.Int32
	ratioEpoch              atomic.Int64
	// svc is its service time for its calls that name no model, for
	// ejection on latency (outlier.go); a model's is in lat.
	svc serviceMin
	// answers counts its successful answers since it was last admitted.
	answers atomic.Int32
	// models is what it said of its models (endpoint_models.go);
	// modelsMu serialises its writers.
	models   atomic.Pointer[modelSet]
	modelsMu sync.Mutex
	// lat is its answers' latency per model (endpoint_latency.go);
	// latMu serialises adding a model.
	lat   atomic.Pointer[latencies]
	latMu sync.Mutex

	stop    context.CancelFunc
	watched sync.WaitGroup
}

// Address is the endpoint's dial target (host:port).
func (e *Endpoint) Address() string { return e.addr }

// Conn returns the endpoint's next connection, round robin.
func (e *Endpoint) Conn() *grpc.ClientConn {
	if len(e.conns) == 1 {
		return e.conns[0]
	}
	return e.conns[int(e.next.Add(1)-1)%len(e.conns)]
}

// watch keeps up current: the endpoint is up while one of its
// connections is READY. An idle connection is asked to connect again, so
// gRPC's reconnection (with its backoff) is the probe that brings a
// replica back.
func (e *Endpoint) watch() {
	ctx, cancel := context.WithCancel(context.Background())
	e.stop = cancel
	states := make([]atomic.Int32, len(e.conns))
	for i, cc := range e.conns {
		states[i].Store(int32(cc.GetState()))
		e.watched.Add(1)
		go func() {
			defer e.watched.Done()
			for {
				s := cc.GetState()
				states[i].Store(int32(s))
				up := false
				for j := range states {
					up = up || connectivity.State(states[j].Load()) == connectivity.Ready
				}
				if e.up.Swap(up) != up && up {
					e.since.Store(time.Now().UnixNano()) // back: a slow start
				}
				if s == connectivity.Idle {
					cc.Connect()
				}
				if !cc.WaitForStateChange(ctx, s) {
					return
				}
			}
		}()
	}
}

// stopWatch stops the watchers, leaving the connections open.
func (e *Endpoint) stopWatch() {
	if e.stop != nil {
		e.stop()
	}
	e.watched.Wait()
}

// close stops watching and closes the connections.
func (e *Endpoint) close() error {
	if e.stop != nil {
		e.stop()
	}
	var err error
	for _, c := range e.conns {
		if cerr := c.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}
	e.watched.Wait()
	return err
}

// costDecay is the time constant of the latency EWMA: Finagle's peak EWMA
// default. A slower answer than the current cost is taken at once (the
// peak); faster ones pull it down over about this long, so a replica that
// became slow is avoided at its first slow answer and tried again as its
// cost decays.
const costDecay = 10 * time.Second

// peakStep is the most one answer raises an endpoint's cost by: a
// factor. One slow answer is one sample, and on a busy machine a replica
// of a sub-millisecond model answers one call in a hundred ten or fifty
// times slower (a pause, a descheduled process): taken whole, such a
// peak kept every call off the replica for the 10 to 30 s its cost took
// to decay, and a replica without calls goes cold and answers slower
// still. A replica that really became slower reaches its cost in a few
// answers (4x in two).
const peakStep = 2.0

// minPull is the least share of the way to its latency that one answer
// faster than an endpoint's cost pulls the cost down by. Decayed by time
// alone (costDecay), a replica answering a hundred calls a second took
// about ten seconds to forget one slow answer (a pause, a call that
// waited behind another): its cost sat near the slowest of its last
// thousand answers. In a healthy pool of 5 ms replicas on a busy machine
// the costs read 15 to 78 ms where the answers took 7.5 ms at the
// median, and wandered two or three times apart, so the picker sent
// calls behind busy replicas; and a replica 4x slower did not stand out
// from the others' inflated costs. With it, a slow answer is forgotten
// over some twenty answers; a replica that is slow answers above its
// cost every time, and one that answers nothing decays by time as
// before.
const minPull = 0.05

// observe folds one call's latency into the endpoint's cost.
func (e *Endpoint) observe(now time.Time, took time.Duration) {
	rtt := float64(took)
	t := uint64(now.UnixNano())
	for {
		oldBits := e.cost.Load()
		old := math.Float64frombits(oldBits)
		last := e.stamp.Load()
		next := rtt
		if old > 0 && rtt > peakStep*old {
			next = peakStep * old
		}
		if old > 0 && rtt < old {
			td := float64(int64(t - last))
			if int64(t-last) < 0 {
				td = 0
			}
			w := min(math.Exp(-td/float64(costDecay)), 1-minPull)
			next = old*w + rtt*(1-w)
		}
		if e.cost.CompareAndSwap(oldBits, math.Float64bits(next)) {
			e.stamp.Store(t)
			return
		}
	}
}

// observeAtLeast raises the endpoint's cost to took, a latency it is known
// to exceed, when took is above its cost now (decayed); a lower bound
// under the cost says nothing.
func (e *Endpoint) observeAtLeast(now time.Time, took time.Duration) {
	t := now.UnixNano()
	for {
		oldBits := e.cost.Load()
		if float64(took) <= e.costAt(t) {
			return
		}
		if e.cost.CompareAndSwap(oldBits, math.Float64bits(float64(took))) {
			e.stamp.Store(uint64(t))
			return
		}
	}
}

// costAt is the endpoint's latency cost at now: its peak EWMA, decayed
// for the time since its last answer as if answers since had been
// instant (Finagle's peak EWMA), so a replica that got no calls because it
// was slow is tried again after a while; 0 when never measured.
func (e *Endpoint) costAt(now int64) float64 {
	c := math.Float64frombits(e.cost.Load())
	if c <= 0 {
		return 0
	}
	if td := now - int64(e.stamp.Load()); td > 0 {
		c *= math.Exp(-float64(td) / float64(costDecay))
	}
	return c
}

// costFloor is added to every endpoint's cost in the picker's score: a
// difference of latency well under a millisecond is nothing a caller
// notices, and between replicas of a sub-millisecond model it is noise
// (a cold replica, a pause); their calls in flight decide then, as
// least-request would. Above a few milliseconds the latency decides, as
// before.
const costFloor = float64(time.Millisecond)

// load is the picker's score at t of an endpoint whose cost is c, lower
// is better: the cost (plus costFloor) times the calls it would have in
// flight with this one, over its slow-start weight.
func (e *Endpoint) load(c float64, t int64, slowStart time.Duration) float64 {
	return (c + costFloor) * float64(e.inFlight.Load()+1) / e.weight(t, slowStart)
}

// seedCost starts the cost of e, never measured (new to the pool), at
// the cheapest of the others' at t, as the picker counted it before its
// first answer: its first answer is a peak over that (peakStep), not a
// cost of its own taken whole (the first call of a replica just
// connected is often its slowest).
func (u *Pool) seedCost(e *Endpoint, t int64) {
	cheapest := 0.0
	for _, x := range u.eps.Load().list {
		if c := x.costAt(t); x != e && c > 0 && (cheapest == 0 || c < cheapest) {
			cheapest = c
		}
	}
	if cheapest > 0 && e.cost.CompareAndSwap(0, math.Float64bits(cheapest)) {
		e.stamp.Store(uint64(t))
	}
}

// DefaultEndpointSlowStart is UpstreamOptions.SlowStart's default.
const DefaultEndpointSlowStart = 5 * time.Second

// minWeight is a slow start's first share: a tenth, as Envoy's
// min_weight_percent defaults to.
const minWeight = 0.1

// weight is e's share of calls at t against an endpoint long in the
// pool, while it ramps from minWeight to 1 over slowStart after it became
// able to take calls: a replica just started (a cold GPU, caches to
// warm) or back from an ejection is not handed every call at once
// because its queue is empty.
func (e *Endpoint) weight(t int64, slowStart time.Duration) float64 {
	s := e.since.Load()
	if slowStart <= 0 || s == 0 || t-s >= int64(slowStart) {
		return 1
	}
	return max(minWeight, float64(t-s)/float64(slowStart))
}

// retireGrace is how long a removed endpoint waits before it looks at
// its calls in flight.
const retireGrace = time.Second

// Retire closes a removed endpoint once its calls in flight ended, or
// after drain. It first waits a moment: a call that picked e just before
// the new set was stored counts itself in flight a little after.
func (e *Endpoint) Retire(drain time.Duration) {
	deadline := time.Now().Add(drain)
	time.Sleep(min(retireGrace, drain))
	for e.inFlight.Load() > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	_ = e.close()
}

// NewEndpoint is an endpoint at addr that sends its calls on conns in
// turn (at least one), not yet watched (Watch); relayAddr is the
// host:port the fast path dials ("" keeps its calls on the gRPC path).
// It takes ownership of conns: Close closes them.
func NewEndpoint(addr, relayAddr string, conns []*grpc.ClientConn) *Endpoint {
	return &Endpoint{addr: addr, relayAddr: relayAddr, conns: conns}
}

// ForgetCost starts e's latency cost afresh, as if never measured.
func (e *Endpoint) ForgetCost() { e.cost.Store(0) }

// SetReady records the models e reported ready (nil: it cannot say).
func (e *Endpoint) SetReady(ready map[string]bool) { e.setReady(ready) }

// AssumeUp marks e up without watching it: connections handed in,
// whose owner knows them.
func (e *Endpoint) AssumeUp() { e.up.Store(true) }

// RelayAddr is the host:port the fast path dials for e; "" none.
func (e *Endpoint) RelayAddr() string { return e.relayAddr }

// Conns are e's connections.
func (e *Endpoint) Conns() []*grpc.ClientConn { return e.conns }

// Up says whether one of e's connections is ready.
func (e *Endpoint) Up() bool { return e.up.Load() }

// InFlight is how many calls e has in progress, on both paths.
func (e *Endpoint) InFlight() int64 { return e.inFlight.Load() }

// Holds says whether e may hold model at t: it reported it ready, or
// cannot say, and has not answered NOT_FOUND for it lately.
func (e *Endpoint) Holds(model string, t int64) bool { return e.holds(model, t) }

// MarkAbsent records that e answered NOT_FOUND for model at t: the next
// calls of the model go to endpoints that hold it.
func (e *Endpoint) MarkAbsent(model string, t int64) { e.markAbsent(model, t) }

// ModelsKnown says whether e was asked for its models yet.
func (e *Endpoint) ModelsKnown() bool { return e.models.Load() != nil }

// ModelInFlight is how many calls of model e counts in progress (once
// its pool counts per model).
func (e *Endpoint) ModelInFlight(model string) int64 {
	if em := e.endpointModelOf(model); em != nil {
		return int64(em.inFlight.Load())
	}
	return 0
}

// Watch keeps Up current until Close or StopWatch.
func (e *Endpoint) Watch() { e.watch() }

// StopWatch stops watching, leaving the connections open.
func (e *Endpoint) StopWatch() { e.stopWatch() }

// Close stops watching and closes the connections.
func (e *Endpoint) Close() error { return e.close() }
