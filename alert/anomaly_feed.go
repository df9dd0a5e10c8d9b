package alert

import (
	"math"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/infergate/infergate/anomaly"
	"github.com/infergate/infergate/monitor"
	"github.com/infergate/infergate/monitor/baseline"
)

// The anomaly feed turns each model's last second into the nine features
// of anomaly.DefaultFeatures, each a deviation from the model's own
// baseline, and gives them to the model's detector once a slice, in the
// engine's evaluation (off the call path). The anomaly rule kind
// (cond_anomaly.go) reads the results; the API, /metrics and the status
// page show them.
//
// Baselines: p50 and p99 against the seasonal store the baseline rule
// reads (monitor/baseline: the hour of the week once it has history, the
// recent calm level before). That store learns latency quantiles only,
// so the other features are against a slow level of their own, kept here
// per model: a running mean of the feature (of its logarithm for the
// log-ratio ones) over the seconds the detector learnt, the last ~5
// minutes of them (α = 1/300), known after 30 such seconds. A second the
// detector did not learn (inside an alert, or scored as unusual) moves
// the level 30 times slower, so an incident is not learnt as the new
// normal while a lasting change (a deploy that halves the traffic for
// good) is within hours, as the seasonal baseline's AcceptAfter does.
// A feature without a baseline yet, or without a value this second (no
// queue, no GPU source, no input counts), is NaN: the detector counts it
// as at its baseline and never names it.
//
// Batch size has no per-model series in monitor's windows yet: it is
// always NaN.

// Feature indexes in anomaly.DefaultFeatures.
const (
	featP50 = iota
	featP99
	featErrors
	featCalls
	featQueue
	featBatch
	featInput
	featOverhead
	featGPU
	numFeats
)

// Limits of the feed.
const (
	// anomalyMaxModels bounds the detectors (about 35 KiB each: 2,000 is
	// 70 MiB at most); a model past it shows as learning.
	anomalyMaxModels = 2000
	// anomalyQuiet is how long a model without calls keeps its detector
	// and levels; a model back after longer learns afresh.
	anomalyQuiet = 10 * time.Minute
	// levelKnown is how many learnt seconds make a feature's own level.
	levelKnown = 30
	// levelAlpha is the weight of a learnt second in a feature's level,
	// levelSlow how much slower a second not learnt moves it.
	levelAlpha = 1.0 / 300
	levelSlow  = 30
	// errorSmooth is the weight of the latest second in the smoothed
	// error ratio: a per-second ratio of a model with few calls is
	// noise (the package doc's advice).
	errorSmooth = 0.3
	// Floors of the log-ratio features whose level can be near zero: a
	// queue wait of microseconds tripled is no incident, and neither is
	// the proxy's overhead.
	queueFloor    = 500 * time.Microsecond
	overheadFloor = 20 * time.Microsecond
)

// AnomalyView is a model's latest anomaly score, for the API, /metrics
// and the status page.
type AnomalyView struct {
	Model string    `json:"model"`
	At    time.Time `json:"at"`
	// Score is the detector's score of the model's last second, in
	// [0, 1]: about 0.5 for a usual second, over anomaly.Threshold for
	// an anomalous one; 0 while Learning.
	Score float64 `json:"score"`
	// Learning is true until the model's detector has learnt enough
	// normal seconds (or when the feed has no room for the model).
	Learning bool `json:"learning"`
	// Explanation says in words what made a high score; Pattern names
	// its shape (throughput_collapse, queue_growth, ...).
	Explanation string `json:"explanation,omitempty"`
	Pattern     string `json:"pattern,omitempty"`
	// Top are the features that made the score, largest first.
	Top []AnomalyFeature `json:"top,omitempty"`
}

// AnomalyFeature is one feature's part in a score.
type AnomalyFeature struct {
	Feature string `json:"feature"`
	Label   string `json:"label"`
	// Contribution is the feature's share of the second's surprise, in
	// bits above its usual share.
	Contribution float64 `json:"contribution_bits"`
	// Deviation is the feature against its baseline: ln(value/baseline)
	// or, for errors and GPU utilisation, value − baseline as a fraction.
	Deviation float64 `json:"deviation"`
}

// level is a feature's own slow baseline.
type level struct {
	v float64
	n int32
}

func (l *level) known() bool { return l.n >= levelKnown }

// learn moves the level towards x: fully weighted when the detector
// learnt the second, levelSlow times slower when it did not.
func (l *level) learn(x float64, learnt bool) {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return
	}
	if !learnt {
		if l.n == 0 {
			return
		}
		l.v += levelAlpha / levelSlow * (x - l.v)
		return
	}
	if l.n < math.MaxInt32 {
		l.n++
	}
	l.v += max(1/float64(l.n), levelAlpha) * (x - l.v)
}

