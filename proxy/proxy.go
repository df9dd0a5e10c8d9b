package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	_ "google.golang.org/grpc/encoding/gzip" // accept gzip-compressed calls from clients
	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/keepalive"

	"github.com/infergate/infergate/budget"
	"github.com/infergate/infergate/monitor"
	"github.com/infergate/infergate/proxy/failurelog"
	"github.com/infergate/infergate/proxy/flowstats"
	"github.com/infergate/infergate/proxy/h2relay"
	"github.com/infergate/infergate/proxy/route"
	"github.com/infergate/infergate/release"
)

// Proxy forwards every gRPC call it receives, whatever the method, to the
// upstream its Director picks, and measures each call. Serve it with the
// grpc.Server from NewServer, or add ServerOptions to your own. A Proxy is
// safe for concurrent use.
type Proxy struct {
	director Director
	rec      Recorder
	log      *slog.Logger
	// reqLog gets one line per call; nil: none.
	reqLog     *slog.Logger
	failures   *failurelog.Log
	maxMsgSize int
	frontDoor  FrontDoor
	// budget bounds the bytes held for calls on both paths: the relay's
	// streams and the calls grpc-go's server reads (Claims).
	budget *budget.Budget
	now    func() time.Time
	// batcher takes ModelInfer and Predict calls of batchable models; nil:
	// no batching (see batch.go).
	batcher Batcher
	// router routes calls that name a model (package route); nil: every call
	// goes to the director's upstream.
	router *route.Router
	// releases splits calls of a model between two targets (release.go);
	// nil: none.
	releases *release.Set
	// tracing makes spans (trace.go); nil: none.
	tracing *tracing
	// inputShapes: every recorded inference call's Sample carries its
	// inputs (features.go).
	inputShapes bool

	upstreamTimeout time.Duration
	maxInFlight     int64
	calls           atomic.Int64 // calls in progress
	rejected        atomic.Int64 // calls refused by maxInFlight
	panics          atomic.Int64
	// invokers caches the batcher.Invoker of each *Upstream.
	invokers sync.Map

	// callOpts are the options of every upstream call, built once: the
	// raw codec first, then the message size limits (see callOptions).
	callOpts []grpc.CallOption
	// gauges caches Recorder.InFlight per *upstreamDest.
	gauges sync.Map

	// relay is the fast path (fastpath.go), made by Relay.
	relay      *h2relay.Server
	relayOnce  sync.Once
	relayPools sync.Map // *Upstream → its *relayEntry
	// flow is flow control's settings (flow.go), off until set;
	// flowStats its counts per tenant (package flowstats).
	flow      flowState
	flowStats flowstats.Tenants
	relayMu   sync.Mutex // serialises moveRelayPool
	// unary calls the relay routed, by where they went.
	forwarded, served, handedOn atomic.Int64
	// shadows are the releases' shadow copies in flight (shadow.go),
	// which Close waits for; shadowSkipped counts the copies shed for
	// want of room, shadowCompared those whose answers were compared.
	shadows                       sync.WaitGroup
	shadowSkipped, shadowCompared atomic.Int64
}

// New returns a Proxy that routes with director. It fails on a nil director
// and on options that do not fit together.
func New(director Director, opts ...Option) (*Proxy, error) {
	if director == nil {
		return nil, errors.New("proxy: nil director")
	}
	var o options
	for _, opt := range opts {
		opt.apply(&o)
	}
	if o.logRequests && o.logger == nil {
		return nil, errors.New("proxy: WithLogRequests needs WithLogger")
	}
	if o.logger == nil {
		o.logger = slog.New(slog.DiscardHandler)
	}
	if o.maxMsgSize <= 0 {
		o.maxMsgSize = DefaultMaxMsgSize
	}
	if o.now == nil {
		o.now = time.Now
	}
	o.frontDoor = o.frontDoor.withDefaults()
	reqLog := o.requestLogger
	if reqLog == nil && o.logRequests {
		reqLog = o.logger
	}
	p := &Proxy{
		director:        director,
		rec:             o.recorder,
		log:             o.logger,
		reqLog:          reqLog,
		failures:        failurelog.New(o.logger, o.logInterval, o.now),
		maxMsgSize:      o.maxMsgSize,
		now:             o.now,
		batcher:         o.batcher,
		router:          o.router,
		releases:        o.releases,
		tracing:         o.tracing,
		inputShapes:     o.inputShapes,
		upstreamTimeout: max(o.upstreamTimeout, 0),
		maxInFlight:     int64(max(o.maxInFlight, 0)),
		frontDoor:       o.frontDoor,
		budget:          budget.New(o.frontDoor.MaxBufferedBytes),
		callOpts: []grpc.CallOption{
			grpc.ForceCodecV2(rawCodec{}),
			grpc.MaxCallRecvMsgSize(o.maxMsgSize),
			grpc.MaxCallSendMsgSize(o.maxMsgSize),
		},
	}
	if o.flow != nil {
		p.SetFlowControl(*o.flow)
	}
	return p, nil
}

