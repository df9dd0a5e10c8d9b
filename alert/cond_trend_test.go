package alert

import (
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/infergate/infergate/alert/notify"
	"github.com/infergate/infergate/monitor"
)

// callSource simulates a model's calls, one second at a time, the way
// bench detect's recsys answers them: 100 calls a second of about 104 ms
// (a 100 ms delay and 4 ms of compute with 1 ms of jitter), 2% of them
// computing 10 to 13 times longer (the p99, about 145 ms), plus extra,
// which a test sets (a creep, a step). Recent reads the exact quantiles
// of the last n seconds' calls.
type callSource struct {
	mu    sync.Mutex
	rng   *rand.Rand
	rate  int
	extra float64 // ms added to every call
	secs  [][]time.Duration
}

func newCallSource(seed uint64) *callSource {
	return &callSource{rng: rand.New(rand.NewPCG(seed, 47)), rate: 100}
}

// tick makes one second of calls.
func (c *callSource) tick() {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := make([]time.Duration, c.rate)
	for i := range s {
		compute := 4.1
		if c.rng.Float64() < 0.02 {
			compute *= 10 + 3*c.rng.Float64()
		}
		ms := 100 + compute + c.extra + c.rng.NormFloat64()
		s[i] = time.Duration(ms * float64(time.Millisecond))
	}
	c.secs = append(c.secs, s)
	if len(c.secs) > 120 {
		c.secs = c.secs[1:]
	}
}

func (c *callSource) Recent(n int, group func(monitor.SeriesKey) string) (map[string]monitor.RecentStats, time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := monitor.SeriesKey{Model: "m", Version: "1", Method: "/inference.GRPCInferenceService/ModelInfer", Upstream: "u", CodeClass: monitor.CodeClassOK}
	g := group(k)
	if g == "" || len(c.secs) == 0 {
		return map[string]monitor.RecentStats{}, time.Time{}
	}
	var all []time.Duration
	for _, s := range c.secs[max(0, len(c.secs)-n):] {
		all = append(all, s...)
	}
	slices.Sort(all)
	at := func(q float64) time.Duration { return all[min(len(all)-1, int(q*float64(len(all))))] }
	var rs monitor.RecentStats
	rs.Stats[monitor.ComponentTotal] = monitor.Stats{Count: uint64(len(all)), P50: at(0.5), P90: at(0.9), P99: at(0.99), P999: at(0.999), Max: all[len(all)-1]}
	return map[string]monitor.RecentStats{g: rs}, time.Time{}
}

// trendRig is an engine with one trend rule over a callSource.
type trendRig struct {
	c   *clock
	src *callSource
	e   *Engine
}

func newTrendRig(t *testing.T, seed uint64, slope string, rate int) *trendRig {
	t.Helper()
	cfg := &Config{Rules: []RuleConfig{{Name: "Creep", Condition: Condition{Kind: KindTrend, Quantile: "p99", Slope: slope}}}}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	r := &trendRig{c: newClock(), src: newCallSource(seed)}
	r.src.rate = rate
	e, err := New(Options{Config: cfg, Latency: r.src, Now: r.c.now, Send: func(string, *notify.Message) {}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	r.e = e
	return r
}

// run steps d, one second at a time, calling each (if set) first; it
// returns how long until Creep fired, or -1.
func (r *trendRig) run(d time.Duration, each func(s time.Duration)) time.Duration {
	for s := time.Duration(0); s < d; s += time.Second {
		if each != nil {
			each(s)
		}
		r.src.tick()
		r.c.add(time.Second)
		r.e.Step()
		for _, a := range r.e.Alerts() {
			if a.Name == "Creep" && a.State == StateFiring {
				return s + time.Second
			}
		}
	}
	return -1
}

// TestTrendCreepWithinAMinute: a p99 creeping +10 ms a minute fires a
// 5ms/min trend rule about 50 s after its onset on a model of 400 calls/s
// (65 s at worst),
// and about 90 s on one of 100 calls/s (150 s at worst: its 5 s p99 rests on 10 tail
// calls: a bound at 99% needs more seconds), in every one of 10 runs
// (fake time; the calls are bench detect's recsys).
func TestTrendCreepWithinAMinute(t *testing.T) {
	for _, tc := range []struct {
		rate   int
		within time.Duration
	}{{400, 65 * time.Second}, {100, 150 * time.Second}} {
		var worst, sum time.Duration
		for seed := range uint64(10) {
			r := newTrendRig(t, seed, "5ms/min", tc.rate)
			if at := r.run(5*time.Minute, nil); at >= 0 {
				t.Fatalf("%d calls/s, seed %d: fired on flat calls after %v", tc.rate, seed, at)
			}
			at := r.run(3*time.Minute, func(s time.Duration) { r.src.extra = 10 * s.Minutes() })
			if at < 0 || at > tc.within {
				t.Errorf("%d calls/s, seed %d: creep of +10ms/min fired after %v, want within %v", tc.rate, seed, at, tc.within)
			}
			worst, sum = max(worst, at), sum+at
		}
		t.Logf("%d calls/s: creep of +10ms/min fired after %v on average, %v at worst", tc.rate, sum/10, worst)
	}
}

// TestTrendQuietOnNoise: an hour of flat calls (noise only) fires
// nothing, in 10 runs.
func TestTrendQuietOnNoise(t *testing.T) {
	for seed := range uint64(10) {
		r := newTrendRig(t, 100+seed, "5ms/min", 100)
		if at := r.run(time.Hour, nil); at >= 0 {
			t.Errorf("seed %d: fired on flat calls after %v", seed, at)
		}
	}
}

// TestTrendQuietOnStep: a step of +30 ms (or -30 ms) fires no trend
// rule, wherever it falls in the spans: a step is the baseline rule's
// job.
func TestTrendQuietOnStep(t *testing.T) {
	for seed := range uint64(10) {
		for _, d := range []float64{30, 60, -30} {
			r := newTrendRig(t, 200+seed, "5ms/min", 100)
			r.run(5*time.Minute, nil)
			if at := r.run(10*time.Minute, func(time.Duration) { r.src.extra = d }); at >= 0 {
				t.Errorf("seed %d: a step of %+gms fired the trend rule after %v", seed, d, at)
			}
		}
	}
}
