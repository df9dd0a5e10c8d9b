package load

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Run executes one load run against cfg.Target and returns its Result. The
// run stops when Duration (after Warmup) has passed, when Requests measured
// requests have been sent, or when ctx is cancelled; a cancelled ctx is not
// an error. Requests still in flight then finish, each bounded by Timeout,
// and are counted.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	return runWithClock(ctx, cfg, time.Now)
}

// runWithClock is Run with the clock that stamps intended times and
// completions; tests jump it forward to make a stall long without sleeping.
func runWithClock(ctx context.Context, cfg Config, now func() time.Time) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	conns, err := dial(ctx, &cfg)
	if err != nil {
		return nil, err
	}
	defer func() {
		for _, cc := range conns {
			_ = cc.Close()
		}
	}()
	r := newRunner(&cfg, conns, now)
	return r.run(ctx), nil
}

// dial opens cfg.Conns connections and waits until each is ready, so that
// connection set-up never lands in the measured window of a run without
// warmup.
func dial(ctx context.Context, cfg *Config) ([]*grpc.ClientConn, error) {
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(
			grpc.ForceCodecV2(rawCodec{}),
			grpc.MaxCallRecvMsgSize(MaxMessageSize),
			grpc.MaxCallSendMsgSize(MaxMessageSize),
		),
	}
	wctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	conns := make([]*grpc.ClientConn, 0, cfg.Conns)
	fail := func(err error) ([]*grpc.ClientConn, error) {
		for _, cc := range conns {
			_ = cc.Close()
		}
		return nil, err
	}
	for range cfg.Conns {
		// passthrough: the target is a literal loopback address, so skip DNS.
		cc, err := grpc.NewClient("passthrough:///"+cfg.Target, opts...)
		if err != nil {
			return fail(fmt.Errorf("load: dial %s: %w", cfg.Target, err))
		}
		conns = append(conns, cc)
		cc.Connect()
	}
	for _, cc := range conns {
		for s := cc.GetState(); s != connectivity.Ready; s = cc.GetState() {
			if s == connectivity.Idle {
				cc.Connect()
			}
			if s == connectivity.TransientFailure {
				// Nothing listens there: say so now rather than after Timeout.
				return fail(fmt.Errorf("load: connect %s: connection failed", cfg.Target))
			}
			if !cc.WaitForStateChange(wctx, s) {
				return fail(fmt.Errorf("load: connect %s: not ready after %s (state %s)", cfg.Target, cfg.Timeout, s))
			}
		}
	}
	return conns, nil
}

// runner holds the state of one run.
type runner struct {
	cfg   *Config
	conns []*grpc.ClientConn
	now   func() time.Time
	rec   *recorder

	start, measureStart, end time.Time // end is zero without a Duration
	callCtx                  context.Context

	stop     chan struct{} // closed by halt
	haltOnce sync.Once
	haltAt   time.Time // written once under haltOnce, read after the loops end

	claimed   atomic.Int64 // measured requests sent, for Config.Requests
	done      atomic.Int64 // completed calls, warmup included (progress only)
	failed    atomic.Int64
	inflight  atomic.Int64
	late      atomic.Int64
	dropped   atomic.Int64
	respBytes atomic.Int64
	lastDone  atomic.Int64 // latest measured completion, ns since start
}

func newRunner(cfg *Config, conns []*grpc.ClientConn, now func() time.Time) *runner {
	shards := 16
	if cfg.Mode() == Closed && cfg.Concurrency < shards {
		shards = cfg.Concurrency
	}
	return &runner{cfg: cfg, conns: conns, now: now, rec: newRecorder(shards, cfg.Stream), stop: make(chan struct{})}
}

// halt ends the schedule once and remembers when.
func (r *runner) halt() {
	r.haltOnce.Do(func() {
		r.haltAt = r.now()
		close(r.stop)
	})
}

func (r *runner) stopped() bool {
	select {
	case <-r.stop:
		return true
	default:
		return false
	}
}