// ServerOptions returns the options that make a grpc.Server proxy every
// call: the unknown-service handler, the raw codec and the message size
// limits. Services registered on that server are served there and not
// proxied; register none to proxy everything, grpc.health.v1 included.
func (p *Proxy) ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.UnknownServiceHandler(p.handle),
		// A fixed set of goroutines serves new streams (grpc-go spawns
		// more when all are busy, so long streams cannot starve others):
		// no goroutine start and stack growth per call. 20-25% more small
		// calls per second in BenchmarkProxyUnaryParallel on 2 cores. With
		// one worker per core, 8 concurrent callers still started a
		// goroutine for most calls, and growing its stack (the upstream
		// call is deep) took 10% of the proxy's CPU; enough idle workers
		// for the usual concurrency cost a few KiB of stack each.
		grpc.NumStreamWorkers(uint32(streamWorkers())),
		grpc.ForceServerCodecV2(rawCodec{}),
		grpc.MaxRecvMsgSize(p.maxMsgSize),
		grpc.MaxSendMsgSize(p.maxMsgSize),
		experimental.BufferPool(bufferPool),
		grpc.InitialWindowSize(serverStreamWindow),
		grpc.InitialConnWindowSize(transportConnWindow),
		grpc.ReadBufferSize(transportBuffer),
		grpc.WriteBufferSize(transportBuffer),
		// gRPC's default policy closes connections of clients that ping
		// more often than every 5 minutes; a proxy should not be stricter
		// than the model servers clients were tuned against.
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{
			MinTime:             10 * time.Second,
			PermitWithoutStream: true,
		}),
		// The front door's limits hold on the gRPC path too (a TLS
		// listener, or the fast path off).
		grpc.MaxConcurrentStreams(p.frontDoor.MaxConcurrentStreams),
		grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: p.frontDoor.idle()}),
	}
}

// NewServer returns a grpc.Server with ServerOptions and then extra. Stop
// it with GracefulStop to let calls in flight finish: their upstream calls
// run on the call's context, which GracefulStop does not cancel.
func (p *Proxy) NewServer(extra ...grpc.ServerOption) *grpc.Server {
	return grpc.NewServer(append(p.ServerOptions(), extra...)...)
}

// Stats are the proxy's own counters.
type Stats struct {
	// InFlight is the number of calls in progress.
	InFlight int64
	// RejectedInFlight counts calls refused by WithMaxInFlight.
	RejectedInFlight int64
	// Panics counts recovered panics (each failed the calls it touched
	// with INTERNAL).
	Panics int64
	// The unary calls the relay routed (Relay), by path: Forwarded frame
	// by frame to the upstream, Served by the proxy's handler on the
	// relay's side, HandedOn to the grpc.Server (a request that is not one
	// uncompressed message). Streams and the proxy's own services go to
	// the grpc.Server uncounted here.
	Forwarded, Served, HandedOn int64
	// Buffer is the byte budget (WithFrontDoor) of both paths: its
	// limit, the bytes calls hold of it now, the calls that waited for
	// room and those refused because none came in time.
	Buffer budget.Stats
	// ShadowSkipped counts the releases' shadow copies skipped because the
	// byte budget or the target's flow-control gate had no room at once;
	// ShadowCompared the copies whose answers were compared.
	ShadowSkipped, ShadowCompared int64
}

// Stats returns the proxy's counters; safe for concurrent use.
func (p *Proxy) Stats() Stats {
	return Stats{InFlight: p.calls.Load(), RejectedInFlight: p.rejected.Load(), Panics: p.panics.Load(),
		Forwarded: p.forwarded.Load(), Served: p.served.Load(), HandedOn: p.handedOn.Load(),
		Buffer: p.bufferStats(), ShadowSkipped: p.shadowSkipped.Load(), ShadowCompared: p.shadowCompared.Load()}
}

// panicked counts and logs a recovered panic and returns the error of the
// call it failed (INTERNAL, by statusOf).
func (p *Proxy) panicked(ctx context.Context, v any, where string) error {
	p.panics.Add(1)
	p.log.LogAttrs(ctx, slog.LevelError, "panic recovered: the call fails with INTERNAL, the proxy keeps serving",
		slog.String("where", where), slog.String("panic", fmt.Sprint(v)), slog.String("stack", string(debug.Stack())))
	return &internalError{msg: "internal error in the " + where}
}

// Close writes the failure counts not yet logged and closes the director
// if it implements io.Closer (StaticDirector closes its upstream's
// connections). Stop the server first.
func (p *Proxy) Close() error {
	p.shadows.Wait() // bounded: a copy lasts at most shadowWait
	p.failures.Close()
	if c, ok := p.director.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

// inFlight returns the in-flight gauge of an upstream where it is (d),
// asking the recorder once per place: after a move, calls count under
// the new name, and each call takes its gauge down where it went up.
func (p *Proxy) inFlight(d *upstreamDest) *monitor.Gauge {
	if g, ok := p.gauges.Load(d); ok {
		return g.(*monitor.Gauge)
	}
	g, _ := p.gauges.LoadOrStore(d, p.rec.InFlight(d.name))
	return g.(*monitor.Gauge)
}

// streamWorkers is how many goroutines wait to serve new streams: more
// than the concurrent calls a proxy usually has in flight, so that a call
// rarely starts a goroutine of its own.
func streamWorkers() int { return max(64, 4*runtime.GOMAXPROCS(0)) }
