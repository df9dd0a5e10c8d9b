package scenario

import (
	"fmt"
	"math"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/infergate/infergate/bench/report"
)

// Targets of the detect scenario.
const (
	DetectRefTarget    = 5 * time.Second // reference incident, at >= 100 calls/s
	DetectErrorsTarget = 2 * time.Second
)

// DetectIncidentRow is one injected incident.
type DetectIncidentRow struct {
	Kind string `json:"kind"`
	What string `json:"what"`
	// Rule is the default rule expected to fire.
	Rule string `json:"rule"`
	// SimAt is the simulated time at injection; Rate the call rate then.
	SimAt string  `json:"sim_at"`
	Rate  float64 `json:"rate"`
	// InjectedAt and HealedAt are real seconds since the run started;
	// Hold the most the incident was held.
	InjectedAt float64 `json:"injected_at_s"`
	HealedAt   float64 `json:"healed_at_s"`
	Hold       float64 `json:"hold_s"`
	// ActiveAtInjection lists alerts still active when it was injected.
	ActiveAtInjection []string `json:"active_at_injection,omitempty"`
	// ToPending and ToFiring are the delays from the injection to the
	// expected rule's first pending and firing state (s); negative when
	// not seen before healing.
	ToPending float64 `json:"to_pending_s"`
	ToFiring  float64 `json:"to_firing_s"`
	// Fired lists every rule that reached firing between the injection
	// and the end of the recovery, with its delay.
	Fired []string   `json:"fired,omitempty"`
	Prom  DetectProm `json:"prometheus"`
	// Target and Verdict: PASS/FAIL against the target, or "-" where the
	// issue sets none.
	Target  string `json:"target"`
	Verdict string `json:"verdict"`
}

// DetectPhaseRow counts firings over a stretch without incidents.
type DetectPhaseRow struct {
	Name     string   `json:"name"`
	From     float64  `json:"from_s"`
	To       float64  `json:"to_s"`
	Firings  int      `json:"firings"`
	Pendings int      `json:"pendings"`
	Rules    []string `json:"rules,omitempty"`
	Target   string   `json:"target"`
	Verdict  string   `json:"verdict"`
}

// DetectReport is the outcome of RunDetect.
type DetectReport struct {
	Model     string  `json:"model"`
	Scale     float64 `json:"scale"`
	Days      float64 `json:"days"`
	RateMin   float64 `json:"rate_min"`
	LightRate float64 `json:"light_rate"`
	SimStart  string  `json:"sim_start"`
	// ColdEnd ends the cold start, the days' first stretch (real s; 0
	// none).
	ColdEnd float64 `json:"cold_start_end_s"`
	// LearnEnd and DaysEnd end the learning and judged days (real s).
	LearnEnd float64 `json:"learn_end_s"`
	DaysEnd  float64 `json:"days_end_s"`
	// LightFrom and LightTo bound the light phase; equal when none ran.
	LightFrom float64 `json:"light_from_s"`
	LightTo   float64 `json:"light_to_s"`
	// BaselineAtEnd is the model's baseline at the end of the days.
	BaselineAtEnd *DetectBand `json:"baseline_at_end_of_days,omitempty"`

	Incidents []DetectIncidentRow `json:"incidents"`
	Phases    []DetectPhaseRow    `json:"phases"`
	// TrendRule says what the creep would need.
	TrendRule string `json:"trend_rule"`

	Transitions []DetectTransition `json:"transitions"`
	Seconds     []DetectSecond     `json:"client_seconds"`
	Bands       []DetectBand       `json:"baselines"`
	// Late counts calls that waited for an in-flight slot.
	Late int64 `json:"late"`
	// InputHints counts the seconds the model's cause hint blamed its
	// inputs (inputs_grew, input_shape_changed), by hint: the load never
	// changes them, so every one is false and fails the run.
	InputHints map[string]int `json:"input_hints"`
	// PollErrors counts failed polls of infergate's admin API.
	PollErrors int    `json:"poll_errors"`
	LastError  string `json:"last_poll_error,omitempty"`
	Verdict    string `json:"verdict"`
}

func newDetectReport(cfg DetectConfig, start time.Time) *DetectReport {
	return &DetectReport{Model: DetectModel, Scale: cfg.Scale, Days: cfg.Days, RateMin: cfg.RateMin, LightRate: cfg.LightRate,
		SimStart: start.UTC().Format("Mon 2006-01-02 15:04 MST")}
}

