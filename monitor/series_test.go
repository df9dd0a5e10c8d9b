package monitor

import (
	"testing"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
)

// within reports whether got is within HDR precision (0.1%, plus the
// microsecond unit) of want.
func within(got, want time.Duration) bool {
	tol := want/1000 + time.Microsecond
	d := got - want
	return d <= tol && -d <= tol
}

func TestQuantilesExact(t *testing.T) {
	cases := []struct {
		name    string
		values  func() []time.Duration
		p50     time.Duration
		p90     time.Duration
		p99     time.Duration
		p999    time.Duration
		maximum time.Duration
	}{
		{
			name: "uniform 1..1000 ms",
			values: func() []time.Duration {
				var vs []time.Duration
				for i := 1; i <= 1000; i++ {
					vs = append(vs, time.Duration(i)*time.Millisecond)
				}
				return vs
			},
			p50: 500 * time.Millisecond, p90: 900 * time.Millisecond,
			p99: 990 * time.Millisecond, p999: 999 * time.Millisecond, maximum: time.Second,
		},
		{
			// A 1% tail that an average would hide.
			name: "bimodal 990 x 1ms + 10 x 250ms",
			values: func() []time.Duration {
				var vs []time.Duration
				for i := range 1000 {
					if i%100 == 99 {
						vs = append(vs, 250*time.Millisecond)
					} else {
						vs = append(vs, time.Millisecond)
					}
				}
				return vs
			},
			p50: time.Millisecond, p90: time.Millisecond,
			p99: time.Millisecond, p999: 250 * time.Millisecond, maximum: 250 * time.Millisecond,
		},
		{
			name: "sub-millisecond 1..2000 µs",
			values: func() []time.Duration {
				var vs []time.Duration
				for i := 1; i <= 2000; i++ {
					vs = append(vs, time.Duration(i)*time.Microsecond)
				}
				return vs
			},
			p50: 1000 * time.Microsecond, p90: 1800 * time.Microsecond,
			p99: 1980 * time.Microsecond, p999: 1998 * time.Microsecond, maximum: 2000 * time.Microsecond,
		},
		{
			// Above the trackable hour the quantiles clamp, Max stays exact.
			name: "beyond one hour",
			values: func() []time.Duration {
				return []time.Duration{2 * time.Hour, 2 * time.Hour}
			},
			p50: time.Hour, p90: time.Hour, p99: time.Hour, p999: time.Hour, maximum: 2 * time.Hour,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, _ := newTestRegistry(t, Options{})
			s := r.Series(testKey)
			vs := tc.values()
			var sum time.Duration
			for _, v := range vs {
				sum += v
				s.Record(Sample{Total: v, Upstream: v / 2, Code: "OK"})
			}
			r.Rotate()
			ss := snapshotOf(t, r, testKey)
			for w := range Window(NumWindows) {
				st := ss.Stats[w][ComponentTotal]
				if st.Count != uint64(len(vs)) || st.Sum != sum || st.Max != tc.maximum {
					t.Errorf("%v: count/sum/max = %d/%v/%v, want %d/%v/%v", w, st.Count, st.Sum, st.Max, len(vs), sum, tc.maximum)
				}
				for _, q := range []struct {
					name      string
					got, want time.Duration
				}{{"p50", st.P50, tc.p50}, {"p90", st.P90, tc.p90}, {"p99", st.P99, tc.p99}, {"p999", st.P999, tc.p999}} {
					if !within(q.got, q.want) {
						t.Errorf("%v %s = %v, want %v", w, q.name, q.got, q.want)
					}
				}
			}
			if got := ss.Quantile("1m", "total", 0.99); got != ss.Stats[Window1m][ComponentTotal].P99 {
				t.Errorf("Quantile(1m, total, 0.99) = %v, want P99 %v", got, ss.Stats[Window1m][ComponentTotal].P99)
			}
		})
	}
}

