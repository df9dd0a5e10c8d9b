package alert

import (
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/infergate/infergate/monitor/baseline"
	"github.com/infergate/infergate/monitor/correlate"
	"github.com/infergate/infergate/monitor/gpu"
)

// instance is one alert: one rule for one model (or GPU).
type instance struct {
	rule        *Rule
	fp          string
	subject     string // model or GPU UUID
	labels      map[string]string
	state       State
	activeSince time.Time
	firedAt     time.Time
	lastTrue    time.Time
	lastDecided time.Time
	resolvedAt  time.Time
	escalated   bool
	// value and threshold are the value that fired (the primary
	// condition's worst while it held) and its bound, valueAt when it
	// was, current the same condition's value now (summary.go).
	value     string
	threshold string
	valueAt   time.Time
	current   string
	// fired holds each condition's worst value while it held; last the
	// latest outcomes and lastHolds what they combined to; judged is
	// false when the last step had no verdict of the alert's subject at
	// all (no calls in its windows) or it was restored and not judged
	// since.
	fired     []firedValue
	last      []outcome
	lastHolds tri
	judged    bool
	// cause is the last cause the evidence named (causeOf), causeAt
	// when, causeNow whether the latest evidence still names it.
	cause       string
	causeAt     time.Time
	causeNow    bool
	resolvedWhy string
	annotations map[string]string
	evidence    Evidence
	actions     []string
	// acting is true while the rule's action is started.
	acting bool
	// recurring is the model's recurring pattern the alert started in
	// (baseline.Store.Recurring), decided when it became active: a rise
	// the model has at this time of day on several days is a warning
	// with its note, not a new page.
	recurring *baseline.Pattern
}

// markNoTraffic records in the evidence that every condition found the
// model without calls: why the alert resolves.
func (a *instance) markNoTraffic() {
	a.judged = false
	for i := range a.evidence.Conditions {
		ce := &a.evidence.Conditions[i]
		ce.Holds, ce.Value, ce.Calls = no.String(), "", 0
		ce.Note = "no traffic in the last " + maxWindow.String()
	}
}

// Evidence is why an alert is in its state.
type Evidence struct {
	Conditions []CondEvidence `json:"conditions"`
	GPU        *GPUEvidence   `json:"gpu,omitempty"`
	CauseHint  string         `json:"cause_hint,omitempty"`
	// SlowEndpoint is the replica of the model's pool much slower than
	// the others, when one is ("one endpoint slow: ...").
	SlowEndpoint string        `json:"slow_endpoint,omitempty"`
	Baseline     *BaselineInfo `json:"baseline,omitempty"`
	// Inputs is what the model's recent calls carried against its usual
	// inputs, once the correlator has learned them.
	Inputs  *InputsEvidence `json:"inputs,omitempty"`
	Actions []string        `json:"actions,omitempty"`
	// Anomaly is the model's anomaly score, explanation and top
	// features, in the alerts of rules with an anomaly condition.
	Anomaly *AnomalyEvidence `json:"anomaly,omitempty"`
	// Recurring is the model's recurring pattern the alert started in.
	Recurring *baseline.Pattern `json:"recurring,omitempty"`
}

// InputsEvidence is a model's recent request size and rows p90 beside
// its usual ones, each the top of its power-of-two bucket, and what the
// correlator concluded (Moved: inputs_grew, input_shape_changed or "").
type InputsEvidence struct {
	Calls                   uint64 `json:"calls"`
	RequestBytesP90         int64  `json:"request_bytes_p90"`
	BaselineRequestBytesP90 int64  `json:"baseline_request_bytes_p90"`
	RowsP90                 int64  `json:"rows_p90,omitempty"`
	BaselineRowsP90         int64  `json:"baseline_rows_p90,omitempty"`
	Moved                   string `json:"moved,omitempty"`
}

