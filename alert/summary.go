package alert

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/infergate/infergate/monitor/correlate"
)

// An alert's summary says what made it fire, where it stands now and
// the cause the evidence names, in words that are true at every moment
// of its life (issue 49):
//
//	p99 31.2ms at 21:50:36, over its baseline bound 24.1ms; now 7.2ms,
//	recovering (resolves at 21:51:20 if it stays below); one endpoint
//	slow: 10.0.3.7:8001 is 3.5x the pool's p99 for resnet50 (...)
//
// The value that fired is the worst one while the condition held, kept
// in the alert (and its state file): an alert keeps firing for
// keep_firing_for after its condition stopped holding, and a summary
// made of the value now would compare a healthy value with the bound as
// if it were over it. Templates see the parts as .Fired, .Now and
// .Cause, and all three as .Summary.

// firedValue is one condition's worst value while it held, with what
// the summary needs to say it; a zero At means it has not held.
type firedValue struct {
	Value     float64   `json:"value"`
	Threshold float64   `json:"threshold"`
	At        time.Time `json:"at"`
	Unit      string    `json:"unit,omitempty"`
	Op        string    `json:"op,omitempty"`
	Measure   string    `json:"measure,omitempty"`
	Bound     string    `json:"bound,omitempty"`
	BoundNote string    `json:"bound_note,omitempty"`
	Text      string    `json:"text,omitempty"`
}

func firedOf(o outcome, at time.Time) firedValue {
	return firedValue{Value: o.value, Threshold: o.threshold, At: at, Unit: o.unit, Op: o.op,
		Measure: o.measure, Bound: o.bound, BoundNote: o.boundNote, Text: o.text}
}

// outcome is fv as an outcome, for its formatting.
func (fv firedValue) outcome() outcome {
	return outcome{holds: yes, value: fv.Value, threshold: fv.Threshold, unit: fv.Unit, op: fv.Op,
		measure: fv.Measure, bound: fv.Bound, boundNote: fv.BoundNote, text: fv.Text}
}

// worse says whether o, which holds, is further past its bound than fv
// (relative to the bound, so the quantiles of a baseline condition, each
// with its own bound, compare). Values in words keep the first time.
func (fv firedValue) worse(o outcome) bool {
	if fv.At.IsZero() {
		return true
	}
	if o.text != "" || fv.Text != "" {
		return false
	}
	return excess(o.op, o.value, o.threshold) > excess(fv.Op, fv.Value, fv.Threshold)
}

// excess is how far v is past t in the direction of op, relative to t.
func excess(op string, v, t float64) float64 {
	d := v - t
	if strings.HasPrefix(op, "<") {
		d = -d
	}
	if t != 0 {
		d /= math.Abs(t)
	}
	return d
}

// overWord is op in words: "over", "at or over", "under", "at or under".
func overWord(op string) string {
	switch op {
	case ">=":
		return "at or over"
	case "<":
		return "under"
	case "<=":
		return "at or under"
	}
	return "over"
}

// clearWord is where a value goes when op stops holding: "below" for
// the "over" ops, "above" for the "under" ones.
func clearWord(op string) string {
	if strings.HasPrefix(op, "<") {
		return "above"
	}
	return "below"
}

// clockAt formats t for a summary: its time of day, with the date when
// it is not now's day.
func clockAt(t, now time.Time) string {
	if y, m, d := t.Date(); now.IsZero() || y != now.Year() || m != now.Month() || d != now.Day() {
		return t.Format("Jan 2 15:04:05")
	}
	return t.Format("15:04:05")
}

// phrase is fv in words: "p99 31.2ms at 21:50:36, over its baseline
// bound 24.1ms", or "GPU throttled (hw_thermal_slowdown) at 21:50:36".
func (fv firedValue) phrase(now time.Time) string {
	o := fv.outcome()
	measure := fv.Measure
	if measure == "" {
		measure = "value"
	}
	if fv.Text != "" {
		return fmt.Sprintf("%s %s at %s", measure, fv.Text, clockAt(fv.At, now))
	}
	s := fmt.Sprintf("%s %s at %s, %s %s %s", measure, o.fmt(fv.Value), clockAt(fv.At, now), overWord(fv.Op), fv.Bound, o.fmt(fv.Threshold))
	if fv.BoundNote != "" {
		s += " (" + fv.BoundNote + ")"
	}
	return s
}

