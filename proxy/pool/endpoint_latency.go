package pool

import (
	"fmt"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"

	"github.com/infergate/infergate/flow"
)

// Each endpoint of a pool keeps its answers' latency per model, for the
// API (p50/p99 per endpoint and model) and for the pool's spread (one
// endpoint slow for a model: SlowEndpoint). It is kept here, not in the
// monitor's series: an endpoint label on the per-model latency series
// would multiply them by the pool's size, and these need no more than a
// few percent of precision over the last seconds.
//
// The buckets are log-linear: four per power of two (20 to 25% wide; a
// quantile is read at its bucket's middle, within 12.5%), from 1µs to
// about 4.5 minutes. Two windows of latWindow rotate, so a reading covers
// the last 10 to 20 seconds.
const (
	latSub       = 4  // buckets per power of two
	latMinShift  = 10 // the first bucket's width: 2^10 ns
	latBuckets   = 112
	latWindow    = 10 * time.Second
	maxLatModels = 256 // models an endpoint keeps latency for
)

// latBucket is the bucket of a latency d.
func latBucket(d time.Duration) int {
	v := uint64(max(d, 0)) >> latMinShift
	if v < latSub {
		return int(v)
	}
	exp := bits.Len64(v) - 1 // >= 2
	i := (exp-1)*latSub + int(v>>(exp-2)&(latSub-1))
	return min(i, latBuckets-1)
}

// latBucketMid is the middle of bucket i.
func latBucketMid(i int) time.Duration {
	if i < latSub {
		return time.Duration((2*i + 1) << (latMinShift - 1))
	}
	exp := i/latSub + 1
	lo := uint64(latSub+i%latSub) << (exp - 2)
	hi := uint64(latSub+i%latSub+1) << (exp - 2)
	return time.Duration((lo + hi) << latMinShift / 2)
}

// latWindowCounts is one window's counts; epoch is the window's number
// (unix nanoseconds / latWindow).
type latWindowCounts struct {
	epoch atomic.Int64
	n     [latBuckets]atomic.Uint32
}

// endpointModel is what one endpoint keeps of one model: its answers'
// latency and its service time (for ejection, outlier.go), and for flow
// control its calls in flight and its limit.
type endpointModel struct {
	w   [2]latWindowCounts
	mu  sync.Mutex // serialises a window's reset
	svc serviceMin
	// inFlight counts its calls in flight while flow control is on; lim
	// is its concurrency limit, made at its first answer then.
	inFlight atomic.Int32
	lim      atomic.Pointer[flow.Limiter]
}

// add counts one answer that took d, at t (unix nanoseconds).
func (m *endpointModel) add(t int64, d time.Duration) {
	ep := t / int64(latWindow)
	w := &m.w[ep&1]
	if w.epoch.Load() != ep {
		m.mu.Lock()
		if w.epoch.Load() != ep {
			for i := range w.n {
				w.n[i].Store(0)
			}
			w.epoch.Store(ep)
		}
		m.mu.Unlock()
	}
	w.n[latBucket(d)].Add(1)
}

// forget drops the latency m holds: both windows read as stale and are
// reset by the next answer; its service time too.
func (m *endpointModel) forget() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k := range m.w {
		m.w[k].epoch.Store(0)
	}
	m.svc.forget()
}

// latCounts is a reading of one or more endpointModel: counts per bucket.
type latCounts struct {
	n     [latBuckets]uint64
	total uint64
}

// addTo adds m's windows current at t to c.
func (m *endpointModel) addTo(c *latCounts, t int64) {
	ep := t / int64(latWindow)
	for k := range m.w {
		w := &m.w[k]
		if e := w.epoch.Load(); e != ep && e != ep-1 {
			continue
		}
		for i := range w.n {
			v := uint64(w.n[i].Load())
			c.n[i] += v
			c.total += v
		}
	}
}

// quantile is the q-quantile of c; 0 when c is empty.
func (c *latCounts) quantile(q float64) time.Duration {
	if c.total == 0 {
		return 0
	}
	rank := uint64(q*float64(c.total-1)) + 1
	var seen uint64
	for i, v := range c.n {
		seen += v
		if seen >= rank {
			return latBucketMid(i)
		}
	}
	return latBucketMid(latBuckets - 1)
}

// latencies is an endpoint's endpointModel by model; replaced whole when
// a model is added.
type latencies map[string]*endpointModel

// observeModel counts an answer of model that took d, at t, in its
// latency and its service time, and returns the service time it went
// into: e's own for calls naming no model; nil past maxLatModels.
func (e *Endpoint) observeModel(model string, t int64, d time.Duration) *serviceMin {
	if model == "" {
		e.svc.observe(t, d)
		return &e.svc
	}
	m := e.endpointModelOf(model)
	if m == nil {
		if m = e.endpointModelFor(model); m == nil {
			return nil
		}
	}
	m.add(t, d)
	m.svc.observe(t, d)
	return &m.svc
}

// serviceMinOf is e's service time for model (its own for ""); nil when
// it keeps none.
func (e *Endpoint) serviceMinOf(model string) *serviceMin {
	if model == "" {
		return &e.svc
	}
	if m := e.endpointModelOf(model); m != nil {
		return &m.svc
	}
	return nil
}

