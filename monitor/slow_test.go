package monitor

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// inputsOf is an InputSource that counts how often it is asked.
type inputsOf struct {
	in    []InputShape
	asked int
}

func (s *inputsOf) CallInputs() []InputShape { s.asked++; return s.in }

func image(rows int64) []InputShape {
	return []InputShape{{Name: "INPUT0", Datatype: "FP32", Shape: []int64{rows, 3, 224, 224}, Dims: 4}}
}

// slowOf returns the calls of window w of testKey's model.
func slowOf(t *testing.T, r *Registry, w Window) SlowWindow {
	t.Helper()
	reps := r.SlowCalls(testKey.Model, "", w)
	if len(reps) != 1 || len(reps[0].Windows) != 1 {
		t.Fatalf("SlowCalls(%q) = %+v, want one version with one window", testKey.Model, reps)
	}
	return reps[0].Windows[0]
}

func latencies(calls []SlowCall) []time.Duration {
	var out []time.Duration
	for _, c := range calls {
		out = append(out, c.Total)
	}
	return out
}

// The keeper holds the N slowest calls, slowest first, with what each
// carried and how it was served; only the kept calls' inputs are asked for.
func TestSlowKeepsTheSlowest(t *testing.T) {
	r, _ := newTestRegistry(t, Options{SlowCalls: 3})
	var sources []*inputsOf
	for i, ms := range []int{5, 1, 9, 3, 7, 2, 8, 4, 6} {
		src := &inputsOf{in: image(int64(ms))}
		sources = append(sources, src)
		sm := Sample{Total: time.Duration(ms) * time.Millisecond, Upstream: time.Millisecond, Queue: 2 * time.Microsecond,
			Code: "OK", BytesIn: int64(ms) << 10, Attempts: 1 + i%2, BatchID: uint64(100 + ms), TraceID: traceID(byte(ms)),
			Features: CallFeatures{BytesIn: int64(ms) << 10, Rows: int64(ms), NumInputs: 1, ShapeKey: uint64(ms), Lazy: src}}
		r.Record(testKey, sm)
	}
	got := slowOf(t, r, Window1m)
	want := []time.Duration{9 * time.Millisecond, 8 * time.Millisecond, 7 * time.Millisecond}
	if fmt.Sprint(latencies(got.Calls)) != fmt.Sprint(want) {
		t.Fatalf("kept %v, want %v", latencies(got.Calls), want)
	}
	c := got.Calls[0]
	if c.Inputs != "INPUT0:FP32[9,3,224,224]" || c.Rows != 9 || c.BytesIn != 9<<10 || c.BatchID != 109 ||
		c.Attempts != 1 || c.Route != RoutePrimary || c.UpstreamName != "triton" || c.Method != "ModelInfer" ||
		c.Code != "OK" || c.TraceID != strings.Repeat("09", 16) || c.Queue != 2*time.Microsecond {
		t.Errorf("slowest call = %+v", c)
	}
	// 5, 1 and 9 entered the set while it had room; 3, 7 and 8 beat
	// its fastest; 2, 4 and 6 were turned away without their inputs.
	for i, ms := range []int{5, 1, 9, 3, 7, 2, 8, 4, 6} {
		if (ms == 2 || ms == 4 || ms == 6) && sources[i].asked > 0 {
			t.Errorf("the %d ms call's inputs were read though it never entered the slow set", ms)
		}
	}
}

// Slow calls leave the 1m window after a minute and the 15m window after
// fifteen; each window keeps at most N of them.
func TestSlowRotatesWithTheWindows(t *testing.T) {
	r, clk := newTestRegistry(t, Options{SlowCalls: 2})
	for ms := 1; ms <= 5; ms++ {
		r.Record(testKey, Sample{Total: time.Duration(ms) * time.Millisecond, Code: "OK"})
	}
	tick(r, clk, 30) // half a minute: in every window
	for w := range Window(NumWindows) {
		if got := latencies(slowOf(t, r, w).Calls); fmt.Sprint(got) != "[5ms 4ms]" {
			t.Errorf("%s window after 30s: %v, want [5ms 4ms]", w, got)
		}
	}
	r.Record(testKey, Sample{Total: time.Microsecond, Code: "OK"}) // keeps the series alive
	tick(r, clk, 45)
	if got := slowOf(t, r, Window1m).Calls; len(got) != 1 || got[0].Total != time.Microsecond {
		t.Errorf("1m window after 75s: %v, want only the 1µs call of 45s ago", latencies(got))
	}
	if got := latencies(slowOf(t, r, Window5m).Calls); fmt.Sprint(got) != "[5ms 4ms]" {
		t.Errorf("5m window after 75s: %v, want [5ms 4ms]", got)
	}
	for range 6 {
		r.Record(testKey, Sample{Total: time.Microsecond, Code: "OK"})
		tick(r, clk, 60)
	}
	if got := latencies(slowOf(t, r, Window5m).Calls); fmt.Sprint(got) != "[1µs 1µs]" {
		t.Errorf("5m window after 7m: %v, want [1µs 1µs]", got)
	}
	if got := latencies(slowOf(t, r, Window15m).Calls); fmt.Sprint(got) != "[5ms 4ms]" {
		t.Errorf("15m window after 7m: %v, want [5ms 4ms]", got)
	}
	tick(r, clk, 16*60)
	if reps := r.SlowCalls(testKey.Model, ""); len(reps) != 0 {
		t.Errorf("an idle model's keeper outlived its series: %+v", reps)
	}
}