// firedSince reports whether rule reached firing after at.
func (r *DetectReport) firedSince(w *detectWatch, rule string, at float64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, t := range w.trans {
		if t.Name == rule && t.To == "firing" && t.At >= at {
			return true
		}
	}
	return false
}

// finish copies the watch's records, fills the rows and judges them.
func (r *DetectReport) finish(w *detectWatch, secs []DetectSecond, late int64) {
	w.mu.Lock()
	r.Transitions = append([]DetectTransition(nil), w.trans...)
	r.Bands = append([]DetectBand(nil), w.bands...)
	scrapes := append([]detectScrape(nil), w.scrapes...)
	r.PollErrors = w.errs
	r.InputHints = map[string]int{}
	for h, n := range w.inputHints {
		r.InputHints[h] = n
	}
	if w.lastErr != nil {
		r.LastError = w.lastErr.Error()
	}
	w.mu.Unlock()
	sort.Slice(secs, func(i, j int) bool { return secs[i].At < secs[j].At })
	r.Seconds, r.Late = secs, late
	for i := range r.Incidents {
		in := &r.Incidents[i]
		end := in.HealedAt
		if i+1 < len(r.Incidents) {
			end = r.Incidents[i+1].InjectedAt
		}
		in.Prom = estimateProm(scrapes, in.InjectedAt, in.HealedAt, 5*time.Minute, 5*time.Minute)
		if in.Kind == DetectErrors || in.Kind == DetectGPU {
			in.Prom.Text = "n/a (a latency rule; " + in.Prom.Text + ")"
		}
		r.judgeIncident(in, end)
	}
	r.Phases = nil
	if r.ColdEnd > 0 {
		r.Phases = append(r.Phases, r.phase("cold start: a fresh infergate, load ramping from zero", 0, r.ColdEnd, "0 false alerts"))
	}
	if r.DaysEnd > 0 {
		r.Phases = append(r.Phases, r.phase("learning days", r.ColdEnd, r.LearnEnd, "-"),
			r.phase("judged normal days", r.LearnEnd, r.DaysEnd, "0 false alerts"))
	}
	if r.LightTo > r.LightFrom {
		r.Phases = append(r.Phases, r.phase(fmt.Sprintf("steady light load %s calls/s", report.Rate(r.LightRate)),
			r.LightFrom, r.LightTo, "0 false alerts"))
	}
	r.TrendRule = "trend rule: not in the default set (the creep can only fire ModelLatencyAboveBaseline once it " +
		"crosses the band; a kind: trend rule would watch the slope)"
	r.Verdict = SoakPass
	for _, in := range r.Incidents {
		if in.Verdict == SoakFail {
			r.Verdict = SoakFail
		}
	}
	for _, p := range r.Phases {
		if p.Verdict == SoakFail {
			r.Verdict = SoakFail
		}
	}
	if len(r.InputHints) > 0 {
		r.Verdict = SoakFail
	}
}

func (r *DetectReport) judgeIncident(in *DetectIncidentRow, end float64) {
	in.ToPending, in.ToFiring = -1, -1
	seen := map[string]bool{}
	for _, t := range r.Transitions {
		if t.At < in.InjectedAt || t.At > end {
			continue
		}
		if t.Name == in.Rule && t.At <= in.HealedAt+0.5 {
			if t.To == "pending" && in.ToPending < 0 {
				in.ToPending = t.At - in.InjectedAt
			}
			if t.To == "firing" && in.ToFiring < 0 {
				in.ToFiring = t.At - in.InjectedAt
			}
		}
		if t.To == "firing" && !seen[t.Name] {
			seen[t.Name] = true
			in.Fired = append(in.Fired, fmt.Sprintf("%s %s", t.Name, fmtSecs(t.At-in.InjectedAt)))
		}
	}
	in.Target, in.Verdict = "-", "-"
	judge := func(limit time.Duration, minRate float64) {
		in.Target = "firing <= " + limit.String()
		if minRate > 0 {
			in.Target += fmt.Sprintf(" at >= %s calls/s", report.Rate(minRate))
		}
		in.Verdict = SoakFail
		if in.ToFiring >= 0 && in.ToFiring <= limit.Seconds() && in.Rate >= minRate {
			in.Verdict = SoakPass
		}
	}
	switch in.Kind {
	case DetectReference:
		judge(DetectRefTarget, 100)
	case DetectErrors:
		judge(DetectErrorsTarget, 0)
	}
}