// endpointModelFor adds model to e's latencies (nil when it keeps
// maxLatModels already: model names are the clients').
func (e *Endpoint) endpointModelFor(model string) *endpointModel {
	e.latMu.Lock()
	defer e.latMu.Unlock()
	old := e.lat.Load()
	var next latencies
	if old != nil {
		if m := (*old)[model]; m != nil {
			return m
		}
		if len(*old) >= maxLatModels {
			return nil
		}
		next = make(latencies, len(*old)+1)
		for k, v := range *old {
			next[k] = v
		}
	} else {
		next = latencies{}
	}
	m := new(endpointModel)
	next[model] = m
	e.lat.Store(&next)
	return m
}

// modelLatencyAt is e's reading for model at t; ok false when it has no
// answers of it in the last windows.
func (e *Endpoint) modelLatencyAt(model string, t int64, c *latCounts) bool {
	ls := e.lat.Load()
	if ls == nil {
		return false
	}
	m := (*ls)[model]
	if m == nil {
		return false
	}
	m.addTo(c, t)
	return c.total > 0
}

// SlowEndpoint is one endpoint of a pool much slower than the others
// for a model, over the last 10 to 20 seconds.
type SlowEndpoint struct {
	Upstream, Endpoint, Model string
	// P99 is its p99 for the model, PoolP99 the other endpoints' (their
	// answers together); Answers its answers.
	P99, PoolP99 time.Duration
	Answers      uint64
	// p50 is its median, poolP90 the others' p90 (ejection's margin).
	p50, poolP90 time.Duration
}

// Ratio is P99 / PoolP99.
func (s SlowEndpoint) Ratio() float64 { return float64(s.P99) / float64(s.PoolP99) }

// String says it in a line, for a cause hint's evidence.
func (s SlowEndpoint) String() string {
	return fmt.Sprintf("one endpoint slow: %s is %.1fx the pool's p99 for %s (%s against %s, %d answers)",
		s.Endpoint, s.Ratio(), s.Model, roundLatency(s.P99), roundLatency(s.PoolP99), s.Answers)
}

func roundLatency(d time.Duration) time.Duration {
	if d >= 10*time.Millisecond {
		return d.Round(time.Millisecond)
	}
	return d.Round(10 * time.Microsecond)
}

// What makes an endpoint slow for a model against the rest of its pool:
// its p99 at least slowSpread times the others', and its median above
// their p90, over at least slowEvidence answers of its own and
// slowPoolEvidence of theirs. The median test is the confidence: were
// it no slower than the others, each of its answers would lie above
// their p90 with a chance of one in ten, and half of ten or more of them
// doing so has a chance under 0.2%; one slow answer (a p99 over few
// calls is their slowest) does not make it.
const (
	slowSpread       = 2.0
	slowEvidence     = 10
	slowPoolEvidence = 30
)

// SlowEndpoint is the endpoint much slower than the rest of the pool
// for model at t, the slowest if several are (its Upstream left for the
// caller to name); false when none is.
func (u *Pool) SlowEndpoint(model string, t int64) (found SlowEndpoint, ok bool) {
	list := u.eps.Load().list
	if len(list) < 2 {
		return found, false
	}
	for _, e := range list {
		var own latCounts
		if !e.modelLatencyAt(model, t, &own) || own.total < slowEvidence {
			continue
		}
		var rest latCounts
		for _, x := range list {
			if x != e {
				x.modelLatencyAt(model, t, &rest)
			}
		}
		if rest.total < slowPoolEvidence {
			continue
		}
		p99, pool99 := own.quantile(0.99), rest.quantile(0.99)
		p50, pool90 := own.quantile(0.5), rest.quantile(0.9)
		if float64(p99) < slowSpread*float64(pool99) || p50 <= pool90 {
			continue
		}
		s := SlowEndpoint{Endpoint: e.addr, Model: model, P99: p99, PoolP99: pool99, Answers: own.total,
			p50: p50, poolP90: pool90}
		if !ok || s.Ratio() > found.Ratio() {
			found, ok = s, true
		}
	}
	return found, ok
}

// endpointModelOf is what e keeps of model; nil when nothing.
func (e *Endpoint) endpointModelOf(model string) *endpointModel {
	if ls := e.lat.Load(); ls != nil {
		return (*ls)[model]
	}
	return nil
}

// RecentLatency is the latency of answers over the last 10 to 20
// seconds, in buckets 20 to 25% wide, as an endpoint keeps it per model;
// others (a tenant's calls) keep theirs with it.
type RecentLatency struct{ m endpointModel }

// Add counts one answer that took d, at t (unix nanoseconds).
func (r *RecentLatency) Add(t int64, d time.Duration) { r.m.add(t, d) }

// At reads the answers current at t: how many, their median and p99.
func (r *RecentLatency) At(t int64) (n uint64, p50, p99 time.Duration) {
	var c latCounts
	r.m.addTo(&c, t)
	if c.total == 0 {
		return 0, 0, 0
	}
	return c.total, c.quantile(0.5), c.quantile(0.99)
}
