package correlate

import (
	"context"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/infergate/infergate/internal/grow"
	"github.com/infergate/infergate/monitor"
	"github.com/infergate/infergate/monitor/baseline"
	"github.com/infergate/infergate/monitor/gpu"
	"github.com/infergate/infergate/proto/methods"
)

// The rolling rings, in samples: 1m and 5m at the default 1s interval.
const (
	ShortSamples = 60
	LongSamples  = 300
)

// The correlation windows, indexes of ModelState.Correlation.
const (
	Window1m = iota
	Window5m
	NumWindows
)

// WindowNames names the correlation windows ("1m", "5m") for labels and
// JSON.
var WindowNames = [NumWindows]string{"1m", "5m"}

var windowSamples = [NumWindows]int{ShortSamples, LongSamples}

// Defaults of Options.
const (
	DefaultInterval     = time.Second
	DefaultRecentSlices = 5
)

// LatencySource gives recent per-group latency; *monitor.Registry is one.
type LatencySource interface {
	Recent(n int, group func(monitor.SeriesKey) string) (map[string]monitor.RecentStats, time.Time)
}

// Options configures a Correlator. Latency is required; zero values of the
// rest mean the documented defaults.
type Options struct {
	// Latency is where per-model recent latency comes from.
	Latency LatencySource
	// GPU returns the current GPU state; nil means no GPU data (every rise
	// gets HintUnknown).
	GPU func() gpu.State
	// Interval is the sampling period; 0 or less means 1s.
	Interval time.Duration
	// RecentSlices is how many monitor slices (seconds at the default
	// slice length) the sampled p99 covers; 0 or less means 5.
	RecentSlices int
	// Baselines is the shared store of latency baselines; the correlator
	// feeds it one sample per model and step. nil means a store of its
	// own with default options.
	Baselines *baseline.Store
	// Rise is how far above the baseline latency must be to be up; zero
	// fields mean baseline.DefaultRise's.
	Rise baseline.Rise
	// SLO returns a model's latency objective, an absolute anchor: a
	// model whose recent latency is over it is up whatever its baseline
	// says (no baseline yet, or a saturation that became the new normal).
	// nil means none.
	SLO func(model string) baseline.SLO
	// Methods are the gRPC method names (last path element) whose calls
	// are a model's inference latency; nil means ModelInfer,
	// ModelStreamInfer, Predict, Classify, Regress and MultiInference (the
	// inference methods of proto/methods).
	Methods []string
	// Now is the clock stamped on states; nil means time.Now.
	Now func() time.Time
	// Inputs is where the calls' request bytes and rows are counted; nil
	// means Latency when it is an InputSource (*monitor.Registry is), and
	// otherwise no input hints.
	Inputs InputSource
	// SlowEndpoint says which replica of a model's pool answers it much
	// slower than the others, if one does; nil means no pools.
	SlowEndpoint func(model string) (SlowEndpoint, bool)
}

// SlowEndpoint is one replica of a pool much slower than the others for
// a model: what one_endpoint_slow names.
type SlowEndpoint struct {
	Upstream string `json:"upstream"`
	Endpoint string `json:"endpoint"`
	// P99 is its recent p99 for the model, PoolP99 the other endpoints'
	// (their answers together), Ratio P99/PoolP99; Answers its answers
	// they are read from.
	P99     time.Duration `json:"-"`
	PoolP99 time.Duration `json:"-"`
	Ratio   float64       `json:"ratio"`
	Answers uint64        `json:"answers"`
	// Note says it in a line: "one endpoint slow: 10.0.3.7:8001 is
	// 4.1x the pool's p99 for resnet50 (...)".
	Note string `json:"note"`
}