// However many calls, shapes and minutes pass, a keeper holds at most N
// calls per step and minute, and the shape sketch stays its size.
func TestSlowBoundedMemory(t *testing.T) {
	const n = 4
	r, clk := newTestRegistry(t, Options{SlowCalls: n})
	for sec := range 20 * 60 {
		for i := range 20 {
			r.Record(testKey, Sample{Total: time.Duration(sec*20+i) * time.Microsecond, Code: "OK",
				Features: CallFeatures{BytesIn: int64(i) << 20, ShapeKey: uint64(sec*20 + i + 1)}})
		}
		tick(r, clk, 1)
	}
	k := r.state.Load().slow[slowGroup{testKey.Model, testKey.Version}]
	k.mu.Lock()
	held := 0
	for _, st := range append(append([]*slowStep{k.cur, k.spare}, k.fine...), k.coarse...) {
		if st != nil {
			held++
			if len(st.calls) > n || cap(st.calls) > n {
				t.Errorf("a step holds %d calls (capacity %d), more than %d", len(st.calls), cap(st.calls), n)
			}
		}
	}
	k.mu.Unlock()
	if limit := slowStepsPerMinute + coarseSlots + 2; held > limit {
		t.Errorf("keeper holds %d steps, more than %d", held, limit)
	}
	if b := SlowKeeperBytes(DefaultSlowCalls); b > 64<<10 {
		t.Errorf("SlowKeeperBytes(%d) = %d, more than the 64 KiB the docs promise", DefaultSlowCalls, b)
	}
}

// How the slow calls differ: big requests were the slow ones.
func TestSlowDiffers(t *testing.T) {
	r, clk := newTestRegistry(t, Options{SlowCalls: 10})
	small, big := &inputsOf{in: image(1)}, &inputsOf{in: image(8)}
	for i := range 100 {
		sm := Sample{Total: time.Millisecond + time.Duration(i)*time.Microsecond, Code: "OK", BytesIn: 600 << 10,
			Features: CallFeatures{BytesIn: 600 << 10, Rows: 1, NumInputs: 1, ShapeKey: 1, Lazy: small}}
		if i%10 == 0 {
			sm.Total = 50*time.Millisecond + time.Duration(i)*time.Microsecond
			sm.BytesIn, sm.Features = 4800<<10, CallFeatures{BytesIn: 4800 << 10, Rows: 8, NumInputs: 1, ShapeKey: 8, Lazy: big}
		}
		r.Record(testKey, sm)
	}
	tick(r, clk, 1) // the baseline is counted at the slice's end
	d := slowOf(t, r, Window1m).Differs
	if d.Calls != 100 || d.SlowCalls != 10 {
		t.Fatalf("differs counts %d calls, %d slow; want 100, 10", d.Calls, d.SlowCalls)
	}
	if d.BytesRatio < 7 || d.BytesRatio > 9 {
		t.Errorf("bytes ratio %.2f, want about 8 (4800 KiB vs 600 KiB)", d.BytesRatio)
	}
	if d.Shape != "INPUT0:FP32[8,3,224,224]" || d.ShapeSlowShare != 1 || d.ShapeShare != 0.1 || d.ShapeShareAtMost {
		t.Errorf("shape %q: %.2f of slow calls, %.2f (at most: %v) of all; want the big shape, 1, 0.1",
			d.Shape, d.ShapeSlowShare, d.ShapeShare, d.ShapeShareAtMost)
	}
	if d.MedianRows != 1 || d.SlowMedianRows != 8 {
		t.Errorf("median rows %g slow vs %g all, want 8 vs 1", d.SlowMedianRows, d.MedianRows)
	}
	for _, want := range []string{"× the median request bytes (4.7 MiB vs", "100% had INPUT0:FP32[8,3,224,224] (10% of all calls)"} {
		if !strings.Contains(d.Summary, want) {
			t.Errorf("summary %q does not say %q", d.Summary, want)
		}
	}
}