// CondEvidence is one condition's last verdict.
type CondEvidence struct {
	Kind      string `json:"kind"`
	Holds     string `json:"holds"` // true, false, unknown
	Value     string `json:"value,omitempty"`
	Threshold string `json:"threshold,omitempty"`
	Calls     uint64 `json:"calls"`
	Note      string `json:"note,omitempty"`
}

// GPUEvidence is the state of the GPU an alert's model runs on.
type GPUEvidence struct {
	UUID        string   `json:"uuid"`
	Utilization float64  `json:"utilization"`
	MemoryRatio float64  `json:"memory_ratio,omitempty"`
	Temperature float64  `json:"temperature_celsius,omitempty"`
	Throttled   []string `json:"throttle_reasons,omitempty"`
}

// BaselineInfo is the model's baseline when the alert was evaluated.
type BaselineInfo struct {
	Source string             `json:"source"`
	Weeks  int                `json:"history_weeks"`
	Levels map[string]float64 `json:"median_seconds"`
	Spread map[string]float64 `json:"spread_seconds"`
	// UpAbove is the top of the band: the latency above which the
	// shared notion of "up" (baseline.DefaultRise) calls a quantile up.
	UpAbove map[string]float64 `json:"up_above_seconds"`
	Widen   float64            `json:"band_widen"`
}

// fingerprint identifies an alert: rule, subject and the rule's own
// labels (not severity, which escalation changes).
func fingerprint(r *Rule, subjectLabel, subject string) string {
	h := fnv.New64a()
	fmt.Fprintf(h, "%s\x00%s=%s", r.Name, subjectLabel, subject)
	for _, k := range slices.Sorted(maps.Keys(r.Labels)) {
		fmt.Fprintf(h, "\x00%s=%s", k, r.Labels[k])
	}
	return fmt.Sprintf("%016x", h.Sum64())
}

// labelsIn returns the alert's label set in frame f.
func (a *instance) labelsIn(f *frame, subjectLabel string) map[string]string {
	l := map[string]string{"alertname": a.rule.Name, "severity": a.rule.Severity, subjectLabel: a.subject}
	maps.Copy(l, a.rule.Labels)
	if sev := a.anomalySeverity(f.now); sev != "" {
		l["severity"] = sev
	}
	if a.recurring != nil {
		// Expected at this time of day: routed as a warning, and
		// labelled so that routes and silences can tell it apart.
		l["severity"], l["recurring"] = SeverityWarning, "true"
	}
	if a.escalated {
		l["severity"] = a.rule.Escalate.Severity
		l["escalated"] = "true"
	}
	if subjectLabel == "model" {
		if ms, ok := f.models[a.subject]; ok && ms.GPUUUID != "" {
			l["gpu"] = ms.GPUUUID
		} else if old := a.labels["gpu"]; old != "" {
			l["gpu"] = old
		}
	}
	return l
}

// fillEvidence records the outcomes and context of the last evaluation.
func (a *instance) fillEvidence(f *frame, subjectLabel string, os []outcome) {
	ev := Evidence{Actions: a.actions, Recurring: a.recurring}
	for i, o := range os {
		ce := CondEvidence{Kind: a.rule.conds[i].kind(), Holds: o.holds.String(), Calls: o.calls, Note: o.note}
		if o.holds != unknown || o.value != 0 {
			ce.Value, ce.Threshold = o.fmt(o.value), o.fmt(o.threshold)
		}
		ev.Conditions = append(ev.Conditions, ce)
	}
	if subjectLabel == "model" {
		if ms, ok := f.models[a.subject]; ok {
			ev.CauseHint = ms.Hint
			if se := ms.SlowEndpoint; se != nil {
				ev.SlowEndpoint = se.Note
			}
			if ms.GPU != nil {
				ev.GPU = gpuEvidence(*ms.GPU)
			}
			if in := ms.Inputs; in.Known {
				ev.Inputs = &InputsEvidence{Calls: in.Bytes.Calls,
					RequestBytesP90: in.Bytes.P90, BaselineRequestBytesP90: in.Bytes.BaselineP90,
					RowsP90: in.Rows.P90, BaselineRowsP90: in.Rows.BaselineP90, Moved: in.Moved()}
			}
		}
		ev.Anomaly = anomalyEvidence(f, a.rule, a.subject)
		if b := f.baselines.Get(a.subject); b.Known() {
			bi := &BaselineInfo{Source: b.Source, Weeks: b.Weeks, Widen: b.Widen,
				Levels: map[string]float64{}, Spread: map[string]float64{}, UpAbove: map[string]float64{}}
			for q, n := range baseline.QuantileNames {
				bi.Levels[n], bi.Spread[n] = b.Q[q].Median, b.Q[q].Spread
				th, _ := b.Threshold(q, baseline.DefaultRise)
				bi.UpAbove[n] = th.Seconds()
			}
			ev.Baseline = bi
		}
	} else if d, ok := f.gpus.Device(a.subject); ok {
		ev.GPU = gpuEvidence(d)
	}
	a.evidence = ev
}