// record keeps, for each condition that holds in os, its worst value,
// and remembers os as the latest outcomes (combined: holds).
func (a *instance) record(os []outcome, holds tri, now time.Time) {
	if len(a.fired) != len(os) {
		a.fired = make([]firedValue, len(os))
	}
	for i, o := range os {
		if o.holds == yes && a.fired[i].worse(o) {
			a.fired[i] = firedOf(o, now)
		}
	}
	a.last, a.lastHolds, a.judged = os, holds, true
}

// primary is the index of the condition the alert's value, threshold
// and current value are of: the first that held; -1 when none did (an
// alert restored from a state file written before values were kept).
func (a *instance) primary() int {
	for i, fv := range a.fired {
		if !fv.At.IsZero() {
			return i
		}
	}
	return -1
}

// setValues sets the alert's value, threshold, valueAt and current from
// its fired values and latest outcomes.
func (a *instance) setValues() {
	a.value, a.threshold, a.valueAt, a.current = "", "", time.Time{}, ""
	i := a.primary()
	if i < 0 {
		return
	}
	fv := a.fired[i]
	o := fv.outcome()
	if fv.Text != "" {
		a.value = fv.Text
	} else {
		a.value, a.threshold = o.fmt(fv.Value), o.fmt(fv.Threshold)
	}
	a.valueAt = fv.At
	if a.judged && i < len(a.last) {
		a.current = currentOf(a.last[i])
		if o := a.last[i]; a.current != "" && o.measure != fv.Measure && o.measure != "" {
			a.current = o.measure + " " + a.current
		}
	}
}

// currentOf is an outcome's value now, "" when it has none (no verdict:
// too few calls make no value worth saying).
func currentOf(o outcome) string {
	switch {
	case o.text != "":
		return o.text
	case o.holds == unknown:
		return ""
	}
	return o.fmt(o.value)
}

// compound says whether the alert's rule has several conditions.
func (a *instance) compound() bool { return len(a.rule.conds) > 1 }

// firedClause says what made the alert fire.
func (a *instance) firedClause(now time.Time) string {
	var parts []string
	for _, fv := range a.fired {
		if !fv.At.IsZero() {
			parts = append(parts, fv.phrase(now))
		}
	}
	if len(parts) == 0 {
		if a.firedAt.IsZero() {
			return "its value was not kept across a restart"
		}
		return "fired at " + clockAt(a.firedAt, now) + " (its value was not kept across a restart)"
	}
	return strings.Join(parts, " and ")
}

// currentClause lists the conditions' values now: "7.2ms", or, when the
// measure differs from the one that fired or the rule has several
// conditions, "p99 7.2ms and failed calls 0.10%". It is "" when no
// condition has a value now.
func (a *instance) currentClause() string {
	if !a.judged {
		return ""
	}
	var parts []string
	for i, o := range a.last {
		cur := currentOf(o)
		if cur == "" {
			continue
		}
		if a.compound() || (i < len(a.fired) && o.measure != a.fired[i].Measure && o.measure != "") {
			cur = o.measure + " " + cur
		}
		parts = append(parts, cur)
	}
	return strings.Join(parts, " and ")
}

// nowClause says where the alert stands now: still over, recovering
// (and when it resolves), without a verdict, or resolved.
func (a *instance) nowClause(now time.Time) string {
	r := a.rule
	cur := a.currentClause()
	nowIs := func(rest string) string {
		if cur == "" {
			return "now " + rest
		}
		return "now " + cur + ", " + rest
	}
	op := ">"
	if i := a.primary(); i >= 0 && i < len(a.last) && a.last[i].op != "" {
		op = a.last[i].op
	}
	switch {
	case a.state == StateResolved:
		s := "resolved at " + clockAt(a.resolvedAt, now)
		if a.resolvedWhy != "" && a.resolvedWhy != whyCleared {
			s += " (" + a.resolvedWhy + ")"
		}
		return nowIs(s)
	case !a.judged:
		// No calls in its windows this step, or restored and not
		// judged yet.
		return "now no verdict since " + clockAt(a.lastDecided, now) + "; without one it resolves at " +
			clockAt(a.lastDecided.Add(staleAfter(r)), now)
	case a.lastHolds == yes:
		still := "still " + overWord(op)
		if i := a.primary(); a.compound() || i < 0 || a.fired[i].Text != "" {
			still = "still holds"
		}
		if a.state == StatePending {
			return nowIs(still + " (fires at " + clockAt(a.activeSince.Add(r.For), now) + " if it holds)")
		}
		return nowIs(still)
	case a.lastHolds == no:
		at := clockAt(a.resolvesAt(), now)
		if a.compound() || a.stillPast() {
			// The value may still be past its bound, only not with
			// confidence: "if it stays below" would not be true.
			return nowIs("no longer holds, recovering (resolves at " + at + " unless it holds again)")
		}
		return nowIs("recovering (resolves at " + at + " if it stays " + clearWord(op) + ")")
	}
	// No verdict this step (too few calls, a baseline still learning).
	why := "no verdict"
	for _, o := range a.last {
		if o.holds == unknown && o.note != "" {
			why += ": " + o.note
			break
		}
	}
	return nowIs(why + "; without one it resolves at " + clockAt(a.lastDecided.Add(staleAfter(r)), now))
}