// ModelState is one model's latency, GPU and hint at the last sample.
type ModelState struct {
	Model string
	At    time.Time
	// Calls, P50, P99 and QueueP99 cover the model's successful inference
	// calls of the last RecentSlices slices; all zero when it had none.
	Calls         uint64
	P50, P99      time.Duration
	QueueP99      time.Duration
	QueueSeen     bool
	LatencyWindow time.Duration
	// Baseline and BaselineP50 are the baseline levels of p99 and p50;
	// 0 until known. BaselineSource is baseline.Source*.
	Baseline, BaselineP50 time.Duration
	BaselineSource        string
	// LatencyUp is true when the recent calls are, with confidence, above
	// the baseline (baseline.Up) or over the model's SLO; Up says which
	// quantile and by how much. Too few calls leave it false.
	LatencyUp bool
	Up        baseline.Verdict
	// UpReason is "baseline", "slo" or "" (not up), and TooFewCalls is
	// true when the calls could not decide either.
	UpReason    string
	TooFewCalls bool
	// GPUUUID is the GPU the model runs on and GPUFrom where that came
	// from (gpu.FromConfig, ...); both "" when unknown.
	GPUUUID, GPUFrom string
	// GPU is the device's current reading; nil without one.
	GPU *gpu.Device
	// Correlation and QueueCorrelation are Pearson's r between the
	// model's p99 (queue p99) and its GPU's utilisation over the 1m and 5m
	// rings; NaN where it cannot be computed.
	Correlation      [NumWindows]float64
	QueueCorrelation [NumWindows]float64
	// UtilizationFlat is true when utilisation barely moved over the 1m
	// ring.
	UtilizationFlat bool
	// Inputs is what the recent calls carried (request bytes, rows)
	// against the model's usual inputs.
	Inputs InputState
	// SlowEndpoint is the replica of the model's pool much slower than
	// the others; nil when none is (or the upstream is no pool).
	SlowEndpoint *SlowEndpoint
	// Hint is the cause hint (Hint*).
	Hint string
}

// sample is one model's reading at one step.
type sample struct {
	p99, q99           float64 // seconds
	util               float64
	hasLat, hasQ, hasU bool
	up                 bool
}

// kept is a sample as the ring keeps it: 16 bytes, not 40 (a thousand
// models keep LongSamples each). float32 holds a latency in seconds and a
// utilisation to seven digits, more than a correlation needs.
type kept struct {
	p99, q99, util     float32
	hasLat, hasQ, hasU bool
}

func (k *kept) sample() sample {
	return sample{p99: float64(k.p99), q99: float64(k.q99), util: float64(k.util), hasLat: k.hasLat, hasQ: k.hasQ, hasU: k.hasU}
}

// track is one model's ring of samples.
type track struct {
	// ring holds the last samples, up to LongSamples; ring[pos] is the
	// oldest once full. Only samples with a utilisation count (the
	// correlations pair latency with it), so the ring starts with the
	// first of them and is given up once it holds none: a model
	// without a GPU keeps no ring at all.
	ring []kept
	pos  int
	// withU counts the ring's samples with a utilisation.
	withU int
	idle  int // consecutive steps without calls
	// inputs is the model's input distribution, recent and learned.
	inputs inputTrack
}

func (t *track) push(s sample) {
	if !s.hasU && t.withU == 0 {
		t.ring, t.pos = nil, 0
		return
	}
	k := kept{p99: float32(s.p99), q99: float32(s.q99), util: float32(s.util), hasLat: s.hasLat, hasQ: s.hasQ, hasU: s.hasU}
	if s.hasU {
		t.withU++
	}
	if len(t.ring) < LongSamples {
		t.ring = append(grow.Capped(t.ring, 8, LongSamples), k)
		return
	}
	if t.ring[t.pos].hasU {
		t.withU--
	}
	t.ring[t.pos] = k
	t.pos = (t.pos + 1) % LongSamples
}

// last calls f on the newest n samples, oldest first.
func (t *track) last(n int, f func(s sample)) {
	n = min(n, len(t.ring))
	start := len(t.ring) - n
	if len(t.ring) == LongSamples {
		start = (t.pos + LongSamples - n) % LongSamples
	}
	for i := range n {
		f(t.ring[(start+i)%len(t.ring)].sample())
	}
}

// Correlator samples per-model latency beside GPU state and derives the
// cause hints. Step and Run must not run concurrently with each other;
// Models, Model and the metrics are safe for concurrent use and read the
// last published state.
type Correlator struct {
	opts    Options
	methods map[string]bool
	mu      sync.Mutex
	tracks  map[string]*track
	states  atomic.Pointer[[]ModelState]
	// lastInputs is each series' input counts at the last step it was
	// read (step inputStep), which the next step's counts are
	// differences from; primed once read. Kept from step to step, not
	// made anew: 1,000 models made 450 KiB of it every second.
	lastInputs map[monitor.SeriesKey]*lastInputs
	inputStep  uint64
	primed     bool
}

