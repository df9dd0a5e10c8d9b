package tracing

import (
	"context"
	"math"
	"math/bits"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Tail-based sampling: the keep-or-drop decision of a trace is made when
// its call is over, not when it starts, so that it can read what the call
// did. The OpenTelemetry Collector's tailsamplingprocessor does this in a
// collector (a status_code policy, a latency policy, a rate_limiting one,
// buffering a trace for decision_wait); TailSampler does it in the
// process, in front of the batch exporter, where it knows when a call
// ends: a trace's spans wait in a buffer until its local root (the
// call's server span: no parent, or a parent in the client) ends, and
// then go to the exporter or nowhere together.
//
// Kept always: a trace whose root ended with an error status (a failed
// call), and one whose root lasted longer than the recent p99 of its
// kind (span name and infergate.model), which the sampler estimates from
// the durations it sees. The rest are kept with a probability adapted
// every second so that the spans exported hold at MaxSpansPerSecond, and
// a token bucket of one second's budget caps what the estimate misses.

// Decision is why a span was or was not exported; its String names the
// metric's label value.
type Decision uint8

const (
	// KeptError: the call failed (its server span's status is Error).
	KeptError Decision = iota
	// KeptSlow: the call took longer than its model's recent p99.
	KeptSlow
	// KeptSampled: neither, and the rate controller kept it.
	KeptSampled
	// Dropped: neither, and the rate controller dropped it.
	Dropped
	// Evicted: dropped from the buffer before its call ended (the call
	// outlived MaxTraceAge, or the buffer was full).
	Evicted
	numDecisions
)

var decisionNames = [numDecisions]string{"error", "slow", "sampled", "dropped", "evicted"}

func (d Decision) String() string { return decisionNames[d] }

// Decisions lists every Decision, for a metric's label values.
func Decisions() []Decision { return []Decision{KeptError, KeptSlow, KeptSampled, Dropped, Evicted} }

func (d Decision) kept() bool { return d <= KeptSampled }

// TailOptions configure a TailSampler; the zero value of a field takes
// its default.
type TailOptions struct {
	// MaxSpansPerSecond is the export budget; 0 turns tail sampling off
	// (every span passes straight to the exporter).
	MaxSpansPerSecond float64
	// Now is the clock (time.Now); the rate controller's seconds and the
	// buffer's ages are read from it.
	Now func() time.Time
	// Seed seeds the sampling coin (0: random).
	Seed uint64
	// MaxBufferedSpans bounds the spans waiting for their call to end
	// (65536); over it the oldest trace is dropped (Evicted).
	MaxBufferedSpans int
	// MaxTraceAge is how long a trace waits for its call to end (1
	// minute); older, it is dropped (Evicted).
	MaxTraceAge time.Duration
}

const (
	defaultMaxBufferedSpans = 1 << 16
	defaultMaxTraceAge      = time.Minute
	// decidedTraces is how many decisions are remembered for the spans
	// of a trace that end after its root (a hedge's loser).
	decidedTraces = 4096
	// overSample is how much more than the estimate says the coin keeps;
	// the token bucket trims the excess, so the budget is met rather than
	// missed when the load moves.
	overSample = 1.1
	// alpha weighs the last second in the rates' moving averages.
	alpha = 0.5
)

// TailSampler is a SpanProcessor that samples traces at their end and
// hands the spans it keeps to next (the batch processor).
type TailSampler struct {
	next   sdktrace.SpanProcessor
	now    func() time.Time
	maxBuf int
	maxAge time.Duration

	budget  atomic.Uint64 // float64 bits; 0: off
	active  atomic.Int64  // traces buffered; with budget 0, none means pass-through
	ratio   atomic.Uint64 // float64 bits: the coin's probability
	counts  [numDecisions]atomic.Uint64
	buffers atomic.Int64 // spans buffered

	mu      sync.Mutex
	rng     *rand.Rand
	pending map[trace.TraceID]*pendingTrace
	queue   []*pendingTrace // by arrival; entries of decided traces are skipped
	qhead   int
	decided map[trace.TraceID]Decision
	ring    [decidedTraces]trace.TraceID
	ringN   int
	kinds   map[kindKey]*latencies

	// The rate controller.
	second           time.Time // start of the current second
	offered, forced  float64   // spans this second: candidates, kept by rule
	offerRate, force float64   // their moving averages, per second
	seen             bool      // a second has been measured
	tokens           float64
	refilled         time.Time
}

type pendingTrace struct {
	id    trace.TraceID
	first time.Time
	spans []sdktrace.ReadOnlySpan
}

// kindKey is what a p99 is kept for: the root span's name and model.
type kindKey struct{ name, model string }

// NewTailSampler returns a TailSampler in front of next.
func NewTailSampler(next sdktrace.SpanProcessor, o TailOptions) *TailSampler {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.MaxBufferedSpans <= 0 {
		o.MaxBufferedSpans = defaultMaxBufferedSpans
	}
	if o.MaxTraceAge <= 0 {
		o.MaxTraceAge = defaultMaxTraceAge
	}
	seed := o.Seed
	if seed == 0 {
		seed = rand.Uint64()
	}
	p := &TailSampler{
		next: next, now: o.Now, maxBuf: o.MaxBufferedSpans, maxAge: o.MaxTraceAge,
		rng:     rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		pending: map[trace.TraceID]*pendingTrace{},
		decided: map[trace.TraceID]Decision{},
		kinds:   map[kindKey]*latencies{},
	}
	p.ratio.Store(math.Float64bits(1))
	p.SetMaxSpansPerSecond(o.MaxSpansPerSecond)
	return p
}

// SetMaxSpansPerSecond changes the budget (0: off) from now on.
func (p *TailSampler) SetMaxSpansPerSecond(b float64) {
	if b < 0 || math.IsNaN(b) {
		b = 0
	}
	p.budget.Store(math.Float64bits(b))
	if b == 0 {
		p.ratio.Store(math.Float64bits(1))
	}
}

// MaxSpansPerSecond is the budget; 0 when tail sampling is off.
func (p *TailSampler) MaxSpansPerSecond() float64 { return math.Float64frombits(p.budget.Load()) }

// Ratio is the probability with which a trace neither failed nor slow is
// kept now (1 when tail sampling is off).
func (p *TailSampler) Ratio() float64 { return math.Float64frombits(p.ratio.Load()) }

// Spans is how many spans were decided d so far.
func (p *TailSampler) Spans(d Decision) uint64 { return p.counts[d].Load() }

// Buffered is how many spans wait for their call to end.
func (p *TailSampler) Buffered() int64 { return p.buffers.Load() }

// Kept says whether the trace id was exported, as far as its call has
// been decided: true with tail sampling off, false for a trace dropped or
// not decided yet. A call's exemplar asks it after its server span ends.
func (p *TailSampler) Kept(id trace.TraceID) bool {
	if p.budget.Load() == 0 && p.active.Load() == 0 {
		return true
	}
	p.mu.Lock()
	d, ok := p.decided[id]
	p.mu.Unlock()
	return ok && d.kept()
}

// OnStart passes the span on.
func (p *TailSampler) OnStart(ctx context.Context, s sdktrace.ReadWriteSpan) { p.next.OnStart(ctx, s) }

// OnEnd buffers s until its trace's root ends, or decides the trace when
// s is that root.
func (p *TailSampler) OnEnd(s sdktrace.ReadOnlySpan) {
	if p.budget.Load() == 0 && p.active.Load() == 0 {
		p.next.OnEnd(s)
		return
	}
	var out []sdktrace.ReadOnlySpan
	p.mu.Lock()
	now := p.now()
	p.tick(now)
	id := s.SpanContext().TraceID()
	parent := s.Parent()
	root := !parent.IsValid() || parent.IsRemote()
	if p.MaxSpansPerSecond() == 0 {
		// Turned off with traces still buffered: they go out as they end.
		if t := p.pending[id]; t != nil {
			out = p.take(t)
		}
		out = append(out, s)
	} else if !root {
		if d, ok := p.decided[id]; ok {
			// A span that ended after its call: it follows the call.
			p.account(d, 1, now)
			if d.kept() {
				out = append(out, s)
			}
		} else {
			t := p.pending[id]
			if t == nil {
				t = &pendingTrace{id: id, first: now}
				p.pending[id] = t
				p.queue = append(p.queue, t)
				p.active.Add(1)
			}
			t.spans = append(t.spans, s)
			p.buffers.Add(1)
		}
	} else {
		var spans []sdktrace.ReadOnlySpan
		if t := p.pending[id]; t != nil {
			spans = p.take(t)
		}
		spans = append(spans, s)
		d := p.decide(id, s, len(spans), now)
		p.account(d, len(spans), now)
		p.remember(id, d)
		if d.kept() {
			out = spans
		}
	}
	p.evict(now)
	p.mu.Unlock()
	for _, s := range out {
		p.next.OnEnd(s)
	}
}

// take removes t from the buffer and returns its spans.
func (p *TailSampler) take(t *pendingTrace) []sdktrace.ReadOnlySpan {
	delete(p.pending, t.id)
	p.active.Add(-1)
	p.buffers.Add(-int64(len(t.spans)))
	return t.spans
}

// decide says what becomes of the trace id whose root is s, with n spans.
func (p *TailSampler) decide(id trace.TraceID, s sdktrace.ReadOnlySpan, n int, now time.Time) Decision {
	if s.Status().Code == codes.Error {
		return KeptError
	}
	k := kindKey{name: s.Name()}
	for _, kv := range s.Attributes() {
		if kv.Key == "infergate.model" {
			k.model = kv.Value.AsString()
			break
		}
	}
	l := p.kinds[k]
	if l == nil && len(p.kinds) >= maxKinds {
		// A client can name any model: past the bound, the rest share
		// one estimate.
		k.model = "_OTHER"
		l = p.kinds[k]
	}
	if l == nil {
		l = &latencies{threshold: math.MaxUint64}
		p.kinds[k] = l
	}
	slow := l.observe(s.EndTime().Sub(s.StartTime()))
	if slow {
		return KeptSlow
	}
	// Another call of a trace already decided (a client's trace with
	// several calls) follows the first.
	if d, ok := p.decided[id]; ok && (d == KeptSampled || d == Dropped) {
		if d == KeptSampled && !p.spend(n, now) {
			return Dropped
		}
		return d
	}
	if p.rng.Float64() >= p.Ratio() || !p.spend(n, now) {
		return Dropped
	}
	return KeptSampled
}

// spend takes n spans from the token bucket, if it has any left.
func (p *TailSampler) spend(n int, now time.Time) bool {
	p.refill(now)
	if p.tokens <= 0 {
		return false
	}
	p.tokens -= float64(n)
	return true
}

// refill adds what the budget gives since the last refill, up to one
// second's worth.
func (p *TailSampler) refill(now time.Time) {
	b := p.MaxSpansPerSecond()
	if p.refilled.IsZero() {
		p.tokens, p.refilled = b, now
		return
	}
	if dt := now.Sub(p.refilled); dt > 0 {
		p.tokens = min(b, p.tokens+b*dt.Seconds())
		p.refilled = now
	}
}

// account counts n spans decided d, for the metrics and the controller.
func (p *TailSampler) account(d Decision, n int, now time.Time) {
	p.counts[d].Add(uint64(n))
	switch d {
	case KeptError, KeptSlow:
		p.forced += float64(n)
		// Kept whatever the bucket says, but they use the budget up: the
		// bucket may go into debt, down to one second's worth.
		p.refill(now)
		p.tokens = max(p.tokens-float64(n), -p.MaxSpansPerSecond())
	case KeptSampled, Dropped:
		p.offered += float64(n)
	}
}

// remember records id's decision for its spans still to end.
func (p *TailSampler) remember(id trace.TraceID, d Decision) {
	if prev, ok := p.decided[id]; ok {
		if !prev.kept() || d.kept() {
			p.decided[id] = d
		}
		return
	}
	slot := p.ringN % decidedTraces
	if p.ringN >= decidedTraces {
		delete(p.decided, p.ring[slot])
	}
	p.ring[slot] = id
	p.ringN++
	p.decided[id] = d
}

// tick closes the seconds that ended before now: the rates' averages and
// the coin's probability move, the p99s are re-read.
func (p *TailSampler) tick(now time.Time) {
	if p.second.IsZero() {
		p.second = now
		return
	}
	el := now.Sub(p.second)
	if el < time.Second {
		return
	}
	secs := el.Seconds()
	off, forced := p.offered/secs, p.forced/secs
	if !p.seen {
		p.offerRate, p.force, p.seen = off, forced, true
	} else {
		p.offerRate = alpha*off + (1-alpha)*p.offerRate
		p.force = alpha*forced + (1-alpha)*p.force
	}
	p.offered, p.forced = 0, 0
	p.second = p.second.Add(el.Truncate(time.Second))
	r := 1.0
	if p.offerRate > 0 {
		r = overSample * (p.MaxSpansPerSecond() - p.force) / p.offerRate
	}
	p.ratio.Store(math.Float64bits(min(1, max(0, r))))
	for _, l := range p.kinds {
		l.roll(el)
	}
}

// evict drops the traces that waited longer than the age bound, and the
// oldest while the buffer is over its bound.
func (p *TailSampler) evict(now time.Time) {
	for p.qhead < len(p.queue) {
		t := p.queue[p.qhead]
		if p.pending[t.id] == t {
			if now.Sub(t.first) <= p.maxAge && int(p.buffers.Load()) <= p.maxBuf && len(p.queue)-p.qhead <= 4*p.maxBuf {
				break
			}
			p.counts[Evicted].Add(uint64(len(t.spans)))
			p.take(t)
		}
		p.queue[p.qhead] = nil
		p.qhead++
	}
	if p.qhead > 1024 && p.qhead*2 > len(p.queue) {
		p.queue = append(p.queue[:0], p.queue[p.qhead:]...)
		p.qhead = 0
	}
}

// Shutdown drops the traces whose calls have not ended and shuts next
// down.
func (p *TailSampler) Shutdown(ctx context.Context) error {
	p.mu.Lock()
	for _, t := range p.pending {
		p.counts[Evicted].Add(uint64(len(t.spans)))
		p.take(t)
	}
	p.queue, p.qhead = nil, 0
	p.mu.Unlock()
	return p.next.Shutdown(ctx)
}

// ForceFlush flushes next; the traces still buffered wait for their
// calls.
func (p *TailSampler) ForceFlush(ctx context.Context) error { return p.next.ForceFlush(ctx) }

// latencies estimate the recent p99 of one kind of call: a log-scale
// histogram (buckets about 9% wide) of the last two windows of
// latencyWindow.
type latencies struct {
	cur, prev [latencyBuckets]uint32
	n         uint64 // in cur and prev
	age       time.Duration
	threshold uint64 // µs; a call over it is slow; MaxUint64 while too few calls
	stale     bool
}

const (
	latencyBuckets = 320
	latencyWindow  = 10 * time.Second
	// minCalls is how many calls a p99 needs before a call is slow by it.
	minCalls = 100
	// maxKinds bounds the p99s kept (2.5 KB each).
	maxKinds = 1024
)

// observe records d and says whether it was over the p99 of the calls
// before it.
func (l *latencies) observe(d time.Duration) bool {
	if l.stale || (l.threshold == math.MaxUint64 && l.n >= minCalls) {
		l.threshold = l.p99()
		l.stale = false
	}
	us := uint64(max(d, 0) / time.Microsecond)
	l.cur[bucketOf(us)]++
	l.n++
	return us > l.threshold
}

// roll marks the threshold for a re-read, and starts a new window when
// the current one is full.
func (l *latencies) roll(el time.Duration) {
	l.stale = true
	l.age += el
	if l.age < latencyWindow {
		return
	}
	l.age = 0
	l.prev, l.cur = l.cur, [latencyBuckets]uint32{}
	l.n = 0
	for _, c := range l.prev {
		l.n += uint64(c)
	}
}

// p99 is the upper bound of the bucket holding the 99th percentile.
func (l *latencies) p99() uint64 {
	if l.n < minCalls {
		return math.MaxUint64
	}
	rank := (l.n*99 + 99) / 100
	var seen uint64
	for i := range latencyBuckets {
		seen += uint64(l.cur[i]) + uint64(l.prev[i])
		if seen >= rank {
			return bucketTop(i)
		}
	}
	return math.MaxUint64
}

// bucketOf is the histogram bucket of us microseconds: exact below 8,
// then eight buckets per power of two.
func bucketOf(us uint64) int {
	if us < 8 {
		return int(us)
	}
	e := bits.Len64(us) - 1
	i := (e-3)*8 + int(us>>(e-3))
	return min(i, latencyBuckets-1)
}

// bucketTop is the largest value of bucket i.
func bucketTop(i int) uint64 {
	if i < 8 {
		return uint64(i)
	}
	if i == latencyBuckets-1 {
		return math.MaxUint64
	}
	e := i/8 + 2
	m := uint64(i - (e-3)*8)
	return (m+1)<<(e-3) - 1
}
