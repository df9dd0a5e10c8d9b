package tracing

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// fakeClock is the tail sampler's clock in tests: it moves when the test
// says.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func (c *fakeClock) Set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }

// seqIDs makes trace and span ids from a counter: runs repeat.
type seqIDs struct {
	mu sync.Mutex
	n  uint64
}

func (g *seqIDs) next() uint64 { g.mu.Lock(); defer g.mu.Unlock(); g.n++; return g.n }

func (g *seqIDs) NewIDs(context.Context) (trace.TraceID, trace.SpanID) {
	var t trace.TraceID
	binary.BigEndian.PutUint64(t[8:], g.next())
	return t, g.NewSpanID(context.Background(), t)
}

func (g *seqIDs) NewSpanID(context.Context, trace.TraceID) trace.SpanID {
	var s trace.SpanID
	binary.BigEndian.PutUint64(s[:], g.next())
	return s
}

// tailEnv is a tracer provider whose spans go through a TailSampler on a
// fake clock to a recorder.
type tailEnv struct {
	clock *fakeClock
	tail  *TailSampler
	rec   *tracetest.SpanRecorder
	tr    trace.Tracer
}

func newTailEnv(t *testing.T, o TailOptions) *tailEnv {
	t.Helper()
	e := &tailEnv{clock: &fakeClock{t: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}, rec: tracetest.NewSpanRecorder()}
	o.Now, o.Seed = e.clock.Now, 47
	e.tail = NewTailSampler(e.rec, o)
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(e.tail), sdktrace.WithIDGenerator(&seqIDs{}),
		sdktrace.WithSampler(sdktrace.AlwaysSample()))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	e.tr = tp.Tracer("test")
	return e
}

// call is one simulated call: a server span and its attempt span, from
// start for took, the clock at its end when the server span ends.
func (e *tailEnv) call(model string, start time.Time, took time.Duration, failed bool) trace.TraceID {
	end := start.Add(took)
	ctx, srv := e.tr.Start(context.Background(), "inference.GRPCInferenceService/ModelInfer",
		trace.WithSpanKind(trace.SpanKindServer), trace.WithTimestamp(start))
	_, att := e.tr.Start(ctx, "inference.GRPCInferenceService/ModelInfer", trace.WithSpanKind(trace.SpanKindClient),
		trace.WithTimestamp(start))
	e.clock.Set(end.Add(-time.Microsecond))
	att.End(trace.WithTimestamp(end.Add(-time.Microsecond)))
	srv.SetAttributes(attribute.String("infergate.model", model))
	if failed {
		srv.SetStatus(codes.Error, "Unavailable")
	}
	e.clock.Set(end)
	srv.End(trace.WithTimestamp(end))
	return srv.SpanContext().TraceID()
}

// exported counts the recorded spans by trace.
func (e *tailEnv) exported() map[trace.TraceID]int {
	got := map[trace.TraceID]int{}
	for _, s := range e.rec.Ended() {
		got[s.SpanContext().TraceID()]++
	}
	return got
}