// lastInputs is one series' input counts as of step.
type lastInputs struct {
	counts monitor.InputCounts
	step   uint64
}

// New returns a correlator; call Run (or Step) to sample.
func New(opts Options) *Correlator {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Interval <= 0 {
		opts.Interval = DefaultInterval
	}
	if opts.RecentSlices <= 0 {
		opts.RecentSlices = DefaultRecentSlices
	}
	if opts.Baselines == nil {
		opts.Baselines = baseline.New(baseline.Options{Now: opts.Now})
	}
	if opts.Methods == nil {
		opts.Methods = methods.InferenceNames()
	}
	if opts.Inputs == nil {
		opts.Inputs, _ = opts.Latency.(InputSource)
	}
	c := &Correlator{opts: opts, methods: map[string]bool{}, tracks: map[string]*track{}}
	for _, m := range opts.Methods {
		c.methods[m] = true
	}
	c.states.Store(&[]ModelState{})
	return c
}

// Run samples every interval until ctx ends.
func (c *Correlator) Run(ctx context.Context) {
	t := time.NewTicker(c.opts.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			c.Step()
		}
	}
}

// Baselines is the baseline store the correlator decides and learns
// with (its recurring patterns are shown on /api/v1/models).
func (c *Correlator) Baselines() *baseline.Store { return c.opts.Baselines }

// RecentSlices is how many monitor slices a model's latency covers.
func (c *Correlator) RecentSlices() int { return c.opts.RecentSlices }

// InferenceModel returns the model a series' calls are inference latency
// of, or "" for calls the correlator does not read (failures, metadata,
// fallback answers, the overflow series): other readers of a model's
// latency (the version comparison) group the same calls.
func (c *Correlator) InferenceModel(k monitor.SeriesKey) string { return c.group(k) }

// group keys a series by model for its successful inference calls only:
// metadata calls are fast and failures are another story.
func (c *Correlator) group(k monitor.SeriesKey) string {
	if k.Model == "" || k.CodeClass != monitor.CodeClassOK || k == monitor.OverflowKey || k.Degraded() {
		return ""
	}
	m := k.Method
	if i := strings.LastIndexByte(m, '/'); i >= 0 {
		m = m[i+1:]
	}
	if !c.methods[m] {
		return ""
	}
	return k.Model
}

// Step takes one sample of every model and publishes the new states.
func (c *Correlator) Step() {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.opts.Now()
	recent, _ := c.opts.Latency.Recent(c.opts.RecentSlices, c.group)
	var gs gpu.State
	if c.opts.GPU != nil {
		gs = c.opts.GPU()
	}
	deltas := c.inputDeltas()
	for m := range recent {
		if c.tracks[m] == nil {
			c.tracks[m] = &track{}
		}
	}
	states := make([]ModelState, 0, len(c.tracks))
	for name, t := range c.tracks {
		rs, ok := recent[name]
		if ok {
			t.idle = 0
		} else if t.idle++; t.idle >= LongSamples {
			delete(c.tracks, name)
			continue
		}
		// A model whose only samples are from open streams has no
		// latency to correlate yet.
		hasCalls := ok && rs.Stats[monitor.ComponentTotal].Count > 0
		states = append(states, c.stepModel(name, t, rs, hasCalls, gs, now, deltas[name]))
	}
	slices.SortFunc(states, func(a, b ModelState) int { return strings.Compare(a.Model, b.Model) })
	c.states.Store(&states)
}

