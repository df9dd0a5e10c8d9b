package correlate

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/infergate/infergate/monitor"
	"github.com/infergate/infergate/monitor/gpu"
)

// fakeInputs counts calls the test makes into one inference series per
// model, as a registry's shards would.
type fakeInputs struct {
	counts map[string]*monitor.InputCounts
}

func (f *fakeInputs) InputCounts(group func(monitor.SeriesKey) string, fn func(monitor.SeriesKey, string, *monitor.InputCounts)) {
	for m, c := range f.counts {
		k := monitor.SeriesKey{Model: m, Method: "/inference.GRPCInferenceService/ModelInfer", CodeClass: monitor.CodeClassOK}
		if g := group(k); g != "" {
			fn(k, g, c)
		}
	}
}

// call counts one call of model m.
func (f *fakeInputs) call(m string, bytes, rows int64) {
	c := f.counts[m]
	if c == nil {
		c = &monitor.InputCounts{}
		f.counts[m] = c
	}
	c.Bytes[monitor.InputBucket(bytes, monitor.InputByteBuckets)]++
	c.Rows[monitor.InputBucket(rows, monitor.InputRowBuckets)]++
}

// inputRig is a correlator over a fake latency, GPU and inputs: each step
// takes calls calls of rows rows (bytes per row perRow) at latency p99
// with the GPU at util.
type inputRig struct {
	t   *testing.T
	lat *fakeLatency
	in  *fakeInputs
	g   *fakeGPU
	c   *Correlator
	rnd *rand.Rand
}

func newInputRig(t *testing.T) *inputRig {
	r := &inputRig{
		t:   t,
		lat: &fakeLatency{t: t, p99: map[string]time.Duration{}},
		in:  &fakeInputs{counts: map[string]*monitor.InputCounts{}},
		g: &fakeGPU{dev: gpu.Device{UUID: "GPU-1", Utilization: 0.4, MemoryUsedBytes: 10, MemoryTotalBytes: 80,
			Known: gpu.FieldUtilization | gpu.FieldMemoryUsed | gpu.FieldMemoryTotal}},
		rnd: rand.New(rand.NewPCG(1, 2)),
	}
	r.c = New(Options{Latency: r.lat, GPU: r.g.state, Inputs: r.in, Baselines: learnAtOnce()})
	return r
}

// step runs n steps; rows returns each call's rows.
func (r *inputRig) step(n, calls int, rows func() int64, perRow int64, p99 time.Duration, util float64) ModelState {
	r.t.Helper()
	for i := range n {
		for range calls {
			k := rows()
			r.in.call("m", 200+k*perRow, k)
		}
		d := p99
		if i%2 == 1 {
			d += d / 20 // a little jitter, as real windows have
		}
		r.lat.p99["m"] = d
		r.g.dev.Utilization = util - float64(i%2)*0.01
		r.c.Step()
	}
	s, ok := r.c.Model("m")
	if !ok {
		r.t.Fatal("model m not tracked")
	}
	return s
}

func fixed(k int64) func() int64 { return func() int64 { return k } }

const imageBytes = 3 * 224 * 224 * 4 // one FP32 224x224 RGB image

// TestInputsGrew: 4× the rows (and bytes) per call with latency up reads
// inputs_grew, also while the GPU is saturated (bigger inputs are why),
// and the evidence says how far the p90s moved.
func TestInputsGrew(t *testing.T) {
	r := newInputRig(t)
	s := r.step(90, 20, fixed(2), imageBytes, 10*time.Millisecond, 0.4)
	if !s.Inputs.Known || s.Inputs.Bytes.Grew || s.Hint != HintNone {
		t.Fatalf("calm: %+v", s.Inputs)
	}
	s = r.step(6, 20, fixed(8), imageBytes, 40*time.Millisecond, 0.98)
	if !s.LatencyUp || s.Hint != HintInputsGrew {
		t.Fatalf("4x rows with latency up: hint %s, inputs %+v", s.Hint, s.Inputs)
	}
	if !s.Inputs.Bytes.Grew || !s.Inputs.Rows.Grew || s.Inputs.Bytes.P90 < 3*s.Inputs.Bytes.BaselineP90 {
		t.Errorf("bytes p90 %d vs baseline %d, rows p90 %d vs %d: want both grown",
			s.Inputs.Bytes.P90, s.Inputs.Bytes.BaselineP90, s.Inputs.Rows.P90, s.Inputs.Rows.BaselineP90)
	}
	// Powers of two: a ×4 growth proves "at least ×2", not "×4".
	if above, ok := s.Inputs.Bytes.Above(2); !ok || !above {
		t.Errorf("bytes p90 above 2x the baseline: %v (decided %v)", above, ok)
	}
	if above, ok := s.Inputs.Bytes.Above(4); !ok || above {
		t.Errorf("bytes p90 above 4x the baseline: %v (decided %v), want a decided no", above, ok)
	}
	// The incident's inputs were not learned.
	if s.Inputs.Bytes.BaselineP90 >= 4*imageBytes {
		t.Errorf("baseline learned the incident: %d", s.Inputs.Bytes.BaselineP90)
	}
}