// modelFeed is what the feed keeps of one model between seconds.
type modelFeed struct {
	levels       [numFeats]level // the own levels; p50, p99 and batch unused
	failEW, nEW  float64         // smoothed failed and answered calls
	raw          [numFeats]float64
	view         AnomalyView
	top          [3]AnomalyFeature // view.Top's storage
	lastObserved time.Time
}

// anomalyFeed feeds the detectors and keeps their latest results.
type anomalyFeed struct {
	reg   *anomaly.Registry
	feats []anomaly.Feature
	x     []float64 // the vector handed to Observe, reused

	mu         sync.RWMutex
	models     map[string]*modelFeed
	last       time.Time
	lastForget time.Time
}

func newAnomalyFeed() *anomalyFeed {
	feats := anomaly.DefaultFeatures()
	reg, err := anomaly.NewRegistry(anomalyMaxModels, feats)
	if err != nil {
		panic(err) // the default features are valid
	}
	return &anomalyFeed{reg: reg, feats: feats, x: make([]float64, len(feats)), models: map[string]*modelFeed{}}
}

// allModels selects every model's inference calls.
var allModels = selector{}

// step observes each model with calls in the frame's last slice, at most
// once a slice; firing holds the models with a firing alert, whose
// seconds are scored but not learnt (an incident is not normal).
func (af *anomalyFeed) step(f *frame, firing map[string]bool) {
	now := f.now
	if !af.last.IsZero() && now.Sub(af.last) < f.slice*9/10 {
		return // evaluated faster than the slices come: one second each
	}
	af.last = now
	ok := f.windowOf(allModels, f.slice, viewOK)
	srv := f.windowOf(allModels, f.slice, viewServer)
	af.mu.Lock()
	defer af.mu.Unlock()
	for m, rs := range srv {
		n := rs.Stats[monitor.ComponentTotal].Count
		if n == 0 {
			continue // no calls this second: nothing to judge
		}
		mf := af.models[m]
		if mf == nil {
			mf = &modelFeed{}
			af.models[m] = mf
		}
		af.features(f, m, mf, ok[m], rs)
		learn := !firing[m]
		res, err := af.reg.Observe(m, now, af.x, learn)
		mf.lastObserved = now
		for i := range numFeats {
			if i != featP50 && i != featP99 {
				mf.levels[i].learn(mf.raw[i], res.Learned)
			}
		}
		v := &mf.view
		v.Model, v.At, v.Score, v.Learning = m, now, res.Score, res.Learning || err != nil
		v.Explanation, v.Pattern = res.Explanation, res.Pattern
		v.Top = mf.top[:0]
		for _, i := range res.Top {
			if len(v.Top) == len(mf.top) {
				break
			}
			v.Top = append(v.Top, AnomalyFeature{Feature: af.feats[i].Name, Label: af.feats[i].Label,
				Contribution: res.Contributions[i], Deviation: af.x[i]})
		}
	}
	// Models gone quiet lose their detector (and their levels), once a
	// minute: the registry stays bounded by the models in use.
	if now.Sub(af.lastForget) >= time.Minute {
		af.lastForget = now
		cut := now.Add(-anomalyQuiet)
		af.reg.ForgetQuiet(cut)
		for m, mf := range af.models {
			if mf.lastObserved.Before(cut) {
				delete(af.models, m)
			}
		}
	}
}

