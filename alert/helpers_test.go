package alert

import (
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/infergate/infergate/alert/notify"
	"github.com/infergate/infergate/monitor"
	"github.com/infergate/infergate/monitor/baseline"
	"github.com/infergate/infergate/monitor/correlate"
	"github.com/infergate/infergate/monitor/gpu"
)

// clock is a fake clock the tests advance by hand.
type clock struct{ t time.Time }

func (c *clock) now() time.Time      { return c.t }
func (c *clock) add(d time.Duration) { c.t = c.t.Add(d) }
func newClock() *clock               { return &clock{time.Date(2026, 11, 3, 14, 0, 0, 0, time.UTC)} } // a Tuesday
func ms(n float64) time.Duration     { return time.Duration(n * float64(time.Millisecond)) }
func durs(ds ...time.Duration) [4]time.Duration {
	var out [4]time.Duration
	copy(out[:], ds)
	return out
}

// fakeSource serves fixed per-model windows.
type fakeSource struct {
	mu    sync.Mutex
	stats map[string]monitor.RecentStats
}

func (f *fakeSource) set(model string, rs monitor.RecentStats) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stats == nil {
		f.stats = map[string]monitor.RecentStats{}
	}
	f.stats[model] = rs
}

func (f *fakeSource) drop(model string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.stats, model)
}

func (f *fakeSource) Recent(n int, group func(monitor.SeriesKey) string) (map[string]monitor.RecentStats, time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]monitor.RecentStats{}
	for m, rs := range f.stats {
		k := monitor.SeriesKey{Model: m, Version: "1", Method: "/inference.GRPCInferenceService/ModelInfer", Upstream: "u", CodeClass: monitor.CodeClassOK}
		if g := group(k); g != "" {
			out[g] = rs
		}
	}
	return out, time.Time{}
}

// calls builds a window of n calls where every quantile's lower bound is
// its value (plenty of evidence), or, with few, no bound at all.
func calls(n uint64, p50, p99 time.Duration, failed map[string]uint64) monitor.RecentStats {
	var rs monitor.RecentStats
	rs.Stats[monitor.ComponentTotal] = monitor.Stats{Count: n, P50: p50, P90: p50, P99: p99, P999: p99, Max: p99}
	b := &rs.Bounds[monitor.ComponentTotal]
	for i, v := range []time.Duration{p50, p50, p99, p99} {
		if _, ok := monitor.LowerBoundRank(n, monitor.Quantiles[i]); ok {
			b.OK[i], b.Lower[i] = true, v
		}
	}
	rs.Failed = failed
	return rs
}

// sink records notifications.
type sink struct {
	mu   sync.Mutex
	msgs []*notify.Message
	to   []string
}

func (s *sink) send(receiver string, m *notify.Message) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.msgs = append(s.msgs, m)
	s.to = append(s.to, receiver)
}

func (s *sink) take() ([]*notify.Message, []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, t := s.msgs, s.to
	s.msgs, s.to = nil, nil
	return m, t
}

// rig is an engine over fakes.
type rig struct {
	t      *testing.T
	c      *clock
	src    *fakeSource
	sink   *sink
	e      *Engine
	models []correlate.ModelState
	gpus   []gpu.Device
	bs     *baseline.Store
	rel    fakeReleases
	// check, when set, is called by checkedRun after every step with
	// the alert checkAlert of checkSubject while it is active; seen are
	// the summaries checkedRun saw.
	check                    func(AlertView)
	checkAlert, checkSubject string
	seen                     []string
	// anomalySynth, when set, sets a synthetic model's next second
	// before every step (the anomaly kind's summary case).
	anomalySynth *synthModel
}

func newRig(t *testing.T, cfg *Config) *rig {
	t.Helper()
	if err := cfg.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	r := &rig{t: t, c: newClock(), src: &fakeSource{}, sink: &sink{}}
	r.bs = baseline.New(baseline.Options{Now: r.c.now})
	e, err := New(Options{
		Config: cfg, Latency: r.src, Now: r.c.now, Send: r.sink.send, Baselines: r.bs,
		Logger:   slog.New(slog.DiscardHandler),
		Models:   func() []correlate.ModelState { return r.models },
		GPU:      func() gpu.State { return gpuState(r.gpus...) },
		Releases: &r.rel,
	})
	if err != nil {
		t.Fatal(err)
	}
	r.e = e
	return r
}

// run steps the engine for d, one step a second.
func (r *rig) run(d time.Duration) {
	for end := r.c.t.Add(d); r.c.t.Before(end); {
		r.synthSecond()
		r.c.add(time.Second)
		r.e.Step()
	}
}

// synthSecond sets the synthetic model's next second, if there is one.
func (r *rig) synthSecond() {
	if r.anomalySynth != nil {
		r.anomalySynth.second(r, false)
	}
}

// checkedRun is run, reading the checked alert after every step.
func (r *rig) checkedRun(d time.Duration) {
	for end := r.c.t.Add(d); r.c.t.Before(end); {
		r.synthSecond()
		r.c.add(time.Second)
		r.e.Step()
		for _, a := range r.e.Alerts() {
			if a.Name == r.checkAlert && (a.Labels["model"] == r.checkSubject || a.Labels["gpu"] == r.checkSubject) {
				r.seen = append(r.seen, a.Annotations["summary"])
				if r.check != nil {
					r.check(a)
				}
			}
		}
	}
}

func (r *rig) state(name, model string) State {
	for _, a := range r.e.Alerts() {
		if a.Name == name && (a.Labels["model"] == model || a.Labels["gpu"] == model) {
			return a.State
		}
	}
	return ""
}
