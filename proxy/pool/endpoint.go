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
	// calls and failed count its calls, for the API and metrics.
	calls, failed atomic.Uint64

	// What the picker weighs (load.go), what judges it for ejection
	// (outlier_state.go), the models it holds (models_held.go).
	callLoad
	outlierState
	modelsHeld
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
