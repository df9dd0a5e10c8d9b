package alert

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/infergate/infergate/monitor"
	"github.com/infergate/infergate/monitor/baseline"
	"github.com/infergate/infergate/monitor/correlate"
	"github.com/infergate/infergate/monitor/gpu"
)

// LatencySource gives recent per-group statistics; *monitor.Registry is
// one.
type LatencySource interface {
	Recent(n int, group func(monitor.SeriesKey) string) (map[string]monitor.RecentStats, time.Time)
}

// frame is one evaluation's view of the data: recent windows are read at
// most once per selection and window, whatever the number of rules.
type frame struct {
	now       time.Time
	src       LatencySource
	slice     time.Duration
	recent    map[string]map[string]monitor.RecentStats
	models    map[string]correlate.ModelState
	gpus      gpu.State
	baselines *baseline.Store
	cfg       *Config
	// trends are the trend conditions' samples, kept between frames.
	trends *trendStore
	// releases are the releases by model (ReleaseSource), read once per
	// frame.
	releases map[string]ReleaseState
	// anomaly holds the models' anomaly scores of this frame's second.
	anomaly *anomalyFeed
}

// view says which series of a model a window reads.
type view int8

const (
	// viewOK: successful calls only (latency conditions).
	viewOK view = iota
	// viewAll: every call the model answered itself (error conditions
	// with an explicit codes list).
	viewAll
	// viewServer: every call the model answered itself but those the
	// client caused (code class client_error: its own deadline ran out,
	// it cancelled, an unknown model, a bad argument). The built-in error
	// conditions read it, so a client cannot fake a server's failure.
	viewServer
	// viewAny: every call of the model, the fallback's answers included
	// (whether the model has any traffic at all).
	viewAny
)

// window returns the per-model statistics of sel over w: successful calls
// only when latency, every call when not (error conditions).
func (f *frame) window(sel selector, w time.Duration, latency bool) map[string]monitor.RecentStats {
	if latency {
		return f.windowOf(sel, w, viewOK)
	}
	return f.windowOf(sel, w, viewAll)
}

// windowOf returns the per-model statistics of the series of sel that v
// reads over w, read once per frame.
func (f *frame) windowOf(sel selector, w time.Duration, v view) map[string]monitor.RecentStats {
	n := int((w + f.slice - 1) / f.slice)
	key := fmt.Sprintf("%s\x00%d\x00%d", sel.key(), n, v)
	if r, ok := f.recent[key]; ok {
		return r
	}
	r, _ := f.src.Recent(n, func(k monitor.SeriesKey) string {
		switch {
		case v == viewOK && k.CodeClass != monitor.CodeClassOK:
			return ""
		case v == viewServer && k.CodeClass == monitor.CodeClassClientError:
			return ""
		case v != viewAny && k.Degraded():
			// Calls the fallback answered say nothing of the model's own
			// health (and would resolve its alert while it is still sick).
			return ""
		case !sel.matches(k):
			return ""
		}
		return k.Model
	})
	f.recent[key] = r
	return r
}

// addModels adds to seen the models with data in the window w of sel
// (see window).
func (f *frame) addModels(sel selector, w time.Duration, latency bool, seen map[string]bool) {
	for m := range f.window(sel, w, latency) {
		seen[m] = true
	}
}

// subjects returns the models a model rule evaluates this frame: those
// with calls in any of its windows.
func (f *frame) subjects(r *Rule) []string {
	seen := map[string]bool{}
	for _, cd := range r.conds {
		cd.models(f, r.sel, seen)
	}
	if len(seen) == 0 {
		// Only GPU or hint conditions: the models the correlator knows.
		for m := range f.models {
			if glob(r.sel.model, m) {
				seen[m] = true
			}
		}
	}
	out := make([]string, 0, len(seen))
	for m := range seen {
		out = append(out, m)
	}
	slices.Sort(out)
	return out
}

// verdict is one rule's verdict for one subject: its conditions'
// outcomes and what they combine to.
type verdict struct {
	rule         *Rule
	subjectLabel string // "model" or "gpu"
	subject      string // model or GPU UUID
	outcomes     []outcome
	holds        tri
}

// evaluateStage evaluates every rule of cfg over the step's frame: per
// GPU for rules of GPU conditions only, else per model with data in any
// of the rule's windows. It writes s.verdicts and forgets the trend
// samples of models gone for a trend window.
type evaluateStage struct {
	cfg *Config
}

func (st evaluateStage) exec(ctx context.Context, s *step) {
	f := s.frame
	add := func(r *Rule, subjectLabel, subject string, os []outcome) {
		s.verdicts = append(s.verdicts, verdict{rule: r, subjectLabel: subjectLabel, subject: subject,
			outcomes: os, holds: combine(r.compound, os)})
	}
	for _, r := range st.cfg.rules {
		if r.PerGPU {
			for _, d := range f.gpus.Devices {
				os := make([]outcome, len(r.conds))
				for i, cd := range r.conds {
					os[i] = cd.(deviceCondition).device(d)
				}
				add(r, "gpu", d.UUID, os)
			}
			continue
		}
		for _, m := range f.subjects(r) {
			os := make([]outcome, len(r.conds))
			for i, cd := range r.conds {
				os[i] = cd.eval(f, r, i, m)
			}
			add(r, "model", m, os)
		}
	}
	f.trends.forget(nowOf(ctx))
}