// claim reserves one measured request under Config.Requests; false means the
// budget is spent, and the run halts.
func (r *runner) claim() bool {
	if r.cfg.Requests <= 0 {
		return true
	}
	if r.claimed.Add(1) > r.cfg.Requests {
		r.halt()
		return false
	}
	return true
}

// budgetSpent reports whether every request under Config.Requests is sent.
func (r *runner) budgetSpent() bool {
	return r.cfg.Requests > 0 && r.claimed.Load() >= r.cfg.Requests
}

func (r *runner) run(ctx context.Context) *Result {
	// In-flight calls outlive ctx so that the tail of a stopped run is still
	// measured; Timeout bounds them.
	r.callCtx = context.WithoutCancel(ctx)
	if len(r.cfg.Metadata) > 0 {
		r.callCtx = metadata.NewOutgoingContext(r.callCtx, metadata.New(r.cfg.Metadata))
	}
	r.start = r.now()
	r.measureStart = r.start.Add(r.cfg.Warmup)
	if r.cfg.Duration > 0 {
		r.end = r.measureStart.Add(r.cfg.Duration)
		t := time.AfterFunc(r.end.Sub(r.now()), r.halt)
		defer t.Stop()
	}
	stopCtx := context.AfterFunc(ctx, r.halt)
	defer stopCtx()
	if r.cfg.Progress != nil && r.cfg.Warmup+r.cfg.Duration > 3*time.Second {
		done := make(chan struct{})
		defer close(done)
		go r.progress(done)
	}

	if r.cfg.Mode() == Open {
		r.openLoop()
	} else {
		r.closedLoop()
	}
	r.halt() // a run that ran out of schedule halts itself

	// The measured window ends at the halt (or the planned end), or when the
	// last measured response came back if that was later: a server that
	// drains a backlog after the window must not look faster than it was.
	measured := r.haltAt
	if !r.end.IsZero() && measured.After(r.end) {
		measured = r.end
	}
	if last := r.start.Add(time.Duration(r.lastDone.Load())); last.After(measured) {
		measured = last
	}
	res := &Result{
		Label:         r.cfg.Label,
		Mode:          r.cfg.Mode(),
		Target:        r.cfg.Target,
		Method:        r.cfg.Payload.Method,
		Model:         r.cfg.Payload.Model,
		Conns:         r.cfg.Conns,
		RequestBytes:  len(r.cfg.Payload.Body),
		Late:          r.late.Load(),
		Dropped:       r.dropped.Load(),
		ResponseBytes: r.respBytes.Load(),
	}
	if res.Mode == Open {
		res.Rate, res.Arrival = r.cfg.Rate, r.cfg.Arrival.String()
	} else {
		res.Concurrency = r.cfg.Concurrency
	}
	h, errs := r.rec.merge()
	res.fill(h, errs, max(measured.Sub(r.measureStart), 0))
	if r.cfg.Stream {
		res.Method = StreamMethod
		res.Stream = &StreamResult{hists: r.rec.mergeStream()}
		res.Stream.fill()
	}
	return res
}

// call sends one request and records it when measured. from is the time
// the latency is measured from: the actual send in the closed loop, the
// intended send in the open loop.
func (r *runner) call(cc *grpc.ClientConn, from time.Time, measured bool, shard int) {
	r.inflight.Add(1)
	if r.cfg.Stream {
		r.callStream(cc, from, measured, shard)
		r.inflight.Add(-1)
		return
	}
	ctx, cancel := context.WithTimeout(r.callCtx, r.cfg.Timeout)
	var out sink
	err := cc.Invoke(ctx, r.cfg.Payload.Method, r.cfg.Payload.Body, &out)
	cancel()
	latency := r.now().Sub(from)
	r.inflight.Add(-1)
	r.done.Add(1)
	code := status.Code(err)
	if code != codes.OK {
		r.failed.Add(1)
	}
	if !measured {
		return
	}
	r.noteDone(from.Add(latency))
	if code == codes.OK {
		r.respBytes.Add(int64(out.n))
	}
	r.rec.record(shard, latency, code)
}