// features fills af.x with model m's deviations this second and mf.raw
// with the values its own levels learn (logarithms for the log-ratio
// features). ok is the model's successful calls, srv every call it
// answered but those the client caused.
func (af *anomalyFeed) features(f *frame, m string, mf *modelFeed, ok, srv monitor.RecentStats) {
	x := af.x
	nan := math.NaN()
	for i := range x {
		x[i], mf.raw[i] = nan, nan
	}
	tot := ok.Stats[monitor.ComponentTotal]
	// Latency against the seasonal baseline of the baseline rule.
	if tot.Count > 0 {
		if b := f.baselines.Get(m); b.Known() {
			x[featP50] = logRatio(tot.P50.Seconds(), b.Q[baseline.P50].Median)
			x[featP99] = logRatio(tot.P99.Seconds(), b.Q[baseline.P99].Median)
		}
		if ok.QueueSeen {
			mf.raw[featQueue] = math.Log(max(ok.Stats[monitor.ComponentQueue].P99, queueFloor).Seconds())
		}
		if oh := ok.Stats[monitor.ComponentOverhead]; oh.Count > 0 {
			mf.raw[featOverhead] = math.Log(max(oh.P50, overheadFloor).Seconds())
		}
	}
	n := srv.Stats[monitor.ComponentTotal].Count
	failed := srv.FailedOf(DefaultServerErrorCodes)
	if mf.nEW == 0 {
		mf.failEW, mf.nEW = float64(failed), float64(n)
	} else {
		mf.failEW += errorSmooth * (float64(failed) - mf.failEW)
		mf.nEW += errorSmooth * (float64(n) - mf.nEW)
	}
	mf.raw[featErrors] = mf.failEW / mf.nEW
	mf.raw[featCalls] = math.Log(float64(n) / f.slice.Seconds())
	if ms, has := f.models[m]; has {
		if in := ms.Inputs; in.Known && in.Bytes.P90 > 0 && in.Bytes.BaselineP90 > 0 {
			// The correlator's own usual inputs are the baseline here.
			x[featInput] = math.Log(float64(in.Bytes.P90) / float64(in.Bytes.BaselineP90))
		}
		if g := ms.GPU; g != nil && g.Utilization > 0 {
			mf.raw[featGPU] = g.Utilization
		}
	}
	for _, i := range []int{featErrors, featCalls, featQueue, featOverhead, featGPU} {
		if l := &mf.levels[i]; l.known() && !math.IsNaN(mf.raw[i]) {
			x[i] = mf.raw[i] - l.v // a difference of logarithms is the log-ratio
		}
	}
}

// logRatio is ln(v/base), NaN when either is unknown.
func logRatio(v, base float64) float64 {
	if v <= 0 || base <= 0 {
		return math.NaN()
	}
	return math.Log(v / base)
}

// view returns model m's latest view; ok is false when the feed has not
// seen the model.
func (af *anomalyFeed) view(m string) (AnomalyView, bool) {
	af.mu.RLock()
	defer af.mu.RUnlock()
	mf := af.models[m]
	if mf == nil {
		return AnomalyView{}, false
	}
	v := mf.view
	v.Top = slices.Clone(v.Top)
	return v, true
}

// views returns every model's latest view, sorted by model.
func (af *anomalyFeed) views() []AnomalyView {
	af.mu.RLock()
	out := make([]AnomalyView, 0, len(af.models))
	for _, mf := range af.models {
		v := mf.view
		v.Top = slices.Clone(v.Top)
		out = append(out, v)
	}
	af.mu.RUnlock()
	slices.SortFunc(out, func(a, b AnomalyView) int {
		switch {
		case a.Model < b.Model:
			return -1
		case a.Model > b.Model:
			return 1
		}
		return 0
	})
	return out
}

// Anomalies returns each model's latest anomaly score, explanation and
// learning state, sorted by model.
func (e *Engine) Anomalies() []AnomalyView { return e.anomaly.views() }

// Anomaly returns model's latest anomaly score; ok is false when the
// engine has not scored the model.
func (e *Engine) Anomaly(model string) (AnomalyView, bool) { return e.anomaly.view(model) }

// firingModels returns the models with a firing alert; e.mu is held.
func (e *Engine) firingModels() map[string]bool {
	out := map[string]bool{}
	for _, a := range e.alerts {
		if m := a.labels["model"]; m != "" && a.state == StateFiring {
			out[m] = true
		}
	}
	return out
}

// anomalyCollector exports infergate_model_anomaly_score at scrape time
// from the feed's views: nothing is set per second.
type anomalyCollector struct{ af *anomalyFeed }

var anomalyScoreDesc = prometheus.NewDesc("infergate_model_anomaly_score",
	"The anomaly detector's score of each model's last second, 0 to 1: about 0.5 usual, over 0.9 anomalous; "+
		"0 while the model's detector learns.", []string{"model"}, nil)

func (c anomalyCollector) Describe(ch chan<- *prometheus.Desc) { ch <- anomalyScoreDesc }

func (c anomalyCollector) Collect(ch chan<- prometheus.Metric) {
	// Copied under the lock, sent after: a slow scrape must not hold up
	// the evaluation.
	c.af.mu.RLock()
	ms := make([]prometheus.Metric, 0, len(c.af.models))
	for m, mf := range c.af.models {
		ms = append(ms, prometheus.MustNewConstMetric(anomalyScoreDesc, prometheus.GaugeValue, mf.view.Score, m))
	}
	c.af.mu.RUnlock()
	for _, m := range ms {
		ch <- m
	}
}
