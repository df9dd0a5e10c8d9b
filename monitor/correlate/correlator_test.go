package correlate

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"

	"github.com/infergate/infergate/monitor"
	"github.com/infergate/infergate/monitor/baseline"
	"github.com/infergate/infergate/monitor/gpu"
)

// fakeLatency serves a fixed per-model p99, and checks that the group
// function keeps only successful inference calls.
type fakeLatency struct {
	t   *testing.T
	p99 map[string]time.Duration
	q99 map[string]time.Duration
}

func (f *fakeLatency) Recent(n int, group func(monitor.SeriesKey) string) (map[string]monitor.RecentStats, time.Time) {
	for key, want := range map[monitor.SeriesKey]string{
		{Model: "m", Method: "/inference.GRPCInferenceService/ModelInfer", CodeClass: "ok"}:           "m",
		{Model: "m", Method: "/tensorflow.serving.PredictionService/Predict", CodeClass: "ok"}:        "m",
		{Model: "m", Method: "/inference.GRPCInferenceService/ModelReady", CodeClass: "ok"}:           "",
		{Model: "m", Method: "/inference.GRPCInferenceService/ModelInfer", CodeClass: "server_error"}: "",
		monitor.OverflowKey: "",
	} {
		if got := group(key); got != want {
			f.t.Errorf("group(%+v) = %q, want %q", key, got, want)
		}
	}
	out := map[string]monitor.RecentStats{}
	for m, d := range f.p99 {
		var rs monitor.RecentStats
		rs.Stats[monitor.ComponentTotal] = monitor.Stats{Count: 100, P50: d / 2, P90: d / 2, P99: d, Max: d}
		// Every call at its quantile: the bounds are the values.
		rs.Bounds[monitor.ComponentTotal] = monitor.Bounds{
			Lower: [4]time.Duration{d / 2, d / 2, d, d}, OK: [4]bool{true, true, true, true},
		}
		if q, ok := f.q99[m]; ok {
			rs.QueueSeen = true
			rs.Stats[monitor.ComponentQueue] = monitor.Stats{Count: 100, P99: q, Max: q}
		}
		out[m] = rs
	}
	return out, time.Time{}
}

// fakeGPU is one device whose state the test sets between steps.
type fakeGPU struct{ dev gpu.Device }

func (f *fakeGPU) state() gpu.State { return stateOf(f.dev) }

func TestCorrelatorScenarios(t *testing.T) {
	const uuid = "GPU-1"
	idle := gpu.Device{UUID: uuid, Utilization: 0.2, MemoryUsedBytes: 10, MemoryTotalBytes: 80,
		SMClockHz: 1.98e9, SMClockMaxHz: 1.98e9,
		Known: gpu.FieldUtilization | gpu.FieldMemoryUsed | gpu.FieldMemoryTotal | gpu.FieldSMClock | gpu.FieldSMClockMax | gpu.FieldClockEventReasons}
	lat := &fakeLatency{t: t, p99: map[string]time.Duration{"m": 10 * time.Millisecond}}
	g := &fakeGPU{dev: idle}
	c := New(Options{Latency: lat, GPU: g.state, Baselines: learnAtOnce()})

	step := func(n int, p99 time.Duration, dev gpu.Device, jitter bool) ModelState {
		for i := range n {
			d := p99
			u := dev
			if jitter && i%2 == 1 {
				d += d / 20
				u.Utilization = math.Max(0, u.Utilization-0.01)
			}
			lat.p99["m"] = d
			g.dev = u
			c.Step()
		}
		s, ok := c.Model("m")
		if !ok {
			t.Fatal("model m not tracked")
		}
		return s
	}

	// Learning: no baseline yet, nothing is up.
	if s := step(5, 10*time.Millisecond, idle, true); s.Baseline != 0 || s.Hint != HintNone {
		t.Fatalf("learning: %+v", s)
	}
	s := step(30, 10*time.Millisecond, idle, true)
	if s.Baseline < 9900*time.Microsecond || s.Baseline > 11*time.Millisecond || s.LatencyUp || s.Hint != HintNone {
		t.Fatalf("calm: %+v", s)
	}
	if s.GPUUUID != uuid || s.GPUFrom != gpu.FromOnlyDevice || s.GPU == nil {
		t.Fatalf("GPU mapping: %+v", s)
	}

	// Network-side delay: latency triples, the GPU stays idle and flat.
	s = step(10, 30*time.Millisecond, idle, true)
	if !s.LatencyUp || s.Hint != HintNotGPU {
		t.Fatalf("delay: %+v", s)
	}
	step(40, 10*time.Millisecond, idle, true) // heal; the up samples age out of the 1m ring

	// Saturation: utilisation and latency climb together.
	sat := idle
	sat.Utilization = 0.98
	s = step(10, 40*time.Millisecond, sat, true)
	if !s.LatencyUp || s.Hint != HintGPUSaturated || !(s.Correlation[Window1m] >= MovesWith) {
		t.Fatalf("saturation: %+v", s)
	}
	if s.Baseline > 11*time.Millisecond {
		t.Errorf("a rise must not drag its own baseline: %v", s.Baseline)
	}
	step(70, 10*time.Millisecond, idle, true)

	// Thermal throttling at moderate load.
	hot := idle
	hot.Utilization = 0.4
	hot.SMClockHz = 0.99e9
	hot.ClockEventReasons = uint64(gpu.ReasonSWThermalSlowdown)
	if s = step(10, 20*time.Millisecond, hot, true); s.Hint != HintGPUThrottled {
		t.Fatalf("throttle: %+v", s)
	}
	step(70, 10*time.Millisecond, idle, true)

	// Memory pressure.
	full := idle
	full.Utilization = 0.6
	full.MemoryUsedBytes = 79
	if s = step(5, 20*time.Millisecond, full, true); s.Hint != HintGPUMemoryPressure {
		t.Fatalf("memory: %+v", s)
	}
}