// noteDone keeps the latest measured completion time, so that throughput
// counts the time stragglers took to drain.
func (r *runner) noteDone(t time.Time) {
	ns := int64(t.Sub(r.start))
	for {
		old := r.lastDone.Load()
		if ns <= old || r.lastDone.CompareAndSwap(old, ns) {
			return
		}
	}
}

// closedLoop runs Concurrency callers until the run halts.
func (r *runner) closedLoop() {
	var wg sync.WaitGroup
	for i := range r.cfg.Concurrency {
		wg.Go(func() { r.caller(i) })
	}
	wg.Wait()
}

// caller is one closed-loop client: send, wait, repeat.
func (r *runner) caller(i int) {
	if r.cfg.Stream {
		r.streamCaller(i)
		return
	}
	cc := r.conns[i%len(r.conns)]
	for !r.stopped() {
		t0 := r.now()
		measured := !t0.Before(r.measureStart)
		if measured && !r.claim() {
			return
		}
		r.call(cc, t0, measured, i)
	}
}

// openLoop walks the intended timeline and starts one goroutine per
// request, so a slow server never slows the schedule; only MaxInFlight can,
// and then the wait is counted as Late and included in the latency.
func (r *runner) openLoop() {
	s := newSchedule(r.start, r.cfg.Rate, r.cfg.Arrival, r.cfg.Seed)
	slots := make(chan struct{}, r.cfg.MaxInFlight)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	for seq := 0; ; seq++ {
		t := s.next()
		if !r.end.IsZero() && !t.Before(r.end) {
			return
		}
		if d := t.Sub(r.now()); d > 0 {
			timer.Reset(d)
			select {
			case <-timer.C:
			case <-r.stop:
				return
			}
		}
		if r.stopped() {
			return
		}
		measured := !t.Before(r.measureStart)
		if measured && !r.claim() {
			return
		}
		select {
		case slots <- struct{}{}:
		default:
			if measured {
				r.late.Add(1)
			}
			if r.cfg.OnLate != nil {
				r.cfg.OnLate(t)
			}
			select {
			case slots <- struct{}{}:
			case <-r.stop:
				r.countDropped(s, t)
				return
			}
		}
		cc := r.conns[seq%len(r.conns)]
		wg.Go(func() {
			defer func() { <-slots }()
			r.call(cc, t, measured, seq)
		})
		if r.budgetSpent() {
			return
		}
	}
}

// maxDroppedScan bounds the walk over a long unsent backlog.
const maxDroppedScan = 10_000_000

// countDropped counts the measured requests intended from t up to the halt
// (and the end of the window) that were never sent, within the Requests
// budget.
func (r *runner) countDropped(s *schedule, t time.Time) {
	limit := r.haltAt
	if !r.end.IsZero() && r.end.Before(limit) {
		limit = r.end
	}
	var n int64
	for i := 0; t.Before(limit) && i < maxDroppedScan; i, t = i+1, s.next() {
		if !t.Before(r.measureStart) {
			n++
		}
	}
	if r.cfg.Requests > 0 {
		// The unsent request t was claimed; the budget left includes it.
		n = min(n, r.cfg.Requests-r.claimed.Load()+1)
	}
	r.dropped.Add(n)
}

// progress prints one line a second until done is closed.
func (r *runner) progress(done <-chan struct{}) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var last int64
	for {
		select {
		case <-done:
			return
		case now := <-tick.C:
			n := r.done.Load()
			phase := "run"
			if now.Before(r.measureStart) {
				phase = "warmup"
			}
			fmt.Fprintf(r.cfg.Progress, "bench: %s %s %4.0fs done=%d rps=%d failed=%d inflight=%d late=%d\n",
				r.cfg.Label, phase, now.Sub(r.start).Seconds(), n, n-last, r.failed.Load(), r.inflight.Load(), r.late.Load())
			last = n
		}
	}
}