func (c *Correlator) stepModel(name string, t *track, rs monitor.RecentStats, hasCalls bool, gs gpu.State, now time.Time,
	inputs *inputCounts) ModelState {
	tot, q := rs.Stats[monitor.ComponentTotal], rs.Stats[monitor.ComponentQueue]
	ms := ModelState{
		Model: name, At: now, Calls: tot.Count, P50: tot.P50, P99: tot.P99,
		QueueP99: q.P99, QueueSeen: rs.QueueSeen, Hint: HintNone,
		LatencyWindow: time.Duration(c.opts.RecentSlices) * time.Second,
	}
	s := sample{hasLat: hasCalls, p99: tot.P99.Seconds(), q99: q.P99.Seconds(), hasQ: hasCalls && rs.QueueSeen}
	ms.GPUUUID, ms.GPUFrom = gs.ModelGPU(name)
	if ms.GPUUUID != "" {
		if d, ok := gs.Device(ms.GPUUUID); ok {
			ms.GPU = &d
			s.util, s.hasU = d.Utilization, d.Has(gpu.FieldUtilization)
		}
	}
	b := c.opts.Baselines.Get(name)
	ms.Baseline = b.Level(baseline.P99)
	ms.BaselineP50 = b.Level(baseline.P50)
	ms.BaselineSource = b.Source
	if hasCalls {
		v := baseline.Up(b, rs, c.opts.Rise)
		var slo baseline.SLO
		if c.opts.SLO != nil {
			slo = c.opts.SLO(name)
		}
		sv := baseline.OverSLO(slo, rs)
		switch {
		case sv.Up:
			ms.Up, ms.UpReason = sv, "slo"
		case v.Up:
			ms.Up, ms.UpReason = v, "baseline"
		default:
			ms.Up = v
			ms.TooFewCalls = !v.Decided && !sv.Decided
		}
		s.up = ms.UpReason != ""
		// Learn only from windows that can speak for the model's
		// latency: a few calls' p99 is their slowest one.
		if tot.Count >= minLearnCalls {
			c.opts.Baselines.Observe(name, baseline.SampleOf(rs), s.up)
		}
	}
	ms.LatencyUp = s.up
	t.push(s)
	if inputs == nil {
		inputs = &inputCounts{}
	}
	t.inputs.push(inputs, c.opts.RecentSlices)
	ms.Inputs = t.inputs.state()
	// As the latency baseline: an incident's inputs are not learned.
	if !s.up {
		t.inputs.learn(inputs)
	}

	for w, n := range windowSamples {
		var lat, qs, u, uq []float64
		t.last(n, func(s sample) {
			if !s.hasU {
				return
			}
			if s.hasLat {
				lat, u = append(lat, s.p99), append(u, s.util)
			}
			if s.hasQ {
				qs, uq = append(qs, s.q99), append(uq, s.util)
			}
		})
		ms.Correlation[w] = pearson(lat, u)
		ms.QueueCorrelation[w] = pearson(qs, uq)
	}
	var utils []float64
	t.last(ShortSamples, func(s sample) {
		if s.hasU {
			utils = append(utils, s.util)
		}
	})
	ms.UtilizationFlat = len(utils) >= 3 && stddev(utils) < FlatUtilization

	if c.opts.SlowEndpoint != nil {
		if se, ok := c.opts.SlowEndpoint(ms.Model); ok {
			ms.SlowEndpoint = &se
		}
	}
	sig := Signal{
		LatencyUp: s.up, HasGPU: s.hasU, Utilization: s.util, UtilizationFlat: ms.UtilizationFlat,
		Correlation: ms.Correlation[Window1m], Inputs: ms.Inputs.Moved(), SlowEndpoint: ms.SlowEndpoint != nil,
	}
	if ms.GPU != nil {
		sig.Throttled = ms.GPU.Throttled()
		sig.MemoryRatio, sig.HasMemory = ms.GPU.MemoryRatio()
	}
	ms.Hint = Hint(sig)
	return ms
}

// Models returns every tracked model's state at the last step, sorted by
// model.
func (c *Correlator) Models() []ModelState { return *c.states.Load() }

// Model returns one model's state at the last step.
func (c *Correlator) Model(name string) (ModelState, bool) {
	states := *c.states.Load()
	i, ok := slices.BinarySearchFunc(states, name, func(s ModelState, n string) int { return strings.Compare(s.Model, n) })
	if !ok {
		return ModelState{}, false
	}
	return states[i], true
}

// minLearnCalls is the least number of calls a window needs for the
// baseline to learn from it.
const minLearnCalls = 5

// nan is NaN, for unknown values in metrics.
var nan = math.NaN()
