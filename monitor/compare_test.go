package monitor

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// byVersion groups a model's successful calls by version.
func byVersion(k SeriesKey) string {
	if k.CodeClass != CodeClassOK {
		return ""
	}
	return k.Version
}

// recordVersion records n calls of one version of model "m" whose
// latency is scale × 10ms × (1 + Exp(0.1)): a floor plus a tail, drawn
// from a fixed seed.
func recordVersion(r *Registry, rng *rand.Rand, version string, n int, scale float64) {
	k := SeriesKey{Model: "m", Version: version, Method: "ModelInfer", Upstream: "u", CodeClass: CodeClassOK, Route: RoutePrimary}
	for range n {
		d := scale * 10e6 * (1 + 0.1*rng.ExpFloat64())
		r.Record(k, Sample{Total: time.Duration(d)})
	}
}

// versions returns the 5m distributions of versions "2" and "3" after
// n calls each, version 3 slower by scale.
func versions(t *testing.T, n int, scale float64) (v3, v2 *Distribution) {
	t.Helper()
	r, clk := newTestRegistry(t, Options{NoRequestHistogram: true})
	rng := rand.New(rand.NewPCG(1, 2))
	// Spread over three seconds, so that the window merges slices.
	for range 3 {
		recordVersion(r, rng, "2", n/3, 1)
		recordVersion(r, rng, "3", n/3, scale)
		tick(r, clk, 1)
	}
	ds := r.Distributions(Window5m, ComponentTotal, byVersion)
	if len(ds) != 2 || ds["2"] == nil || ds["3"] == nil {
		t.Fatalf("Distributions = %v, want versions 2 and 3", ds)
	}
	if got := ds["3"].Count(); got != uint64(n/3*3) {
		t.Fatalf("version 3 has %d calls, want %d", got, n/3*3)
	}
	return ds["3"], ds["2"]
}

func TestCompareQuantileClaimsASlowerVersion(t *testing.T) {
	v3, v2 := versions(t, 6000, 1.3)
	r := CompareQuantile(v3, v2, 0.99, CompareLevel)
	if !r.OK || !r.Slower() || r.Faster() {
		t.Fatalf("1.3x slower with 6000 calls each: %+v, want a claim", r)
	}
	if math.Abs(r.Ratio-1.3) > 0.05 || r.Lower > 1.3 || r.Upper < 1.3 {
		t.Errorf("ratio %.3f in [%.3f, %.3f], want about 1.3 inside its interval", r.Ratio, r.Lower, r.Upper)
	}
	// The other way round it is faster, by the inverse.
	back := CompareQuantile(v2, v3, 0.99, CompareLevel)
	if !back.Faster() || math.Abs(back.Ratio*r.Ratio-1) > 0.01 {
		t.Errorf("version 2 over 3: %+v, want faster by 1/%.3f", back, r.Ratio)
	}
}

func TestCompareQuantileEqualVersionsAreNotClaimed(t *testing.T) {
	v3, v2 := versions(t, 6000, 1)
	r := CompareQuantile(v3, v2, 0.99, CompareLevel)
	if !r.OK {
		t.Fatalf("6000 calls each: %+v, want an interval", r)
	}
	if r.Slower() || r.Faster() || r.Lower > 1 || r.Upper < 1 {
		t.Errorf("equal versions: ratio %.3f in [%.3f, %.3f], want an interval around 1 and no claim", r.Ratio, r.Lower, r.Upper)
	}
	// Not uselessly wide either: within ±15% at 6000 calls.
	if r.Lower < 0.85 || r.Upper > 1.15 {
		t.Errorf("interval [%.3f, %.3f] is wider than ±15%%", r.Lower, r.Upper)
	}
}

func TestCompareQuantileFewCalls(t *testing.T) {
	v3, v2 := versions(t, 300, 2)
	r := CompareQuantile(v3, v2, 0.99, CompareLevel)
	if r.OK || r.Slower() || r.Faster() {
		t.Errorf("300 calls each, twice as slow: %+v, want too few calls for a p99 claim", r)
	}
	if r.Ratio < 1.5 {
		t.Errorf("point ratio %.2f, want about 2 even without a claim", r.Ratio)
	}
	// The p50 needs far fewer calls: 300 are enough to claim it.
	if r := CompareQuantile(v3, v2, 0.5, CompareLevel); !r.Slower() {
		t.Errorf("p50 of 300 calls each, twice as slow: %+v, want a claim", r)
	}
}

// TestQuantileRanksCover: the intervals hold the true quantile at least
// as often as their level says, over many samples of a known law.
func TestQuantileRanksCover(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, tc := range []struct {
		n     int
		q     float64
		level float64
	}{{1000, 0.99, 0.95}, {600, 0.99, 0.975}, {50, 0.5, 0.95}, {20000, 0.99, 0.95}} {
		lo, hi, ok := QuantileRanks(uint64(tc.n), tc.q, tc.level)
		if !ok || lo < 1 || hi > uint64(tc.n) || lo > hi {
			t.Fatalf("QuantileRanks(%d, %v, %v) = %d, %d, %v", tc.n, tc.q, tc.level, lo, hi, ok)
		}
		const trials = 400
		miss := 0
		u := make([]float64, tc.n)
		for range trials {
			for i := range u {
				u[i] = rng.Float64() // uniform: the true q-quantile is q
			}
			slices.Sort(u)
			if u[lo-1] > tc.q || u[hi-1] < tc.q {
				miss++
			}
		}
		// Binomial(400, 0.05) exceeds 35 with probability below 1e-4.
		if limit := int(trials*(1-tc.level)) + 15; miss > limit {
			t.Errorf("n=%d q=%v level=%v: [%d, %d] missed %d of %d, want at most %d", tc.n, tc.q, tc.level, lo, hi, miss, trials, limit)
		}
	}
}

func TestMinCalls(t *testing.T) {
	// The p99's upper bound needs the largest call to be above it with
	// probability 1-1.25%: 0.99^n <= 0.0125, n >= 436.
	if got := MinCalls(0.99, 0.975); got < 430 || got > 445 {
		t.Errorf("MinCalls(p99, 97.5%%) = %d, want about 436", got)
	}
	n := MinCalls(0.99, 0.975)
	if _, _, ok := QuantileRanks(n, 0.99, 0.975); !ok {
		t.Errorf("QuantileRanks(%d) not ok", n)
	}
	if _, _, ok := QuantileRanks(n-1, 0.99, 0.975); ok {
		t.Errorf("QuantileRanks(%d) ok, want MinCalls to be the least", n-1)
	}
}