// At ten times the budget for a simulated minute, every failed call's
// and every slow call's spans are exported, and the total is within 10%
// of the budget; the rate falls while the load is over the budget and
// comes back to 1 when it is under.
func TestTailSamplingHoldsBudget(t *testing.T) {
	const (
		budget    = 100.0 // spans a second
		callsPerS = 500   // two spans each: ten times the budget
		minute    = 60 * callsPerS
	)
	e := newTailEnv(t, TailOptions{MaxSpansPerSecond: budget})
	t0 := e.clock.Now()
	var mustKeep []trace.TraceID
	var failed, slow int
	for i := range minute {
		start := t0.Add(time.Duration(i) * time.Second / callsPerS)
		model := []string{"resnet50", "bert"}[i%2]
		took := time.Duration(8+i%5) * time.Millisecond // the body: 8 to 12 ms
		bad := i%100 == 37                              // 1% fail, fast
		if bad {
			took = 2 * time.Millisecond
			failed++
		}
		// 0.5% are slow, once a model has its p99 (100 calls of it).
		isSlow := i > 400 && (i%400 == 101 || i%400 == 202) // each model: 1 call in 200
		if isSlow {
			took = 250*time.Millisecond + time.Duration(i%7)*time.Millisecond
			slow++
		}
		id := e.call(model, start, took, bad)
		if bad || isSlow {
			mustKeep = append(mustKeep, id)
		}
		if i == 10*callsPerS {
			if r := e.tail.Ratio(); r <= 0 || r > 0.2 {
				t.Errorf("ratio after 10s at 10x the budget: %v, want about 0.1", r)
			}
		}
	}
	got := e.exported()
	for _, id := range mustKeep {
		if got[id] != 2 {
			t.Errorf("trace %s of a failed or slow call: %d spans exported, want 2", id, got[id])
		}
	}
	total := 0
	for _, n := range got {
		total += n
	}
	// Kept answers for the recent decisions (the exemplars ask it): those
	// of the last calls agree with what was exported; trace ids go 3 a
	// call (the trace, the server span, the attempt span).
	for i := range 100 {
		var id trace.TraceID
		binary.BigEndian.PutUint64(id[8:], uint64(3*(minute-i)-2))
		if e.tail.Kept(id) != (got[id] > 0) {
			t.Errorf("trace %s: Kept %t, exported %d spans", id, e.tail.Kept(id), got[id])
		}
	}
	want := budget * 60
	t.Logf("exported %d spans in a minute (budget %v), %d failed and %d slow calls kept; ratio %.3f; "+
		"spans: error %d slow %d sampled %d dropped %d", total, want, failed, slow, e.tail.Ratio(),
		e.tail.Spans(KeptError), e.tail.Spans(KeptSlow), e.tail.Spans(KeptSampled), e.tail.Spans(Dropped))
	if math.Abs(float64(total)-want) > 0.1*want {
		t.Errorf("exported %d spans in a minute, want %v ± 10%%", total, want)
	}
	if e.tail.Spans(KeptError) != uint64(2*failed) || e.tail.Spans(KeptSlow) < uint64(2*slow) {
		t.Errorf("counted %d error and %d slow spans, want %d and at least %d", e.tail.Spans(KeptError),
			e.tail.Spans(KeptSlow), 2*failed, 2*slow)
	}
	var sum uint64
	for _, d := range Decisions() {
		sum += e.tail.Spans(d)
	}
	if sum != 2*minute {
		t.Errorf("decisions counted for %d spans, want %d", sum, 2*minute)
	}
	if e.tail.Buffered() != 0 {
		t.Errorf("%d spans still buffered", e.tail.Buffered())
	}

	// Under the budget: the ratio comes back to 1.
	t1 := t0.Add(time.Minute)
	for i := range 10 * 20 {
		e.call("bert", t1.Add(time.Duration(i)*time.Second/20), 10*time.Millisecond, false)
	}
	if r := e.tail.Ratio(); r != 1 {
		t.Errorf("ratio at a fifth of the budget: %v, want 1", r)
	}
}

// The buffer is bounded: a trace whose call has not ended within
// MaxTraceAge is dropped, and the oldest go when it is full; both are
// counted.
func TestTailSamplingBufferBounded(t *testing.T) {
	e := newTailEnv(t, TailOptions{MaxSpansPerSecond: 100, MaxBufferedSpans: 50, MaxTraceAge: 10 * time.Second})
	t0 := e.clock.Now()
	var roots []trace.Span
	for i := range 80 {
		ctx, srv := e.tr.Start(context.Background(), "stream", trace.WithTimestamp(t0))
		roots = append(roots, srv)
		_, child := e.tr.Start(ctx, "attempt", trace.WithTimestamp(t0))
		e.clock.Set(t0.Add(time.Duration(i) * time.Millisecond))
		child.End()
	}
	if b := e.tail.Buffered(); b > 50 {
		t.Errorf("%d spans buffered, want at most 50", b)
	}
	if n := e.tail.Spans(Evicted); n != 30 {
		t.Errorf("%d spans evicted for room, want 30", n)
	}
	e.clock.Set(t0.Add(11 * time.Second))
	e.call("m", t0.Add(11*time.Second), time.Millisecond, false)
	if b := e.tail.Buffered(); b != 0 {
		t.Errorf("%d spans buffered after MaxTraceAge, want 0", b)
	}
	if n := e.tail.Spans(Evicted); n != 80 {
		t.Errorf("%d spans evicted, want 80", n)
	}
	// The roots end late, alone: decided on their own.
	for _, r := range roots {
		r.SetStatus(codes.Error, "late")
		r.End()
	}
	if n := e.tail.Spans(KeptError); n != 80 {
		t.Errorf("%d late roots kept as errors, want 80", n)
	}
}