func TestCorrelatorNoGPU(t *testing.T) {
	lat := &fakeLatency{t: t, p99: map[string]time.Duration{"m": 10 * time.Millisecond}, q99: map[string]time.Duration{"m": time.Millisecond}}
	c := New(Options{Latency: lat, Baselines: learnAtOnce()})
	for range 20 {
		c.Step()
	}
	lat.p99["m"] = 50 * time.Millisecond
	c.Step()
	s, _ := c.Model("m")
	if !s.LatencyUp || s.Hint != HintUnknown || s.GPU != nil || !math.IsNaN(s.Correlation[Window1m]) {
		t.Fatalf("no GPU: %+v", s)
	}

	reg := prometheus.NewPedanticRegistry()
	if err := c.Register(reg); err != nil {
		t.Fatal(err)
	}
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, f := range fams {
		expfmt.MetricFamilyToText(&b, f)
	}
	text := b.String()
	for _, line := range []string{
		`infergate_model_cause_hint{hint="unknown",model="m"} 1`,
		`infergate_model_latency_baseline_seconds{model="m",stat="p99"} 0.01`,
		`infergate_model_latency_baseline_seconds{model="m",stat="p50"} 0.005`,
	} {
		if !strings.Contains(text, line+"\n") {
			t.Errorf("missing %s in\n%s", line, text)
		}
	}
	// One hint series per model, and no correlation without a GPU: a
	// line per hint (all but one 0) and a NaN per window cost a scrape
	// ten lines a model for nothing.
	for _, absent := range []string{`hint="none"`, `infergate_model_gpu_correlation{`, `infergate_model_gpu_queue_correlation{`} {
		if strings.Contains(text, absent) {
			t.Errorf("%s exported:\n%s", absent, text)
		}
	}
}

// TestCorrelatorMedianRise: one slow call inflated the baseline p99 (with
// few calls per window p99 is the maximum); a rise that moves every call
// still counts, through the median.
func TestCorrelatorMedianRise(t *testing.T) {
	lat := &fakeStats{p50: 10 * time.Millisecond, p99: 40 * time.Millisecond}
	c := New(Options{Latency: lat, Baselines: learnAtOnce()})
	for range 20 {
		c.Step()
	}
	lat.p50, lat.p99 = 20*time.Millisecond, 45*time.Millisecond
	c.Step()
	if s, _ := c.Model("m"); !s.LatencyUp || s.BaselineP50 != 10*time.Millisecond || s.Baseline != 40*time.Millisecond {
		t.Fatalf("median rise: %+v", s)
	}
}

// fakeStats serves model m with a given p50 and p99.
type fakeStats struct{ p50, p99 time.Duration }

func (f *fakeStats) Recent(int, func(monitor.SeriesKey) string) (map[string]monitor.RecentStats, time.Time) {
	var rs monitor.RecentStats
	rs.Stats[monitor.ComponentTotal] = monitor.Stats{Count: 50, P50: f.p50, P90: f.p50, P99: f.p99, Max: f.p99}
	// 50 calls bound the p50 and p90, not the p99.
	rs.Bounds[monitor.ComponentTotal] = monitor.Bounds{
		Lower: [4]time.Duration{f.p50, f.p50}, OK: [4]bool{true, true},
	}
	return map[string]monitor.RecentStats{"m": rs}, time.Time{}
}

