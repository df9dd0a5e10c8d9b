package monitor

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

func counts(ss SeriesSnapshot) [NumWindows]uint64 {
	var n [NumWindows]uint64
	for w := range Window(NumWindows) {
		n[w] = ss.Stats[w][ComponentTotal].Count
	}
	return n
}

func TestWindowRotation(t *testing.T) {
	r, clk := newTestRegistry(t, Options{})
	s := r.Series(testKey)
	s.Record(Sample{Total: time.Millisecond, Code: "OK"})

	// After the call, each step rotates until `after` slices have completed.
	cases := []struct {
		name  string
		after int
		want  [NumWindows]uint64
	}{
		{"current slice is not visible yet", 0, [NumWindows]uint64{0, 0, 0}},
		{"first rotation publishes it", 1, [NumWindows]uint64{1, 1, 1}},
		{"60 slices old, still in 1m", 60, [NumWindows]uint64{1, 1, 1}},
		{"older than 1m, still in 5m and 15m", 61, [NumWindows]uint64{0, 1, 1}},
		{"just under 5m", 299, [NumWindows]uint64{0, 1, 1}},
		{"5m old leaves 5m", 300, [NumWindows]uint64{0, 0, 1}},
		{"just under 15m", 899, [NumWindows]uint64{0, 0, 1}},
		{"15m old leaves every window", 900, [NumWindows]uint64{0, 0, 0}},
	}
	done := 0
	for _, tc := range cases {
		for ; done < tc.after; done++ {
			clk.t = clk.t.Add(time.Second)
			r.Rotate()
		}
		if got := counts(snapshotOf(t, r, testKey)); got != tc.want {
			t.Errorf("%s (after %d rotations): counts 1m/5m/15m = %v, want %v", tc.name, tc.after, got, tc.want)
		}
	}

	// An idle series gives every histogram back.
	for _, sl := range append(s.win.fine, s.win.coarse...) {
		if sl != nil {
			t.Fatalf("idle series still holds a slice: %+v", sl)
		}
	}
	if got := snapshotOf(t, r, testKey).Calls; got != 1 {
		t.Errorf("Calls = %d, want 1 (cumulative)", got)
	}
}

func TestWindowSliceLength(t *testing.T) {
	r, _ := newTestRegistry(t, Options{SliceLength: 10 * time.Second})
	if r.cfg.slicesPerMinute != 6 {
		t.Fatalf("slicesPerMinute = %d, want 6", r.cfg.slicesPerMinute)
	}
	r.Record(testKey, Sample{Total: time.Millisecond, Code: "OK"})
	for range 6 {
		r.Rotate()
	}
	if got := counts(snapshotOf(t, r, testKey)); got != [NumWindows]uint64{1, 1, 1} {
		t.Fatalf("after 6 x 10s: counts = %v, want [1 1 1]", got)
	}
	r.Rotate()
	if got := counts(snapshotOf(t, r, testKey)); got != [NumWindows]uint64{0, 1, 1} {
		t.Fatalf("after 7 x 10s: counts = %v, want [0 1 1]", got)
	}
}

func TestOptionsDefaults(t *testing.T) {
	cases := []struct {
		name      string
		opts      Options
		slice     time.Duration
		perMinute int
		maxSeries int
	}{
		{"zero value", Options{}, time.Second, 60, DefaultMaxSeries},
		{"negative", Options{SliceLength: -1, MaxSeries: -1}, time.Second, 60, DefaultMaxSeries},
		{"7s rounds to 6.67s", Options{SliceLength: 7 * time.Second}, time.Minute / 9, 9, DefaultMaxSeries},
		{"over a minute caps", Options{SliceLength: time.Hour, MaxSeries: 5}, time.Minute, 1, 5},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.opts.config()
			if c.slice != tc.slice || c.slicesPerMinute != tc.perMinute || c.maxSeries != tc.maxSeries {
				t.Errorf("slice/perMinute/maxSeries = %v/%d/%d, want %v/%d/%d",
					c.slice, c.slicesPerMinute, c.maxSeries, tc.slice, tc.perMinute, tc.maxSeries)
			}
			if c.shards < 1 || c.shards&(c.shards-1) != 0 {
				t.Errorf("shards = %d, want a power of two", c.shards)
			}
		})
	}
	if got := (Options{Shards: 3}).config().shards; got != 4 {
		t.Errorf("Shards 3 -> %d, want 4", got)
	}
}

