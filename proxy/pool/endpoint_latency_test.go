package pool

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/infergate/infergate/flow"
)

// Every latency falls in a bucket whose middle is within 12.5% of it, and
// buckets grow with the latency.
func TestLatBuckets(t *testing.T) {
	prev := -1
	for d := time.Microsecond; d < 4*time.Minute; d = d * 21 / 20 {
		i := latBucket(d)
		if i < prev {
			t.Fatalf("latBucket(%s) = %d, below latBucket of a shorter latency (%d)", d, i, prev)
		}
		prev = i
		if mid := latBucketMid(i); d >= 8*time.Microsecond && (float64(mid) < 0.875*float64(d) || float64(mid) > 1.125*float64(d)) {
			t.Fatalf("latBucket(%s) = %d, whose middle %s is more than 12.5%% off", d, i, mid)
		}
	}
	if i := latBucket(time.Hour); i != latBuckets-1 {
		t.Errorf("an hour: bucket %d, want the last (%d)", i, latBuckets-1)
	}
}

// An endpoint's latency per model: its quantiles read what was added,
// and answers older than two windows are gone.
func TestModelLatencyWindows(t *testing.T) {
	e := &Endpoint{}
	t0 := time.Unix(1000, 0).UnixNano()
	for i := range 100 {
		e.observeModel("m", t0, time.Duration(i+1)*time.Millisecond)
	}
	var c latCounts
	if !e.modelLatencyAt("m", t0, &c) || c.total != 100 {
		t.Fatalf("read %d answers, want 100", c.total)
	}
	if p50 := c.quantile(0.5); p50 < 45*time.Millisecond || p50 > 55*time.Millisecond {
		t.Errorf("p50 %s, want about 50ms", p50)
	}
	if p99 := c.quantile(0.99); p99 < 90*time.Millisecond || p99 > 110*time.Millisecond {
		t.Errorf("p99 %s, want about 99ms", p99)
	}
	var none latCounts
	if e.modelLatencyAt("other", t0, &none) {
		t.Error("a model with no answer has a reading")
	}
	var later latCounts
	if e.modelLatencyAt("m", t0+int64(2*latWindow), &later) {
		t.Errorf("answers two windows old still read: %d", later.total)
	}
}

// The models an endpoint keeps latency for are bounded: names are the
// clients'.
func TestModelLatencyBounded(t *testing.T) {
	e := &Endpoint{}
	for i := range 2 * maxLatModels {
		e.observeModel(string(rune('a'+i%26))+string(rune(i)), 1, time.Millisecond)
	}
	if n := len(*e.lat.Load()); n != maxLatModels {
		t.Fatalf("keeps %d models, want %d", n, maxLatModels)
	}
}

// One endpoint 4x slower for a model is named with its ratio; a pool
// with a long tail on every endpoint, or one slow answer, names none.
func TestSlowEndpoint(t *testing.T) {
	t0 := time.Unix(1000, 0).UnixNano()
	feed := func(u *Pool, lat func(i int, r *rand.Rand) time.Duration) {
		r := rand.New(rand.NewPCG(1, 2))
		for i, e := range u.Endpoints() {
			for range 200 {
				e.observeModel("resnet50", t0, lat(i, r))
			}
		}
	}
	base := func(r *rand.Rand) time.Duration {
		d := 5*time.Millisecond + time.Duration(r.IntN(2000))*time.Microsecond
		if r.IntN(100) == 0 {
			d *= 10 // the long tail
		}
		return d
	}

	healthy := testPool(4, BalanceLatency)
	feed(healthy, func(_ int, r *rand.Rand) time.Duration { return base(r) })
	if s, ok := healthy.SlowEndpoint("resnet50", t0); ok {
		t.Errorf("healthy pool with a long tail: %s", s)
	}

	oneSlowCall := testPool(4, BalanceLatency)
	feed(oneSlowCall, func(i int, r *rand.Rand) time.Duration { return base(r) })
	oneSlowCall.Endpoints()[2].observeModel("resnet50", t0, time.Second)
	if s, ok := oneSlowCall.SlowEndpoint("resnet50", t0); ok {
		t.Errorf("one slow answer: %s", s)
	}

	slow := testPool(4, BalanceLatency)
	feed(slow, func(i int, r *rand.Rand) time.Duration {
		if i == 1 {
			return 4 * base(r)
		}
		return base(r)
	})
	s, ok := slow.SlowEndpoint("resnet50", t0)
	if !ok || s.Endpoint != "b" || s.Ratio() < 2 {
		t.Fatalf("one endpoint 4x slower: %+v %v, want b named", s, ok)
	}
	t.Log(s)
	if _, ok := slow.SlowEndpoint("other", t0); ok {
		t.Error("a model with no answers has a slow endpoint")
	}
}

// A replica slow for one model only (its other model fast, so its
// service time is) is ejected on that model's evidence, and is judged
// afresh once back.
func TestModelLatencyEjection(t *testing.T) {
	u := testPool(4, BalanceLatency)
	list := u.Endpoints()
	slow := list[1]
	now := time.Unix(1000, 0)
	r := rand.New(rand.NewPCG(3, 4))
	for step := range 300 {
		now = now.Add(10 * time.Millisecond)
		for _, e := range list {
			d := 5*time.Millisecond + time.Duration(r.IntN(1000))*time.Microsecond
			if e == slow {
				d *= 4
			}
			u.release(e, "m1", now, d, Answered)
			u.release(e, "m2", now, time.Millisecond, Answered)
		}
		if !slow.usable(now.UnixNano()) {
			t.Logf("ejected after %d steps: %s", step, *slow.why.Load())
			break
		}
	}
	if slow.usable(now.UnixNano()) {
		t.Fatal("a replica 4x slower for m1 was not ejected")
	}
	if w := *slow.why.Load(); !strings.Contains(w, "slow for m1") {
		t.Errorf("why: %q, want it to name m1", w)
	}
	for _, e := range list {
		if e != slow && !e.usable(now.UnixNano()) {
			t.Errorf("%s ejected too", e.addr)
		}
	}
	// Back and healthy: the answers that ejected it do not eject it
	// again.
	now = now.Add(ejectBase + time.Second)
	for range 300 {
		now = now.Add(10 * time.Millisecond)
		for _, e := range list {
			u.release(e, "m1", now, 5*time.Millisecond+time.Duration(r.IntN(1000))*time.Microsecond, Answered)
		}
	}
	if !slow.usable(now.UnixNano()) {
		t.Errorf("ejected again once healthy: %s", *slow.why.Load())
	}
}

// An ejection forgets the endpoint's latency but not what flow control
// keeps of it: its calls in flight and its learnt limit (they were
// dropped with the latency once, undercounting the calls still running).
func TestEjectionKeepsFlowState(t *testing.T) {
	u := testPool(4, BalanceLatency)
	e := u.Endpoints()[0]
	now := time.Unix(1000, 0)
	e.observeModel("m", now.UnixNano(), time.Millisecond)
	em := e.endpointModelOf("m")
	em.inFlight.Store(3)
	em.lim.Store(flow.NewLimiter(now))
	u.eject(e, now, "test")
	var c latCounts
	if e.modelLatencyAt("m", now.UnixNano(), &c) {
		t.Errorf("%d answers still read after the ejection", c.total)
	}
	if got := e.endpointModelOf("m"); got != em || got.inFlight.Load() != 3 || got.lim.Load() == nil {
		t.Errorf("flow state lost by the ejection")
	}
}
