package business

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// synthetic returns a p99 series that wanders (a smoothed random walk,
// seconds) and a conversion rate that falls lag steps after it rises,
// with noise: the "conversion tied to p99 with a 30 s lag" at
// 15 s steps is lag 2.
func synthetic(n, lag int, seed uint64) (p99, conv []float64) {
	rng := rand.New(rand.NewPCG(seed, 47))
	p99 = make([]float64, n)
	level := 0.15
	for i := range p99 {
		level += rng.NormFloat64() * 0.01
		level = max(0.08, min(0.3, level))
		p99[i] = level + rng.NormFloat64()*0.002
	}
	conv = make([]float64, n)
	for i := range conv {
		src := p99[max(0, i-lag)]
		conv[i] = 0.05 - 0.1*src + rng.NormFloat64()*0.0005
	}
	return p99, conv
}

func TestEstimateLagFindsThirtySeconds(t *testing.T) {
	for seed := range uint64(5) {
		p99, conv := synthetic(480, 2, seed) // 2 h at 15 s
		e, ok := EstimateLag(p99, conv, 20)  // ±5 min
		if !ok {
			t.Fatalf("seed %d: no estimate", seed)
		}
		if math.Abs(e.Correlation) < 0.8 || e.Correlation > 0 {
			t.Errorf("seed %d: r = %.3f, want ≤ -0.8 (conversion falls as p99 rises)", seed, e.Correlation)
		}
		if e.Lag != 2 {
			t.Errorf("seed %d: lag = %d steps, want 2 (30 s)", seed, e.Lag)
		}
	}
}

func TestEstimateLagNegativeLagAndGaps(t *testing.T) {
	// The metric leads latency by 3 steps (traffic that drives load), and
	// a tenth of the reads failed.
	p99, m := synthetic(300, 0, 9)
	lead := make([]float64, len(m))
	for i := range lead {
		lead[i] = math.NaN()
		if i+3 < len(p99) {
			lead[i] = 2 * p99[i+3]
		}
		if i%10 == 0 {
			lead[i] = math.NaN()
		}
	}
	e, ok := EstimateLag(p99, lead, 10)
	if !ok || e.Lag != -3 || e.Correlation < 0.99 {
		t.Fatalf("got %+v ok=%v, want lag -3, r ≈ 1", e, ok)
	}
}

func TestEstimateLagTooFewOrFlat(t *testing.T) {
	p99, conv := synthetic(MinPairs-1, 0, 1)
	if _, ok := EstimateLag(p99, conv, 0); ok {
		t.Error("fewer than MinPairs pairs gave an estimate")
	}
	flat := make([]float64, 100)
	p99, _ = synthetic(100, 0, 1)
	if _, ok := EstimateLag(p99, flat, 3); ok {
		t.Error("a constant metric gave an estimate")
	}
}

// fakeQuerier answers from a function of the step; err fails a read.
type fakeQuerier struct {
	v   func() float64
	err error
}

func (f *fakeQuerier) Query(ctx context.Context, q string, ts time.Time) (float64, error) {
	if f.err != nil {
		return 0, f.err
	}
	return f.v(), nil
}

func TestReaderSteps(t *testing.T) {
	p99, conv := synthetic(200, 2, 3)
	i := 0
	clock := time.Unix(1_700_000_000, 0)
	q := &fakeQuerier{v: func() float64 { return conv[i] }}
	src := func(time.Duration) map[string]float64 {
		m := map[string]float64{"resnet": p99[i]}
		if i >= 185 {
			m["late"] = p99[i] // appears late: padded, not misaligned
		}
		return m
	}
	cfg := Config{Name: "conversion", Query: "x", URL: "http://p:9090"}.WithDefaults()
	r := newReader(cfg, q, src, func() time.Time { return clock })
	for i = range 200 {
		if i == 100 {
			q.err = errors.New("connection refused")
		}
		if i == 104 {
			q.err = nil
		}
		r.step(context.Background())
		clock = clock.Add(cfg.Interval)
	}
	es, v := r.estimates()
	if v != conv[199] {
		t.Errorf("last value %g, want %g", v, conv[199])
	}
	if len(es) != 1 || es[0].Model != "resnet" {
		t.Fatalf("estimates %+v, want resnet alone (late has too few samples)", es)
	}
	if e := es[0]; e.LagSeconds != 30 || e.Correlation > -0.8 || e.Samples < 180 {
		t.Errorf("estimate %+v, want lag 30 s, r ≤ -0.8", e)
	}
	st := r.status()
	if st.Reads != 200 || st.Errors != 4 || !strings.Contains(st.LastError, "refused") || st.LastSuccess == nil || !st.LastSuccess.Equal(clock.Add(-cfg.Interval)) {
		t.Errorf("status %+v", st)
	}
	if got := len(r.lat["late"]); got != len(r.vals) {
		t.Errorf("late model has %d samples, the metric %d: misaligned", got, len(r.vals))
	}
}

func TestReaderHistoryBounded(t *testing.T) {
	cfg := Config{Name: "c", Query: "x", URL: "http://p:9090", Interval: time.Second, History: 10 * time.Second, MaxLag: 2 * time.Second}.WithDefaults()
	k := 0.0
	r := newReader(cfg, &fakeQuerier{v: func() float64 { k++; return k }}, func(time.Duration) map[string]float64 { return map[string]float64{"m": k} }, time.Now)
	for range 25 {
		r.step(context.Background())
	}
	if len(r.vals) != 10 || len(r.lat["m"]) != 10 || r.vals[9] != 25 {
		t.Fatalf("history %v / %v, want the last 10", r.vals, r.lat["m"])
	}
}

func TestProblemsNameTheField(t *testing.T) {
	errs := Problems([]Config{
		{Name: "conv", Query: "sum(x)", URL: "http://p:9090"},
		{Name: "conv", Query: "", URL: "p:9090"},
		{Name: "", Query: "y", URL: "http://p:9090", Interval: time.Second, Timeout: 2 * time.Second},
	})
	var got []string
	for _, e := range errs {
		got = append(got, e.Error())
	}
	all := strings.Join(got, "\n")
	for _, want := range []string{
		`business_metrics[1].name: "conv" is already business_metrics[0]`,
		"business_metrics[1].query: must be set",
		"business_metrics[1].url: must be the http(s) URL",
		"business_metrics[2].name: must be set",
		"business_metrics[2].timeout: must be positive and at most interval",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("missing %q in:\n%s", want, all)
		}
	}
	if len(errs) != 5 {
		t.Errorf("%d problems, want 5:\n%s", len(errs), all)
	}
}