// TestRunRotates drives Run on the fake clock of testing/synctest.
func TestRunRotates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := NewRegistry(Options{})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() {
			defer close(done)
			r.Run(ctx)
		}()
		r.Record(testKey, Sample{Total: time.Millisecond, Code: "OK"})

		time.Sleep(1500 * time.Millisecond)
		synctest.Wait()
		if got := counts(snapshotOf(t, r, testKey)); got != [NumWindows]uint64{1, 1, 1} {
			t.Errorf("after 1.5s: counts = %v, want [1 1 1]", got)
		}
		time.Sleep(60 * time.Second)
		synctest.Wait()
		if got := counts(snapshotOf(t, r, testKey)); got != [NumWindows]uint64{0, 1, 1} {
			t.Errorf("after 61.5s: counts = %v, want [0 1 1]", got)
		}
		time.Sleep(13*time.Minute + 30*time.Second)
		synctest.Wait()
		if got := counts(snapshotOf(t, r, testKey)); got != [NumWindows]uint64{0, 0, 1} {
			t.Errorf("after 15m: counts = %v, want [0 0 1]", got)
		}
		// Idle for the default 15 minutes: the series is dropped.
		time.Sleep(time.Minute)
		synctest.Wait()
		if r.Len() != 0 || len(r.Snapshot()) != 0 {
			t.Errorf("after 16m idle: %d series, want the idle one dropped", r.Len())
		}
		cancel()
		<-done
	})
}

// TestRunCatchesUp checks that missed ticks still age the windows: the
// clock jumps 2 minutes between two ticks.
func TestRunCatchesUp(t *testing.T) {
	r, clk := newTestRegistry(t, Options{})
	r.Record(testKey, Sample{Total: time.Millisecond, Code: "OK"})
	clk.t = clk.t.Add(time.Second)
	r.rotateTo(clk.t)
	if got := counts(snapshotOf(t, r, testKey)); got != [NumWindows]uint64{1, 1, 1} {
		t.Fatalf("after one tick: counts = %v, want [1 1 1]", got)
	}
	clk.t = clk.t.Add(2 * time.Minute)
	r.rotateTo(clk.t)
	if got := counts(snapshotOf(t, r, testKey)); got != [NumWindows]uint64{0, 1, 1} {
		t.Fatalf("after a 2 minute stall: counts = %v, want [0 1 1]", got)
	}
	if r.ticks != 121 {
		t.Errorf("ticks = %d, want 121", r.ticks)
	}
}

// TestRawPercentilesMatchHDR: quantiles read from raw bucket indexes (a
// series with few calls) equal those of an HDR histogram of the same
// values, at every magnitude and with zeros among them.
func TestRawPercentilesMatchHDR(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	pcts := []float64{50, 90, 99, 99.9, 100, 0.1}
	for trial := range 500 {
		n := 1 + rng.IntN(600)
		raw := make([]uint16, n)
		h := newDense()
		for i := range raw {
			v := int64(rng.ExpFloat64() * math.Pow(10, float64(trial%10)))
			v = min(v, hdrHighest)
			raw[i] = bucketOf(v)
			h.RecordValue(v)
		}
		zeros := int64(rng.IntN(3) * rng.IntN(n+1))
		h.RecordValues(0, zeros)
		got := rawPercentilesInto(slices.Clone(raw), zeros, pcts, make([]int64, len(pcts)))
		want := h.ValueAtPercentilesSlice(pcts)
		if !slices.Equal(got, want) {
			t.Fatalf("trial %d (n=%d, zeros=%d): raw %v, HDR %v", trial, n, zeros, got, want)
		}
	}
}

// TestBucketIndexes: every value maps to a bucket whose lowest value an
// HDR histogram puts in the same bucket, indexes follow value order, up to
// one hour (index 23,220: a uint16 holds every index).
func TestBucketIndexes(t *testing.T) {
	h := newDense()
	prev := uint16(0)
	for v := int64(0); v <= hdrHighest; v = v + 1 + v/997 {
		i := bucketOf(v)
		if i < prev {
			t.Fatalf("bucketOf(%d) = %d, below the index of a smaller value (%d)", v, i, prev)
		}
		prev = i
		lo := bucketValue(i)
		if !h.ValuesAreEquivalent(lo, v) || lo > v {
			t.Fatalf("bucketValue(bucketOf(%d)) = %d, not the low end of its HDR bucket", v, lo)
		}
	}
	if lo := bucketValue(bucketOf(hdrHighest)); !h.ValuesAreEquivalent(lo, hdrHighest) {
		t.Errorf("one hour maps to a bucket starting at %d", lo)
	}
}