// TestCorrelatorForgetsIdleModels: a model without calls for the whole
// long ring is dropped.
func TestCorrelatorForgetsIdleModels(t *testing.T) {
	lat := &fakeLatency{t: t, p99: map[string]time.Duration{"m": time.Millisecond}}
	c := New(Options{Latency: lat, Baselines: learnAtOnce()})
	c.Step()
	delete(lat.p99, "m")
	for range LongSamples - 1 {
		c.Step()
	}
	if s, ok := c.Model("m"); !ok || s.Calls != 0 || s.Hint != HintNone {
		t.Fatalf("idle model: %+v %v", s, ok)
	}
	c.Step()
	if _, ok := c.Model("m"); ok {
		t.Error("model still tracked after a long ring without calls")
	}
}

// TestCorrelatorSLOAnchor: right after start there is no baseline, yet a
// model over its SLO is up (the saturation a user sees at start), and it
// stays up however long it lasts.
func TestCorrelatorSLOAnchor(t *testing.T) {
	lat := &fakeStats{p50: 40 * time.Millisecond, p99: 80 * time.Millisecond}
	c := New(Options{Latency: lat, Baselines: learnAtOnce(), SLO: func(m string) baseline.SLO {
		return baseline.SLO{baseline.P50: 20 * time.Millisecond}
	}})
	c.Step()
	s, _ := c.Model("m")
	if !s.LatencyUp || s.UpReason != "slo" || s.BaselineSource != baseline.SourceNone {
		t.Fatalf("over SLO at start: %+v", s)
	}
	for range 600 {
		c.Step()
	}
	if s, _ := c.Model("m"); !s.LatencyUp || s.UpReason != "slo" {
		t.Fatalf("over SLO after 10 minutes: %+v", s)
	}
}

// streamOnly serves a model whose streams are all still open: stream
// samples, no finished call.
type streamOnly struct{}

func (streamOnly) Recent(int, func(monitor.SeriesKey) string) (map[string]monitor.RecentStats, time.Time) {
	rs := monitor.RecentStats{Stream: &monitor.RecentStream{}}
	rs.Stream.Stats[monitor.StreamFirstResponse] = monitor.Stats{Count: 50, P50: time.Second, P99: time.Second, Max: time.Second}
	return map[string]monitor.RecentStats{"llm": rs}, time.Time{}
}

// TestStreamOnlyModelHasNoLatency: stream samples are not calls, so the
// correlator neither learns a baseline from them nor reads a zero latency.
func TestStreamOnlyModelHasNoLatency(t *testing.T) {
	bs := baseline.New(baseline.Options{})
	c := New(Options{Latency: streamOnly{}, Baselines: bs})
	for range 120 {
		c.Step()
	}
	s, ok := c.Model("llm")
	if !ok || s.Calls != 0 || s.LatencyUp || s.TooFewCalls || s.P99 != 0 {
		t.Errorf("state %+v, %v", s, ok)
	}
	if bs.Get("llm").Known() {
		t.Error("a baseline learned from a model without calls")
	}
}

// learnAtOnce is a baseline store that learns from samples however close
// together: these tests step the correlator many times a millisecond,
// while the store's learning time (baseline.Options.MinLearn, tested
// there) is real time.
func learnAtOnce() *baseline.Store { return baseline.New(baseline.Options{MinLearn: -1}) }

// TestTrackKeepsSamplesOnlyWithAGPU: a model without a GPU reading keeps
// no ring of samples (a thousand models each kept 300 of them for
// correlations that need a utilisation); with readings the ring keeps
// the last LongSamples, and once none of them has a reading it is given
// up again.
func TestTrackKeepsSamplesOnlyWithAGPU(t *testing.T) {
	var tr track
	for range 2 * LongSamples {
		tr.push(sample{hasLat: true, p99: 0.01})
	}
	if tr.ring != nil {
		t.Fatalf("a model without a GPU keeps %d samples", len(tr.ring))
	}
	tr.push(sample{hasLat: true, p99: 0.02, util: 0.5, hasU: true})
	for range LongSamples - 1 {
		tr.push(sample{hasLat: true, p99: 0.01})
	}
	var withU int
	tr.last(LongSamples, func(s sample) {
		if s.hasU {
			withU++
			if s.util != 0.5 || s.p99 != float64(float32(0.02)) {
				t.Errorf("kept %+v, want p99 0.02 and utilisation 0.5", s)
			}
		}
	})
	if len(tr.ring) != LongSamples || withU != 1 {
		t.Fatalf("ring of %d samples, %d with a utilisation; want %d and 1", len(tr.ring), withU, LongSamples)
	}
	if cap(tr.ring) != LongSamples {
		t.Errorf("ring capacity %d, want %d (grown up to its size, not past it)", cap(tr.ring), LongSamples)
	}
	tr.push(sample{hasLat: true, p99: 0.01}) // the one reading leaves
	tr.push(sample{hasLat: true, p99: 0.01})
	if tr.ring != nil {
		t.Fatalf("%d samples kept with no utilisation among them", len(tr.ring))
	}
}