func gpuEvidence(d gpu.Device) *GPUEvidence {
	g := &GPUEvidence{UUID: d.UUID, Utilization: d.Utilization, Temperature: d.TemperatureCelsius, Throttled: d.ActiveReasons()}
	g.MemoryRatio, _ = d.MemoryRatio()
	return g
}

// templateData is what annotation templates see.
type templateData struct {
	Labels map[string]string
	// Value is the value that fired (the worst while the condition
	// held), Threshold its bound, Current the value now.
	Value     string
	Threshold string
	Current   string
	Evidence  string
	// Summary is the alert in words (Fired; Now; Cause): what made it
	// fire and when, where it stands now, the cause the evidence names
	// ("" when none).
	Summary string
	Fired   string
	Now     string
	Cause   string
}

// render sets the alert's values and executes the rule's annotation
// templates at now, each within its bounds (template.go).
func (a *instance) render(now time.Time) {
	a.setValues()
	data := templateData{Labels: a.labels, Value: a.value, Threshold: a.threshold, Current: a.current,
		Evidence: a.evidence.String()}
	data.Fired, data.Now, data.Cause, data.Summary = a.summary(now)
	out := map[string]string{}
	for k, an := range a.rule.ann {
		out[k] = an.render(data)
	}
	a.annotations = out
}

// String is the evidence on one line.
func (ev Evidence) String() string {
	var parts []string
	for _, c := range ev.Conditions {
		s := c.Kind + " " + c.Holds
		if c.Value != "" {
			s += fmt.Sprintf(": %s vs %s", c.Value, c.Threshold)
		}
		if c.Calls > 0 {
			s += fmt.Sprintf(" over %d calls", c.Calls)
		}
		if c.Note != "" {
			s += " (" + c.Note + ")"
		}
		parts = append(parts, s)
	}
	if ev.Anomaly != nil {
		parts = append(parts, ev.Anomaly.String())
	}
	if ev.GPU != nil {
		parts = append(parts, fmt.Sprintf("GPU %s %.0f%% busy", ev.GPU.UUID, 100*ev.GPU.Utilization))
	}
	if ev.CauseHint != "" && ev.CauseHint != correlate.HintNone {
		parts = append(parts, "cause hint "+ev.CauseHint)
	}
	if ev.SlowEndpoint != "" {
		parts = append(parts, ev.SlowEndpoint)
	}
	if ev.Recurring != nil {
		parts = append(parts, "recurring: "+ev.Recurring.Note)
	}
	if in := ev.Inputs; in != nil && in.Moved != "" {
		s := fmt.Sprintf("inputs: request bytes p90 ≤ %d vs usual ≤ %d", in.RequestBytesP90, in.BaselineRequestBytesP90)
		if in.RowsP90 > 0 {
			s += fmt.Sprintf(", rows p90 ≤ %d vs usual ≤ %d", in.RowsP90, in.BaselineRowsP90)
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}