// phase counts the alerts that went pending or firing in [from, to).
func (r *DetectReport) phase(name string, from, to float64, target string) DetectPhaseRow {
	p := DetectPhaseRow{Name: name, From: from, To: to, Target: target, Verdict: "-"}
	rules := map[string]int{}
	for _, t := range r.Transitions {
		if t.At < from || t.At >= to {
			continue
		}
		switch t.To {
		case "firing":
			p.Firings++
			rules[t.Name]++
		case "pending":
			p.Pendings++
		}
	}
	for n, c := range rules {
		p.Rules = append(p.Rules, fmt.Sprintf("%s x%d", n, c))
	}
	sort.Strings(p.Rules)
	if target != "-" {
		p.Verdict = SoakPass
		if p.Firings > 0 {
			p.Verdict = SoakFail
		}
	}
	return p
}

func delayCell(s float64) string {
	if s < 0 {
		return "-"
	}
	return fmtSecs(s)
}

// Table returns one row per incident and per phase.
func (r *DetectReport) Table() report.Table {
	t := report.Table{
		Header:   []string{"what", "injected at", "to pending", "to firing", "rule", "Prometheus rule (p99 > 1.25x, for: 5m)", "target", "verdict"},
		LeftCols: 8, // all text
	}
	for _, in := range r.Incidents {
		rule := in.Rule
		if len(in.Fired) > 0 {
			rule += " (fired: " + strings.Join(in.Fired, ", ") + ")"
		}
		t.Rows = append(t.Rows, []string{
			fmt.Sprintf("%s: %s", in.Kind, in.What),
			fmt.Sprintf("%s (sim %s, %s calls/s)", fmtAt(secs(in.InjectedAt)), in.SimAt, report.Rate(in.Rate)),
			delayCell(in.ToPending), delayCell(in.ToFiring), rule, in.Prom.Text, in.Target, in.Verdict,
		})
	}
	for _, p := range r.Phases {
		fired := fmt.Sprintf("%d firing, %d pending", p.Firings, p.Pendings)
		if len(p.Rules) > 0 {
			fired += " (" + strings.Join(p.Rules, ", ") + ")"
		}
		t.Rows = append(t.Rows, []string{
			p.Name, fmt.Sprintf("%s - %s", fmtAt(secs(p.From)), fmtAt(secs(p.To))), "-", "-", fired, "-", p.Target, p.Verdict,
		})
	}
	return t
}

// Markdown renders the report.
func (r *DetectReport) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "## Detect: %s, %g compressed days at ×%g (a simulated day per %s), incidents, light load\n\n",
		r.Model, r.Days, r.Scale, fmtAt(secs(86400/r.Scale)))
	fmt.Fprintf(&b, "Simulated clock starts %s (infergate's baseline clock). Load: open loop, %s..%s calls/s "+
		"(weekends lower); delay +0..%g ms, weekday peak 09:00–11:00. Rules: infergate's defaults. "+
		"Times are real time since injection, alerts polled every 250 ms.\n\n",
		r.SimStart, report.Rate(r.RateMin), report.Rate(r.RateMin*1.6), detectPeakDelay)
	b.WriteString(r.Table().Markdown())
	b.WriteString("\n" + r.TrendRule + ".\n")
	b.WriteString("Prometheus rule: histogram_quantile(0.99, sum by (le) (rate(infergate_request_duration_seconds_bucket{model=\"" +
		r.Model + "\"}[5m]))) > T, for: 5m, T = 1.25 × its value at injection, evaluated offline on 5 s scrapes of this run. " +
		"An incident held only until infergate fires is over long before for: 5m can elapse; the column says whether " +
		"the rate[5m] condition had even become true by then.\n")
	if bl := r.BaselineAtEnd; bl != nil {
		fmt.Fprintf(&b, "Baseline at the end of the days: source %s, %d hours of the week learned, %d weeks; "+
			"p99 %.0f ms, up above %.0f ms; p50 %.0f ms, up above %.0f ms.\n",
			bl.Source, bl.Hours, bl.Weeks, bl.Median, bl.UpAbove, bl.P50, bl.P50Up)
		if bl.Hours == 0 {
			// monitor/baseline learns an hour from at least 2 samples,
			// and infergate's correlator observes once a second.
			fmt.Fprintf(&b, "No hour of the week was learned: an hour needs 2 samples (one a second), "+
				"and at ×%g a simulated hour lasts %s, so only the recent level decides.\n",
				r.Scale, fmtAt(secs(3600/r.Scale)))
		}
	}
	fmt.Fprintf(&b, "False input hints (seconds the cause hint blamed unchanged inputs): %d inputs_grew, %d input_shape_changed.\n",
		r.InputHints["inputs_grew"], r.InputHints["input_shape_changed"])
	if r.Late > 0 || r.PollErrors > 0 {
		fmt.Fprintf(&b, "%d calls waited for an in-flight slot; %d failed polls of the admin API (%s).\n", r.Late, r.PollErrors, r.LastError)
	}
	fmt.Fprintf(&b, "\nVerdict: %s\n", r.Verdict)
	return b.String()
}