// TestSaturatedSteadyInputs: a saturated GPU with the usual inputs is
// still gpu_saturated.
func TestSaturatedSteadyInputs(t *testing.T) {
	r := newInputRig(t)
	r.step(90, 20, fixed(4), imageBytes, 10*time.Millisecond, 0.4)
	s := r.step(6, 20, fixed(4), imageBytes, 40*time.Millisecond, 0.98)
	if !s.LatencyUp || s.Hint != HintGPUSaturated || s.Inputs.Moved() != "" {
		t.Fatalf("hint %s, inputs %+v, want gpu_saturated with the inputs unmoved", s.Hint, s.Inputs)
	}
}

// TestMixedSteadyInputs: calls of 1 to 32 rows at random, for many
// steps, never read as grown or reshaped, whether latency is up or not.
func TestMixedSteadyInputs(t *testing.T) {
	r := newInputRig(t)
	mixed := func() int64 { return 1 << r.rnd.IntN(6) }
	r.step(90, 20, mixed, 1000, 10*time.Millisecond, 0.4)
	for i := range 600 {
		p99 := 10 * time.Millisecond
		if i%100 >= 90 {
			p99 = 40 * time.Millisecond // a slow server now and then
		}
		s := r.step(1, 20, mixed, 1000, p99, 0.4)
		if s.Inputs.Moved() != "" || s.Hint == HintInputsGrew || s.Hint == HintInputShapeChanged {
			t.Fatalf("step %d: hint %s, inputs %+v", i, s.Hint, s.Inputs)
		}
	}
}

// TestInputsTooFewCalls: a few big calls, or a big call among many, make
// no claim.
func TestInputsTooFewCalls(t *testing.T) {
	r := newInputRig(t)
	r.step(90, 20, fixed(1), imageBytes, 10*time.Millisecond, 0.4)
	s := r.step(5, 3, fixed(16), imageBytes, 40*time.Millisecond, 0.4)
	if s.Inputs.Decided || s.Inputs.Moved() != "" || s.Hint == HintInputsGrew {
		t.Fatalf("15 calls decided: hint %s, inputs %+v", s.Hint, s.Inputs)
	}
	if _, ok := s.Inputs.Bytes.Above(2); ok {
		t.Error("Above decided on 15 calls")
	}
	// One call in ten 16 times bigger: the p90 itself did not move.
	k := 0
	oneInTen := func() int64 {
		k++
		if k%10 == 0 {
			return 16
		}
		return 1
	}
	s = r.step(5, 20, oneInTen, imageBytes, 40*time.Millisecond, 0.4)
	if s.Inputs.Moved() != "" || s.Hint == HintInputsGrew {
		t.Fatalf("one big call in ten: hint %s, inputs %+v", s.Hint, s.Inputs)
	}
	// Too early: no baseline of the inputs yet.
	r2 := newInputRig(t)
	r2.step(10, 20, fixed(1), imageBytes, 10*time.Millisecond, 0.4)
	if s := r2.step(1, 20, fixed(16), imageBytes, 10*time.Millisecond, 0.4); s.Inputs.Known || s.Inputs.Moved() != "" {
		t.Fatalf("judged after 11 steps: %+v", s.Inputs)
	}
}

// TestInputShapeChanged: the same bytes in an eighth of the rows (each
// row 8× larger) reads input_shape_changed.
func TestInputShapeChanged(t *testing.T) {
	r := newInputRig(t)
	r.step(90, 20, fixed(8), imageBytes, 10*time.Millisecond, 0.4)
	s := r.step(6, 20, fixed(1), 8*imageBytes, 40*time.Millisecond, 0.4)
	if !s.LatencyUp || s.Hint != HintInputShapeChanged {
		t.Fatalf("hint %s, inputs %+v", s.Hint, s.Inputs)
	}
}

// TestInputSeriesRecreated: a series dropped and created again (counts
// restart from zero) counts its new calls, not a negative difference.
func TestInputSeriesRecreated(t *testing.T) {
	r := newInputRig(t)
	r.step(90, 20, fixed(2), imageBytes, 10*time.Millisecond, 0.4)
	r.in.counts["m"] = &monitor.InputCounts{}
	s := r.step(6, 20, fixed(8), imageBytes, 40*time.Millisecond, 0.98)
	if s.Hint != HintInputsGrew || s.Inputs.Bytes.Calls != 5*20 {
		t.Fatalf("after the series came back: hint %s, %d recent calls, inputs %+v", s.Hint, s.Inputs.Bytes.Calls, s.Inputs)
	}
}
