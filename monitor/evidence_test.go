package monitor

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

func TestLowerBoundRank(t *testing.T) {
	cases := []struct {
		name   string
		n      uint64
		q      float64
		rank   uint64
		wantOK bool
	}{
		// One slow call among 100 is what chance gives a p99: six are
		// needed before the 95th value bounds it.
		{"p99 of 100", 100, 0.99, 95, true},
		{"p50 of 5: too few", 5, 0.5, 0, false},
		{"p999 of 100: undefined", 100, 0.999, 0, false},
		{"p999 of 1000", 1000, 0.999, 995, true},
		{"p99 of 99: undefined", 99, 0.99, 0, false},
		{"no calls", 0, 0.5, 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, ok := LowerBoundRank(tc.n, tc.q)
			if r != tc.rank || ok != tc.wantOK {
				t.Errorf("LowerBoundRank(%d, %v) = %d, %v; want %d, %v", tc.n, tc.q, r, ok, tc.rank, tc.wantOK)
			}
		})
	}
}

// TestLowerBoundHolds draws calls from a known distribution and counts how
// often the bound lies above the true quantile: at most about
// 1-Confidence of the time, for small and large windows alike.
func TestLowerBoundHolds(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{50, 300, 3000} {
		for qi, q := range Quantiles {
			truth := -math.Log(1-q) * 10e3 // exponential, mean 10 ms, in µs
			over, tried := 0, 0
			for range 400 {
				m := newMerger()
				m.reset(false)
				sl := &slice{}
				f := &packedFree{}
				for range n {
					us := uint32(rng.ExpFloat64() * 10e3)
					sl.vals.add(&[NumComponents]uint32{us, 0, 0, noQueue}, f)
					sl.max[ComponentTotal] = max(sl.max[ComponentTotal], int64(us)*1000)
				}
				sl.count = uint32(n)
				m.add(sl, ComponentTotal)
				b := m.bounds()
				if !b.OK[qi] {
					continue
				}
				tried++
				if float64(b.Lower[qi]/time.Microsecond) > truth*1.002 { // HDR's bucket width
					over++
				}
			}
			if tried > 0 && over > 3 {
				t.Errorf("n=%d q=%v: bound above the true quantile in %d of %d windows", n, q, over, tried)
			}
		}
	}
}

func TestRecentBoundsAndFailures(t *testing.T) {
	r := NewRegistry(Options{NoRequestHistogram: true})
	ok := SeriesKey{Model: "m", Version: "1", Method: "/Infer", Upstream: "u", CodeClass: CodeClassOK}
	bad := ok
	bad.CodeClass = CodeClassServerError
	for i := range 200 {
		d := 10 * time.Millisecond
		if i == 0 {
			d = time.Second // one slow call: the p99 of 200 calls, not evidence
		}
		r.Record(ok, Sample{Total: d, Code: "OK"})
	}
	for range 3 {
		r.Record(bad, Sample{Total: time.Millisecond, Code: "Internal"})
	}
	r.Record(bad, Sample{Total: time.Millisecond, Code: "Unavailable"})
	r.Rotate()
	all := func(SeriesKey) string { return "m" }
	got, _ := r.Recent(1, all)
	rs := got["m"]
	if rs.Stats[ComponentTotal].Count != 204 {
		t.Fatalf("count = %d", rs.Stats[ComponentTotal].Count)
	}
	b := rs.Bounds[ComponentTotal]
	if !b.OK[2] || b.Lower[2] > 11*time.Millisecond {
		t.Errorf("p99 lower bound = %v (ok %v), want about 10ms: one slow call is no evidence", b.Lower[2], b.OK[2])
	}
	if rs.Stats[ComponentTotal].P99 < 10*time.Millisecond {
		t.Errorf("p99 = %v", rs.Stats[ComponentTotal].P99)
	}
	if rs.Failed["Internal"] != 3 || rs.Failed["Unavailable"] != 1 || len(rs.Failed) != 2 {
		t.Errorf("Failed = %v", rs.Failed)
	}
	if n := rs.FailedOf([]string{"Internal"}); n != 3 {
		t.Errorf("FailedOf(Internal) = %d", n)
	}
	if n := rs.FailedOf(nil); n != 4 {
		t.Errorf("FailedOf(nil) = %d", n)
	}
	// The next slice: the failures were counted once.
	r.Record(bad, Sample{Total: time.Millisecond, Code: "Internal"})
	r.Rotate()
	got, _ = r.Recent(1, all)
	if f := got["m"].Failed; f["Internal"] != 1 || f["Unavailable"] != 0 {
		t.Errorf("next slice Failed = %v", f)
	}
	// Ten slow calls of 200 are evidence.
	for i := range 200 {
		d := 10 * time.Millisecond
		if i < 10 {
			d = time.Second
		}
		r.Record(ok, Sample{Total: d, Code: "OK"})
	}
	r.Rotate()
	got, _ = r.Recent(1, all)
	if b := got["m"].Bounds[ComponentTotal]; b.Lower[2] < 900*time.Millisecond {
		t.Errorf("p99 lower bound with 10 slow calls of 200 = %v", b.Lower[2])
	}
}
