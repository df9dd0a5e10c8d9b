package route

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/infergate/infergate/monitor"
)

// spread interleaves: in every 20 consecutive calls a share s sends close
// to 20s of them.
func TestSpreadInterleaves(t *testing.T) {
	for _, s := range []float64{0.1, 0.5, 0.9} {
		for start := uint64(0); start < 1000; start += 20 {
			n := 0
			for i := start; i < start+20; i++ {
				if spread(i) < s {
					n++
				}
			}
			if d := float64(n) - 20*s; d < -2 || d > 2 {
				t.Fatalf("share %v: %d of 20 calls from %d", s, n, start)
			}
		}
	}
}

// Hedges that won took the slowest calls away from the primary's answered
// ones: the tail estimate counts them at the top, so hedging cannot lower
// its own delay and end up sending a healthy primary's tail to the
// lighter model.
func TestCensoredTail(t *testing.T) {
	ms := time.Millisecond
	st := monitor.Stats{Count: 19990, P50: 6 * ms, P90: 8 * ms, P99: 30 * ms, P999: 40 * ms, Max: 45 * ms}
	for _, c := range []struct {
		name string
		won  uint64
		prev time.Duration
		want time.Duration
	}{
		{"no hedges: the answered calls' p99.9", 0, 0, 40 * ms},
		// 10 of 20000 hedged: 10 answered calls above the true p99.9 of
		// 20000, a quantile above the answered calls' p99.9: read on the
		// slow side.
		{"a few hedges: a higher quantile", 10, 42 * ms, 45 * ms},
		{"hedges are 0.1% of calls: beyond the delay, hold", 25, 50 * ms, 50 * ms},
		{"hedges 0.1%, no estimate yet: the answered p99.9", 25, 0, 40 * ms},
		{"a sudden drop is taken down by a tenth", 0, 100 * ms, 90 * ms},
		{"a sudden rise is taken up by a tenth", 0, 10 * ms, 11 * ms},
		{"a slowdown's answers with hedges winning: up by a tenth", 25, 20 * ms, 22 * ms},
		// A model whose calls take seconds keeps a tail of seconds: no cap
		// hedges all of its healthy calls.
		{"not capped", 0, 2 * time.Second, 1800 * ms},
		{"no estimate yet: the answered p99.9", 0, 0, 40 * ms},
	} {
		if got := censoredTail(st, c.won, c.prev); got != c.want {
			t.Errorf("%s: censoredTail(won %d, prev %s) = %s, want %s", c.name, c.won, c.prev, got, c.want)
		}
	}
}

// The feedback loop of automatic hedging, window by window, on a latency
// like simserver's resnet50 (a 6-9 ms body, a tail of 0.05-2% of calls
// 4-8x slower): with the won hedges counted, the delay settles at 3x the
// true p99.9 and hedges at most about 0.1% of calls; reading only the answered calls'
// quantile walks the delay down into the body and hedges the whole tail
// (calls answered by the lighter model while the primary is healthy).
func TestAutoHedgeDelayDoesNotFeedOnItself(t *testing.T) {
	for _, tail := range []float64{0.0005, 0.001, 0.0015, 0.003, 0.01, 0.02} {
		for seed := range uint64(5) {
			hedged, naive := autoHedgeLoop(tail, seed)
			// A tail of about 0.1% of the calls leaves the p99.9 between
			// body and tail: hedging that tail is the definition's own
			// ambiguity, not the feedback.
			if hedged > 0.002 {
				t.Errorf("tail %.2f%%, seed %d: with won hedges counted, %.2f%% of a healthy primary's calls were hedged, want <= 0.2%%",
					100*tail, seed, 100*hedged)
			}
			if tail == 0.0015 && naive < 0.001 {
				t.Errorf("tail %.2f%%, seed %d: the answered calls' quantile alone hedged %.2f%%: the test no longer shows the feedback",
					100*tail, seed, 100*naive)
			}
		}
	}
}

// autoHedgeLoop runs the hedge delay's feedback loop for 60 windows of
// 2000 calls and returns the share of calls hedged in the last 30 with
// censoredTail and with the answered calls' p99.9 alone.
func autoHedgeLoop(tail float64, seed uint64) (hedged, naive float64) {
	rng := rand.New(rand.NewPCG(seed, 2))
	draw := func() time.Duration {
		d := 6*time.Millisecond + time.Duration(rng.Float64()*float64(3*time.Millisecond))
		if rng.Float64() < tail {
			d *= time.Duration(4 + rng.IntN(5))
		}
		return d
	}
	run := func(estimate func(st monitor.Stats, won uint64, prev time.Duration) time.Duration) float64 {
		var est time.Duration
		var hedged, calls int
		for w := range 60 {
			delay := time.Second
			if est > 0 {
				delay = min(max(3*est, 10*time.Millisecond), time.Second)
			}
			var answered []time.Duration
			won := 0
			for range 2000 {
				if d := draw(); d > delay {
					won++
				} else {
					answered = append(answered, d)
				}
			}
			if w >= 30 {
				hedged += won
				calls += 2000
			}
			slices.Sort(answered)
			q := func(f float64) time.Duration { return answered[int(f*float64(len(answered)-1))] }
			st := monitor.Stats{Count: uint64(len(answered)), P50: q(0.5), P90: q(0.9), P99: q(0.99), P999: q(0.999), Max: answered[len(answered)-1]}
			est = estimate(st, uint64(won), est)
		}
		return float64(hedged) / float64(calls)
	}
	answeredTail := func(st monitor.Stats, _ uint64, _ time.Duration) time.Duration { return st.P999 }
	return run(censoredTail), run(answeredTail)
}
