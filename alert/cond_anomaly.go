package alert

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/infergate/infergate/anomaly"
)

// KindAnomaly holds while the model's anomaly detector (package anomaly,
// fed by anomaly_feed.go) scores its seconds at or over a bound: a change
// spread over several features (calls halve at flat latency, the queue
// grows at flat p99, a few errors with a slightly slower p50) that no
// single-signal rule sees.
//
// Fields: score, the bound (default anomaly.Threshold, 0.9; the score is
// calibrated per model, so one bound fits every model), critical_score
// (default 0.99) and critical_after (default 10m). The rule's `for` says
// how long the score must stay over the bound; the score is already
// smoothed over 2-3 s, so a `for` of a few seconds is plenty on top.
//
// Severity from score and duration: the rule's severity (warning by
// default) until the alert's worst score reaches critical_score, or it
// has fired for critical_after; then critical. A negative critical_after
// turns the duration off; a critical_score of 1 the score.
//
// While the model's detector learns (its first ~3 minutes of normal
// seconds) the condition is unknown, "learning", and never fires.
const KindAnomaly = "anomaly"

// Defaults of the anomaly kind.
const (
	DefaultAnomalyCriticalScore = 0.99
	DefaultAnomalyCriticalAfter = 10 * time.Minute
)

type anomalyCond struct {
	score         float64
	criticalScore float64
	criticalAfter time.Duration // < 0: never by duration
}

func parseAnomaly(cc *Condition, cm condCommon, _ *Config) (condition, error) {
	if cc.Metric != "" || cc.Quantile != "" || cc.Value != "" || cm.window != 0 {
		// The detector reads every feature of the last second itself:
		// a metric, quantile, value or window here would be ignored.
		return nil, fmt.Errorf("metric, quantile, value, window: not for anomaly conditions (set score)")
	}
	if cm.op != ">" {
		return nil, fmt.Errorf("op: anomaly conditions are 'score at or over'")
	}
	cd := &anomalyCond{score: cc.Score, criticalScore: cc.CriticalScore, criticalAfter: cc.CriticalAfter}
	if cd.score == 0 {
		cd.score = anomaly.Threshold
	}
	if cd.criticalScore == 0 {
		cd.criticalScore = DefaultAnomalyCriticalScore
	}
	if cd.criticalAfter == 0 {
		cd.criticalAfter = DefaultAnomalyCriticalAfter
	}
	for _, s := range []struct {
		name string
		v    float64
	}{{"score", cd.score}, {"critical_score", cd.criticalScore}} {
		if math.IsNaN(s.v) || s.v <= 0 || s.v > 1 {
			return nil, fmt.Errorf("%s: %v, want a score over 0 and at most 1 (a usual second scores about 0.5; default %v)",
				s.name, s.v, map[string]float64{"score": anomaly.Threshold, "critical_score": DefaultAnomalyCriticalScore}[s.name])
		}
	}
	if cd.criticalScore < cd.score {
		return nil, fmt.Errorf("critical_score: %v is below score %v", cd.criticalScore, cd.score)
	}
	return cd, nil
}

func (cd *anomalyCond) kind() string { return KindAnomaly }

// models adds the models scored in the frame's second (or the one
// before: a model whose last second had no calls is not judged on an old
// score).
func (cd *anomalyCond) models(f *frame, sel selector, seen map[string]bool) {
	af := f.anomaly
	if af == nil {
		return
	}
	af.mu.RLock()
	defer af.mu.RUnlock()
	for m, mf := range af.models {
		if f.now.Sub(mf.view.At) <= 2*f.slice && glob(sel.model, m) {
			seen[m] = true
		}
	}
}

func (cd *anomalyCond) eval(f *frame, _ *Rule, _ int, model string) outcome {
	o := outcome{op: ">=", measure: "anomaly score", bound: "its bound", threshold: cd.score}
	if f.anomaly == nil {
		o.note = "no anomaly scores"
		return o
	}
	f.anomaly.mu.RLock()
	mf := f.anomaly.models[model]
	var v AnomalyView
	if mf != nil {
		v = mf.view
	}
	f.anomaly.mu.RUnlock()
	switch {
	case mf == nil || f.now.Sub(v.At) > 2*f.slice:
		o.note = "no calls"
	case v.Learning:
		// Unknown, not false: a learning model shows "learning" and
		// neither fires nor resolves an alert on it.
		o.note = "learning: the model's anomaly detector has not learnt enough normal seconds yet"
	default:
		o.value = v.Score
		o.holds = triOf(v.Score >= cd.score)
		o.note = v.Explanation
	}
	return o
}

// anomalySeverity is the severity of an alert of a rule with an anomaly
// condition at now: critical once its worst score reached the
// condition's critical_score or it has fired for critical_after; "" for
// the rule's own.
func (a *instance) anomalySeverity(now time.Time) string {
	for i, cd := range a.rule.conds {
		ac, ok := cd.(*anomalyCond)
		if !ok {
			continue
		}
		if i < len(a.fired) && !a.fired[i].At.IsZero() && a.fired[i].Value >= ac.criticalScore {
			return SeverityCritical
		}
		if a.state == StateFiring && ac.criticalAfter > 0 && now.Sub(a.firedAt) >= ac.criticalAfter {
			return SeverityCritical
		}
	}
	return ""
}

// AnomalyEvidence is the model's anomaly score in an anomaly alert's
// evidence: the score, what made it in words, the pattern's name and the
// top features with their contributions.
type AnomalyEvidence struct {
	Score       float64          `json:"score"`
	Learning    bool             `json:"learning,omitempty"`
	Explanation string           `json:"explanation,omitempty"`
	Pattern     string           `json:"pattern,omitempty"`
	Top         []AnomalyFeature `json:"top,omitempty"`
}

// anomalyEvidence returns the model's anomaly evidence for an alert of
// rule r, nil when r has no anomaly condition or the model no score.
func anomalyEvidence(f *frame, r *Rule, model string) *AnomalyEvidence {
	if f.anomaly == nil {
		return nil
	}
	for _, cd := range r.conds {
		ac, ok := cd.(*anomalyCond)
		if !ok {
			continue
		}
		v, ok := f.anomaly.view(model)
		if !ok {
			return nil
		}
		ae := &AnomalyEvidence{Score: v.Score, Learning: v.Learning}
		// The words only of a score over the bound: a recovering
		// model's milder seconds would otherwise replace the cause that
		// made the alert with a shrug.
		if v.Score >= ac.score {
			ae.Explanation, ae.Pattern, ae.Top = v.Explanation, v.Pattern, v.Top
		}
		return ae
	}
	return nil
}

// String is the anomaly evidence on one line.
func (ae *AnomalyEvidence) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "anomaly score %.3g", ae.Score)
	if ae.Pattern != "" {
		fmt.Fprintf(&b, " (%s)", ae.Pattern)
	}
	for i, t := range ae.Top {
		sep := ", "
		if i == 0 {
			sep = ": "
		}
		fmt.Fprintf(&b, "%s%s %.2f bits", sep, t.Label, t.Contribution)
	}
	return b.String()
}