func TestComponents(t *testing.T) {
	r, _ := newTestRegistry(t, Options{})
	s := r.Series(testKey)
	s.Record(Sample{Total: 10 * time.Millisecond, Upstream: 6 * time.Millisecond, Queue: 3 * time.Millisecond, Code: "OK"})
	// Components from separate clocks can exceed the total: overhead clamps to 0.
	s.Record(Sample{Total: 5 * time.Millisecond, Upstream: 6 * time.Millisecond, Code: "OK"})
	// Negative durations count as 0.
	s.Record(Sample{Total: -time.Second, Upstream: -time.Second, Queue: -time.Second, Code: "OK"})
	r.Rotate()
	ss := snapshotOf(t, r, testKey)
	want := [NumComponents]struct {
		max time.Duration
		sum time.Duration
	}{
		ComponentTotal:    {10 * time.Millisecond, 15 * time.Millisecond},
		ComponentUpstream: {6 * time.Millisecond, 12 * time.Millisecond},
		ComponentOverhead: {time.Millisecond, time.Millisecond},
		ComponentQueue:    {3 * time.Millisecond, 3 * time.Millisecond},
	}
	for c := range Component(NumComponents) {
		st := ss.Stats[Window1m][c]
		if st.Count != 3 || st.Max != want[c].max || st.Sum != want[c].sum {
			t.Errorf("%v: count/max/sum = %d/%v/%v, want 3/%v/%v", c, st.Count, st.Max, st.Sum, want[c].max, want[c].sum)
		}
	}
	if !ss.QueueSeen {
		t.Error("QueueSeen = false after a call with queue time")
	}
	if got := ss.Stats[Window1m][ComponentQueue].P50; got != 0 {
		t.Errorf("queue p50 = %v, want 0 (two of three calls did not queue)", got)
	}
	if got := (Sample{Total: 4, Upstream: 1, Queue: 1}).Overhead(); got != 2 {
		t.Errorf("Sample.Overhead = %v, want 2ns", got)
	}
}

func TestSnapshotLookups(t *testing.T) {
	ss := SeriesSnapshot{}
	ss.Stats[Window5m][ComponentUpstream] = Stats{Count: 1, P50: 1, P90: 2, P99: 3, P999: 4, Max: 5}
	cases := []struct {
		window, component string
		q                 float64
		want              time.Duration
	}{
		{"5m", "upstream", 0.5, 1},
		{"5m", "upstream", 0.75, 2},
		{"5m", "upstream", 0.99, 3},
		{"5m", "upstream", 0.999, 4},
		{"5m", "upstream", 1, 5},
		{"1m", "upstream", 0.99, 0},
		{"2m", "upstream", 0.99, 0},
		{"5m", "nope", 0.99, 0},
	}
	for _, tc := range cases {
		if got := ss.Quantile(tc.window, tc.component, tc.q); got != tc.want {
			t.Errorf("Quantile(%s, %s, %v) = %v, want %v", tc.window, tc.component, tc.q, got, tc.want)
		}
	}
	if _, ok := ss.Get("15m", "queue"); !ok {
		t.Error(`Get("15m", "queue") not found`)
	}
}

// TestComponentsAcrossStorage: every component of every window answers
// as an HDR histogram of the same values would, whether a second's calls
// are kept call by call, packed past rawMax, or spilled by the shards
// into dense recorders, and whether some calls queued and others did not
// (their queue time is a zero, not a value).
func TestComponentsAcrossStorage(t *testing.T) {
	for _, perSecond := range []int{1, 10, 40, 300} {
		r, clk := newTestRegistry(t, Options{})
		s := r.Series(testKey)
		ref := [NumComponents]*hdr.Histogram{}
		var sum, mx [NumComponents]time.Duration
		for c := range ref {
			ref[c] = newDense()
		}
		n := 0
		for range 50 {
			for i := range perSecond {
				n++
				total := time.Duration(1000+(n*7919)%50000) * time.Microsecond
				up := total * time.Duration(30+i%60) / 100
				var queue time.Duration
				if n%3 == 0 {
					queue = time.Duration(100+(n*31)%5000) * time.Microsecond
				}
				s.Record(Sample{Total: total, Upstream: up, Queue: queue, Code: "OK"})
				over := max(total-up-queue, 0) // separate clocks: clamped
				for c, d := range [NumComponents]time.Duration{total, up, over, queue} {
					_ = ref[c].RecordValue(toMicros(d))
					sum[c] += d
					mx[c] = max(mx[c], d)
				}
			}
			tick(r, clk, 1)
		}
		ss := snapshotOf(t, r, testKey)
		for _, w := range []Window{Window1m, Window5m} {
			for c := range Component(NumComponents) {
				st := ss.Stats[w][c]
				want := [4]time.Duration{}
				for i, p := range percentiles {
					want[i] = min(fromMicros(ref[c].ValueAtPercentile(p)), mx[c])
				}
				got := [4]time.Duration{st.P50, st.P90, st.P99, st.P999}
				if st.Count != uint64(n) || st.Sum != sum[c] || st.Max != mx[c] || got != want {
					t.Errorf("%d calls a second, %v %v: count %d sum %v max %v quantiles %v; want %d %v %v %v",
						perSecond, w, c, st.Count, st.Sum, st.Max, got, n, sum[c], mx[c], want)
				}
			}
		}
	}
}