// resolvesAt is when a firing alert whose condition no longer holds
// resolves if it stays so; zero otherwise.
func (a *instance) resolvesAt() time.Time {
	if a.state != StateFiring || !a.judged || a.lastHolds != no {
		return time.Time{}
	}
	return a.lastTrue.Add(a.rule.KeepFiringFor)
}

// stillPast says whether a condition's value now still compares past its
// bound (or is in words) although the condition does not hold: an error
// ratio over its bound but not with confidence, a slope within its
// standard errors.
func (a *instance) stillPast() bool {
	for _, o := range a.last {
		if o.text != "" || (o.holds == no && compare(orGreater(o.op), o.value, o.threshold)) {
			return true
		}
	}
	return false
}

func orGreater(op string) string {
	if op == "" {
		return ">"
	}
	return op
}

// noteCause remembers the cause the evidence names now, if it names one.
func (a *instance) noteCause(now time.Time) {
	if c := causeOf(a.evidence); c != "" {
		a.cause, a.causeAt, a.causeNow = c, now, true
	} else {
		a.causeNow = false
	}
}

// causeClause is the cause the evidence named, marked with when it was
// seen when the evidence no longer names it.
func (a *instance) causeClause(now time.Time) string {
	if a.cause == "" || a.causeNow {
		return a.cause
	}
	return a.cause + " (seen at " + clockAt(a.causeAt, now) + ")"
}

// causeOf is the cause ev names, in words: what the anomaly detector
// saw, a slow endpoint of the model's pool, inputs that grew or changed
// shape, or the GPU.
func causeOf(ev Evidence) string {
	if an := ev.Anomaly; an != nil && an.Explanation != "" {
		// An anomaly alert's cause is what its detector saw, in words.
		return an.Explanation
	}
	if ev.SlowEndpoint != "" {
		return ev.SlowEndpoint
	}
	if in := ev.Inputs; in != nil && in.Moved != "" {
		s := fmt.Sprintf("request bytes p90 ≤ %d vs usual ≤ %d", in.RequestBytesP90, in.BaselineRequestBytesP90)
		if in.RowsP90 > 0 {
			s += fmt.Sprintf(", rows p90 ≤ %d vs usual ≤ %d", in.RowsP90, in.BaselineRowsP90)
		}
		if in.Moved == correlate.HintInputShapeChanged {
			return "input shape changed: " + s
		}
		return "inputs grew: " + s
	}
	g := ev.GPU
	switch ev.CauseHint {
	case correlate.HintGPUSaturated, correlate.HintGPUThrottled, correlate.HintGPUMemoryPressure, correlate.HintNotGPU:
		if g == nil {
			return "cause hint " + ev.CauseHint
		}
	default:
		return ""
	}
	switch ev.CauseHint {
	case correlate.HintGPUSaturated:
		return fmt.Sprintf("GPU saturated: %s %.0f%% busy", g.UUID, 100*g.Utilization)
	case correlate.HintGPUThrottled:
		return fmt.Sprintf("GPU throttled: %s (%s)", g.UUID, strings.Join(g.Throttled, ","))
	case correlate.HintGPUMemoryPressure:
		return fmt.Sprintf("GPU memory pressure: %s %.0f%% of its memory used", g.UUID, 100*g.MemoryRatio)
	}
	return fmt.Sprintf("not the GPU: %s %.0f%% busy", g.UUID, 100*g.Utilization)
}

// summary is the alert in words: what fired, where it stands now, the
// cause.
func (a *instance) summary(now time.Time) (fired, nowIs, cause, all string) {
	fired, nowIs, cause = a.firedClause(now), a.nowClause(now), a.causeClause(now)
	if a.recurring != nil {
		// The pattern is the likeliest cause a rise at this time of day
		// has; the evidence's own cause, when it names one, comes first.
		rec := "recurring: " + a.recurring.Note
		if cause != "" {
			cause += ", " + rec
		} else {
			cause = rec
		}
	}
	all = fired + "; " + nowIs
	if cause != "" {
		all += "; " + cause
	}
	return fired, nowIs, cause, all
}