// Calls record while readers read and the windows rotate (run with -race).
func TestSlowConcurrent(t *testing.T) {
	// The real clock: the test's fixed one is not safe for concurrent use.
	r, _ := newTestRegistry(t, Options{SlowCalls: 5, Now: time.Now})
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			src := &inputsOf{in: image(int64(g))}
			for i := range 2000 {
				key := testKey
				key.Version = fmt.Sprint(g % 2)
				// Each goroutine has its own source: CallInputs counts.
				r.Record(key, Sample{Total: time.Duration(i) * time.Microsecond, Code: "OK",
					Features: CallFeatures{Rows: int64(g), ShapeKey: uint64(g + 1), Lazy: src}})
			}
		}()
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 200 {
			r.SlowCalls(testKey.Model, "")
			r.Rotate()
		}
	}()
	wg.Wait()
	<-done
	reps := r.SlowCalls(testKey.Model, "", Window15m)
	if len(reps) != 2 {
		t.Fatalf("%d versions, want 2", len(reps))
	}
	for _, rep := range reps {
		if got := rep.Windows[0].Calls; len(got) != 5 || got[0].Total != 1999*time.Microsecond {
			t.Errorf("version %s: %v, want the 5 slowest from 1.999ms down", rep.Version, latencies(got))
		}
	}
}

// A call faster than the N-th slowest of its step costs no allocation,
// and neither does a slow call of a shape the keeper already formatted.
func TestSlowAllocBudget(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts differ under -race; `make test-allocs` runs this without it")
	}
	r, _ := newTestRegistry(t, Options{Shards: 1, SlowCalls: 3})
	src := &inputsOf{in: image(8)}
	slow := Sample{Total: time.Second, Code: "OK", Features: CallFeatures{Rows: 8, ShapeKey: 8, Lazy: src}}
	fast := Sample{Total: time.Millisecond, Code: "OK", Features: CallFeatures{Rows: 1, ShapeKey: 1, Lazy: src}}
	for range 3 {
		r.Record(testKey, slow) // fills the set, formats the shape once
	}
	if a := testing.AllocsPerRun(1000, func() { r.Record(testKey, fast) }); a != 0 {
		t.Errorf("a fast call allocates %.2f times, want 0", a)
	}
	slower := slow
	if a := testing.AllocsPerRun(100, func() { slower.Total += time.Millisecond; r.Record(testKey, slower) }); a != 0 {
		t.Errorf("a slow call of a known shape allocates %.2f times, want 0", a)
	}
}

// Slow calls of the usual size are said to carry about the median, not
// "0.9×" of it: all calls' median is read from a bucket.
func TestSlowDiffersSameSize(t *testing.T) {
	r, clk := newTestRegistry(t, Options{SlowCalls: 3})
	for i := range 20 {
		r.Record(testKey, Sample{Total: time.Duration(i) * time.Millisecond, Code: "OK", BytesIn: 288,
			Features: CallFeatures{BytesIn: 288, Rows: 4}})
	}
	tick(r, clk, 1)
	d := slowOf(t, r, Window1m).Differs
	if !strings.Contains(d.Summary, "about the median request bytes (288 B vs about") || strings.Contains(d.Summary, "rows") {
		t.Errorf("summary %q, want about the median bytes and nothing on rows", d.Summary)
	}
}

// TestStepHistMatchesLogHist: the sparse histogram of a step's baseline
// reads the median value's bucket, whether
// they fall in a few buckets (held inline) or in many (moved to a full
// logHist), and whether counted one by one or merged from shards and
// steps. A kept call and a baseline are as small as the docs say.
func TestStepHistMatchesLogHist(t *testing.T) {
	for _, spread := range []int64{1, 3, 6, 7, 20} {
		var fromShards logHist
		var one, merged, steps stepHist
		var n int64
		var buckets []int // every value's bucket: the reference median
		for i := range int64(200) {
			// spread buckets, one per power of two, the lower ones a
			// call more often
			v := int64(1000) << (spread - 1 - i%spread) // descending: the inline buckets must sort
			if i%5 == 0 {
				v = 1000
			}
			b := histBucket(v)
			buckets = append(buckets, b)
			one.add(b, 1)
			fromShards[b]++
			n++
			if i%50 == 49 { // a shard drains into the step
				merged.addLog(&fromShards)
				fromShards = logHist{}
			}
		}
		steps.addStep(&merged)
		slices.Sort(buckets)
		want := bucketMid(buckets[(n+1)/2-1])
		for _, h := range []*stepHist{&one, &merged, &steps} {
			if got := h.median(n); got != want {
				t.Errorf("spread %d: median %g, want the middle of the median value's bucket, %g", spread, got, want)
			}
			if inline := spread <= stepHistInline; inline != (h.full == nil) {
				t.Errorf("spread %d: full histogram %v, want it only past %d buckets", spread, h.full != nil, stepHistInline)
			}
		}
	}
	if slowCallBytes > 72 || callBaseBytes > 216 {
		t.Errorf("a kept call is %d bytes and a baseline %d: the docs say 72 and 216", slowCallBytes, callBaseBytes)
	}
}