// Panels plots client p99 per second against the baseline band, and the
// alert states, over the run (minutes).
func (r *DetectReport) Panels() []report.Panel {
	// At most ~600 points a series: the largest p99 of each bucket, so a
	// spike stays visible.
	n := len(r.Seconds)
	per := max(1, n/600)
	var x, p99 []float64
	for i := 0; i < n; i += per {
		m := math.NaN() // dropped by the plot when no call succeeded
		for _, s := range r.Seconds[i:min(n, i+per)] {
			if s.OK > 0 && (math.IsNaN(m) || s.P99 > m) {
				m = s.P99
			}
		}
		x, p99 = append(x, r.Seconds[i].At/60), append(p99, m)
	}
	bper := max(1, len(r.Bands)/600)
	var bx, med, up []float64
	for i := 0; i < len(r.Bands); i += bper {
		bd := r.Bands[i]
		bx, med, up = append(bx, bd.At/60), append(med, nanIfZero(bd.Median)), append(up, nanIfZero(bd.UpAbove))
	}
	lat := report.Panel{
		Title: "recsys: client p99 per second and infergate's p99 baseline", XLabel: "minutes", YLabel: "ms",
		Series: []report.Series{
			{Name: "client p99", X: x, Y: p99},
			{Name: "baseline p99 median", X: bx, Y: med, Reference: true},
			{Name: "baseline p99 up above", X: bx, Y: up, Reference: true},
		},
	}
	states := report.Panel{Title: "alert states (0 none, 0.5 pending, 1 firing; one rule per step of 2)", XLabel: "minutes", YLabel: "rule + state"}
	names := []string{RuleLatency, RuleErrors, RuleGPU}
	for _, t := range r.Transitions {
		if !containsString(names, t.Name) {
			names = append(names, t.Name)
		}
	}
	end := 0.0
	if len(r.Seconds) > 0 {
		end = r.Seconds[len(r.Seconds)-1].At / 60
	}
	level := map[string]float64{"pending": 0.5, "firing": 1}
	for k, name := range names {
		off := float64(2 * k)
		// Several alerts of one rule (per model, per GPU) take the
		// highest state; steps drawn as pairs of points.
		cur := map[string]string{}
		xs, ys := []float64{0}, []float64{off}
		last := off
		for _, t := range r.Transitions {
			if t.Name != name {
				continue
			}
			cur[t.Fingerprint] = t.To
			v := off
			for _, s := range cur {
				v = math.Max(v, off+level[s])
			}
			xs, ys = append(xs, t.At/60, t.At/60), append(ys, last, v)
			last = v
		}
		xs, ys = append(xs, end), append(ys, last)
		states.Series = append(states.Series, report.Series{Name: name, X: xs, Y: ys})
	}
	return []report.Panel{lat, states}
}

func nanIfZero(v float64) float64 {
	if v == 0 {
		return math.NaN()
	}
	return v
}

func containsString(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// writeDetectPlots writes detect.png and detect.svg into dir.
func writeDetectPlots(dir string, r *DetectReport) error {
	for _, ext := range []string{report.FormatPNG, report.FormatSVG} {
		if err := report.WritePlot(filepath.Join(dir, "detect."+ext), r.Panels()); err != nil {
			return err
		}
	}
	return nil
}

// WritePlots writes detect.png and detect.svg into dir.
func (r *DetectReport) WritePlots(dir string) error { return writeDetectPlots(dir, r) }