// Models past maxKinds share one p99: a client naming models at random
// does not grow the sampler.
func TestTailSamplingKindsBounded(t *testing.T) {
	e := newTailEnv(t, TailOptions{MaxSpansPerSecond: 100})
	for i := range maxKinds + 500 {
		e.call(fmt.Sprint("model-", i), e.clock.Now(), time.Millisecond, false)
	}
	if n := len(e.tail.kinds); n != maxKinds+1 {
		t.Errorf("%d p99s kept, want %d and one shared", n, maxKinds)
	}
}

// A span that ends after its call's server span follows the call's
// decision; a second call in the same client trace follows the first.
func TestTailSamplingLateSpans(t *testing.T) {
	e := newTailEnv(t, TailOptions{MaxSpansPerSecond: 1e6})
	ctx, srv := e.tr.Start(context.Background(), "call", trace.WithSpanKind(trace.SpanKindServer))
	_, hedge := e.tr.Start(ctx, "hedge")
	srv.SetStatus(codes.Error, "failed")
	srv.End()
	hedge.End()
	if got := e.exported()[srv.SpanContext().TraceID()]; got != 2 {
		t.Errorf("%d spans exported of a failed call whose hedge ended last, want 2", got)
	}
}

// Off (no budget), every span passes at once, as without the sampler.
func TestTailSamplingOffPassesAll(t *testing.T) {
	e := newTailEnv(t, TailOptions{})
	for i := range 100 {
		e.call("m", e.clock.Now(), time.Duration(i)*time.Millisecond, false)
	}
	if n := len(e.rec.Ended()); n != 200 || e.tail.Buffered() != 0 || e.tail.Ratio() != 1 {
		t.Errorf("off: %d spans exported, %d buffered, ratio %v; want 200, 0, 1", n, e.tail.Buffered(), e.tail.Ratio())
	}
	// Turned on, then off with a trace buffered: it goes out at its end.
	e.tail.SetMaxSpansPerSecond(10)
	ctx, srv := e.tr.Start(context.Background(), "call")
	_, child := e.tr.Start(ctx, "attempt")
	child.End()
	if e.tail.Buffered() != 1 {
		t.Fatalf("on: %d spans buffered, want 1", e.tail.Buffered())
	}
	e.tail.SetMaxSpansPerSecond(0)
	srv.End()
	if n := len(e.rec.Ended()); n != 202 {
		t.Errorf("turned off: %d spans exported, want 202", n)
	}
}

func TestLatencyBuckets(t *testing.T) {
	prev := -1
	for _, us := range []uint64{0, 1, 7, 8, 15, 16, 17, 100, 1000, 12345, 1 << 30, 1 << 40} {
		b := bucketOf(us)
		if b < prev || us > bucketTop(b) || (b > 0 && us <= bucketTop(b-1)) {
			t.Errorf("%dµs in bucket %d [%d, %d]", us, b, bucketTop(b-1)+1, bucketTop(b))
		}
		prev = b
	}
	for i := 8; i < latencyBuckets-1; i++ {
		if bucketOf(bucketTop(i)) != i || bucketOf(bucketTop(i)+1) != i+1 {
			t.Fatalf("bucket %d's top %d is not its last value", i, bucketTop(i))
		}
	}
}

// BenchmarkTailSampledCall is the tail sampler's cost per call of two
// spans, at ten times the budget (most dropped).
func BenchmarkTailSampledCall(b *testing.B) {
	for _, budget := range []float64{0, 100} {
		b.Run(fmt.Sprint("budget=", budget), func(b *testing.B) {
			tail := NewTailSampler(discard{}, TailOptions{MaxSpansPerSecond: budget})
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(tail), sdktrace.WithSampler(sdktrace.AlwaysSample()))
			defer func() { _ = tp.Shutdown(context.Background()) }()
			tr := tp.Tracer("bench")
			b.ReportAllocs()
			for b.Loop() {
				ctx, srv := tr.Start(context.Background(), "call", trace.WithSpanKind(trace.SpanKindServer))
				_, att := tr.Start(ctx, "attempt")
				att.End()
				srv.SetAttributes(attribute.String("infergate.model", "m"))
				srv.End()
			}
		})
	}
}

// discard is a SpanProcessor that drops every span.
type discard struct{}

func (discard) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (discard) OnEnd(sdktrace.ReadOnlySpan)                     {}
func (discard) Shutdown(context.Context) error                  { return nil }
func (discard) ForceFlush(context.Context) error                { return nil }
