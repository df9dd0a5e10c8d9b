package alert

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/infergate/infergate/alert/notify"
	"github.com/infergate/infergate/monitor/baseline"
	"github.com/infergate/infergate/monitor/correlate"
	"github.com/infergate/infergate/monitor/gpu"
)

// summaryCase is one alert kind's life for TestSummaryTrueAtEverySecond:
// healthy, bad (each state for five seconds, so the worst value is not
// the last), then healthy until the alert resolves.
type summaryCase struct {
	kind string
	// rules are the case's rules; nil means the built-in ones.
	rules          []RuleConfig
	alert, subject string
	// learn, when set, learns what must be learned (a baseline) first;
	// healthy sets the data of a healthy subject; bad are the
	// successive bad states.
	learn   func(r *rig)
	healthy func(r *rig)
	bad     []func(r *rig)
	// worst is the value that fired, as the summary says it.
	worst string
	// words: the kind's value is in words (a hint, throttling), not a
	// number against a bound.
	words bool
}

const summaryTemplate = "{{.Labels.model}}{{.Labels.gpu}}: {{.Summary}}"

// summaryRule is a rule of conds (compound when several) kept firing 30s
// after its condition stops holding, with the built-in rules' summary.
func summaryRule(name string, conds ...Condition) RuleConfig {
	rc := RuleConfig{Name: name, KeepFiringFor: 30 * time.Second, Annotations: map[string]string{"summary": summaryTemplate}}
	if len(conds) == 1 {
		rc.Condition = conds[0]
	} else {
		rc.All = conds
	}
	return rc
}

func summaryCases() []summaryCase {
	slow := func(p50, p99 float64) func(r *rig) {
		return func(r *rig) { r.src.set("m", calls(1000, ms(p50), ms(p99), nil)) }
	}
	failing := func(n uint64) func(r *rig) {
		return func(r *rig) { r.src.set("m", calls(500, ms(10), ms(20), map[string]uint64{"Internal": n})) }
	}
	busy := func(util float64) func(r *rig) {
		return func(r *rig) { r.gpus = []gpu.Device{{UUID: "GPU-1", Utilization: util, Known: gpu.FieldUtilization}} }
	}
	rising := func(r *rig) {
		// p99 up 1ms a second (60ms/min) for a minute.
		for i := range 60 {
			r.src.set("m", calls(1000, ms(50), ms(150+float64(i)), nil))
			r.checkedRun(time.Second)
		}
	}
	return []summaryCase{
		{kind: KindThreshold, rules: []RuleConfig{summaryRule("HighP99",
			Condition{Kind: KindThreshold, Quantile: "p99", Window: 10 * time.Second, Value: "500ms"})},
			alert: "HighP99", subject: "m", healthy: slow(100, 300), bad: []func(*rig){slow(100, 800), slow(100, 900), slow(100, 700)},
			worst: "900ms"},
		// The built-in latency rule, on a slow replica of the model's
		// pool that the picker leaves: the summary names it while the
		// alert lives, even once the evidence no longer does.
		{kind: KindBaseline, alert: "ModelLatencyAboveBaseline", subject: "m",
			learn: func(r *rig) {
				for range 300 {
					r.c.add(time.Second)
					r.bs.Observe("m", baseline.Sample{0.1, 0.12, 0.15}, false)
				}
			},
			healthy: func(r *rig) {
				slow(100, 150)(r)
				r.models = nil
			},
			bad: []func(*rig){
				func(r *rig) {
					slow(180, 300)(r)
					r.models = []correlate.ModelState{{Model: "m", Hint: correlate.HintOneEndpointSlow,
						SlowEndpoint: &correlate.SlowEndpoint{Endpoint: "10.0.3.7:8001", Ratio: 3.5,
							Note: "one endpoint slow: 10.0.3.7:8001 is 3.5x the pool's p99 for m"}}}
				},
				slow(120, 200),
			},
			worst: "180ms"},
		// The built-in error rule: 5% failing, then 1.4% (over the bound,
		// but not with confidence: it no longer holds).
		{kind: KindErrors, alert: "ModelErrorRatio", subject: "m", healthy: failing(0),
			bad: []func(*rig){failing(25), failing(40), failing(7)}, worst: "8.00%"},
		{kind: KindTrend, rules: []RuleConfig{summaryRule("Creep",
			Condition{Kind: KindTrend, Quantile: "p99", Window: time.Minute, Slope: "10ms/min"})},
			alert: "Creep", subject: "m", healthy: slow(50, 150), bad: []func(*rig){rising, slow(50, 210)}},
		{kind: KindGPU, rules: []RuleConfig{summaryRule("GPUBusy",
			Condition{Kind: KindGPU, Field: "utilization", Value: "0.9"})},
			alert: "GPUBusy", subject: "GPU-1", healthy: busy(0.5), bad: []func(*rig){busy(0.97), busy(0.99), busy(0.95)},
			worst: "99.00%"},
		{kind: KindHint, rules: []RuleConfig{summaryRule("GPUCause",
			Condition{Kind: KindHint, Hints: []string{correlate.HintGPUSaturated}})},
			alert: "GPUCause", subject: "m",
			healthy: func(r *rig) { r.models = []correlate.ModelState{{Model: "m", Hint: correlate.HintNone}} },
			bad: []func(*rig){func(r *rig) {
				dev := gpu.Device{UUID: "GPU-1", Utilization: 0.97, Known: gpu.FieldUtilization}
				r.models = []correlate.ModelState{{Model: "m", Hint: correlate.HintGPUSaturated, GPU: &dev}}
			}},
			words: true},
		{kind: KindInputSize, rules: []RuleConfig{summaryRule("InputsGrew", Condition{Kind: KindInputSize})},
			alert: "InputsGrew", subject: "m",
			healthy: func(r *rig) {
				slow(10, 20)(r)
				r.models = []correlate.ModelState{{Model: "m", Inputs: inputState(100, 1<<20, 1<<20)}}
			},
			bad: []func(*rig){func(r *rig) {
				r.models = []correlate.ModelState{{Model: "m", Inputs: inputState(100, 4<<20, 1<<20)}}
			}}},
		{kind: KindCompound, rules: []RuleConfig{summaryRule("SlowAndFailing",
			Condition{Kind: KindThreshold, Quantile: "p99", Window: 10 * time.Second, Value: "100ms"},
			Condition{Kind: KindErrors, Ratio: "1%", Codes: []string{"Internal"}})},
			alert: "SlowAndFailing", subject: "m",
			healthy: func(r *rig) { r.src.set("m", calls(500, ms(10), ms(20), nil)) },
			bad: []func(*rig){func(r *rig) {
				r.src.set("m", calls(500, ms(10), ms(300), map[string]uint64{"Internal": 25}))
			}}},
		// A release rolled back, then restarted. (Its words without the
		// "; " that checkSummary splits the summary's clauses at.)
		{kind: KindVersionRegression, rules: []RuleConfig{summaryRule("Regression", Condition{Kind: KindVersionRegression})},
			alert: "Regression", subject: "m",
			healthy: func(r *rig) { r.rel.set(ReleaseState{Model: "m"}) },
			bad: []func(*rig){func(r *rig) {
				r.rel.set(ReleaseState{Model: "m", RolledBack: true, Reason: strings.ReplaceAll(regressionWords, "; ", ", "), At: r.c.now()})
			}},
			words: true},
		// The anomaly rule, on a model whose detector has learnt its
		// noise: its calls halve at flat latency, then fall to a third,
		// then come back. The cause is the detector's explanation.
		{kind: KindAnomaly, rules: []RuleConfig{summaryRule("Anomaly", Condition{Kind: KindAnomaly})},
			alert: "Anomaly", subject: "m",
			learn: func(r *rig) {
				sm := newSynth(1)
				for range 400 {
					sm.second(r, true)
					r.c.add(time.Second)
					r.e.Step()
				}
				r.anomalySynth = sm
			},
			healthy: func(r *rig) { r.anomalySynth.callsX = 1 },
			bad: []func(*rig){
				func(r *rig) { r.anomalySynth.callsX = 0.5 },
				func(r *rig) { r.anomalySynth.callsX = 0.3 },
			}},
	}
}

// TestSummaryCoversEveryKind: every condition kind, and compound rules,
// has its case in TestSummaryTrueAtEverySecond.
func TestSummaryCoversEveryKind(t *testing.T) {
	var have []string
	for _, c := range summaryCases() {
		have = append(have, c.kind)
	}
	for _, k := range conditionKinds {
		if !slices.Contains(have, k.name) {
			t.Errorf("kind %s has no case in summaryCases", k.name)
		}
	}
	if !slices.Contains(have, KindCompound) {
		t.Errorf("compound rules have no case in summaryCases")
	}
}

// TestSummaryTrueAtEverySecond: for every alert kind, at every second of
// an alert's life (pending, firing, firing while it recovers, resolved),
// its summary states a value past its bound and when it was (the value
// and threshold of the API), and what it says of now holds: "still
// over" while the condition holds, "recovering (resolves at T if it
// stays below)" only when the value now is below its bound and T is when
// the alert resolves. No summary reads as a comparison that does not
// hold.
func TestSummaryTrueAtEverySecond(t *testing.T) {
	for _, tc := range summaryCases() {
		t.Run(tc.kind, func(t *testing.T) {
			var cfg Config
			cfg.Rules = tc.rules
			cfg.Route = &RouteConfig{Receiver: "log", GroupWait: time.Second, GroupInterval: time.Second}
			r := newRig(t, &cfg)
			r.check = func(a AlertView) { checkSummary(t, r.c.t, tc, a) }
			r.checkAlert, r.checkSubject = tc.alert, tc.subject
			if tc.learn != nil {
				tc.learn(r)
			}
			tc.healthy(r)
			r.checkedRun(20 * time.Second)
			if len(r.seen) > 0 {
				t.Fatalf("healthy: %q", r.seen)
			}
			for _, bad := range tc.bad {
				bad(r)
				r.checkedRun(5 * time.Second)
			}
			if r.state(tc.alert, tc.subject) != StateFiring {
				t.Fatalf("after the bad states: %q, want firing; %+v", r.state(tc.alert, tc.subject), r.e.Alerts())
			}
			tc.healthy(r)
			for i := 0; r.state(tc.alert, tc.subject) != ""; i++ {
				if i > 300 {
					t.Fatalf("not resolved 5m after the recovery: %+v", r.e.Alerts())
				}
				r.checkedRun(time.Second)
			}
			var still, recovering bool
			for _, s := range r.seen {
				still = still || strings.Contains(s, "still ")
				recovering = recovering || strings.Contains(s, "recovering (resolves at ")
			}
			if !still || !recovering {
				t.Errorf("summaries never said still (%v) or recovering (%v): %q", still, recovering, r.seen)
			}
			// The resolved notice says so, with the value that fired.
			r.run(5 * time.Second)
			msgs, _ := r.sink.take()
			var resolved string
			for _, m := range msgs {
				for _, a := range m.Alerts {
					if a.Status == notify.StatusResolved && a.Name == tc.alert {
						resolved = a.Annotations["summary"]
					}
				}
			}
			if !strings.Contains(resolved, ", resolved at ") || (!tc.words && !firedRE.MatchString(strings.Split(resolved, "; ")[0])) {
				t.Errorf("resolved notice: %q", resolved)
			}
			t.Logf("firing: %s", r.seen[0])
			t.Logf("recovering: %s", r.seen[len(r.seen)-1])
			t.Logf("resolved: %s", resolved)
		})
	}
}

var (
	// firedRE is a value against its bound: measure, value, time,
	// comparison, bound, threshold.
	firedRE = regexp.MustCompile(`([A-Za-z][\w ]*?) (\S+) at (\d\d:\d\d:\d\d), (over|at or over|under|at or under) its (baseline bound|bound|SLO) (\S+?)(?: \([^)]*\))?(?: and |$)`)
	// wordsRE is a value in words and its time.
	wordsRE = regexp.MustCompile(` at (\d\d:\d\d:\d\d)$`)
	// recoveringRE is what a recovering alert says of now.
	recoveringRE = regexp.MustCompile(`^now (.+), recovering \(resolves at (\d\d:\d\d:\d\d) if it stays (below|above)\)$`)
)

// checkSummary checks the summary of a at now against its fields and
// evidence (see TestSummaryTrueAtEverySecond).
func checkSummary(t *testing.T, now time.Time, tc summaryCase, a AlertView) {
	t.Helper()
	summary := a.Annotations["summary"]
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("%s at %s (%s): %q: %s", a.Name, now.Format("15:04:05"), a.State, summary, strings.TrimSpace(
			strings.ReplaceAll(strings.ReplaceAll(fmt.Sprintf(format, args...), "\n", " "), "  ", " ")))
	}
	prefix := tc.subject + ": "
	if !strings.HasPrefix(summary, prefix) {
		fail("does not start with %q", prefix)
	}
	clauses := strings.Split(strings.TrimPrefix(summary, prefix), "; ")
	if len(clauses) < 2 {
		fail("want what fired; where it stands now")
	}
	fired, nowIs := clauses[0], clauses[1]
	clockOf := func(s string) time.Time {
		t, err := time.ParseInLocation("15:04:05", s, now.Location())
		if err != nil {
			fail("time %q: %v", s, err)
		}
		y, m, d := now.Date()
		return time.Date(y, m, d, t.Hour(), t.Minute(), t.Second(), 0, now.Location())
	}
	// What fired: a value past its bound, when the alert was active.
	var at string
	if tc.words {
		m := wordsRE.FindStringSubmatch(fired)
		if m == nil || strings.Contains(fired, " over ") || !strings.HasSuffix(fired, " "+a.Value+" at "+m[1]) {
			fail("want a value in words (%q) and its time", a.Value)
		}
		at = m[1]
	} else {
		ms := firedRE.FindAllStringSubmatch(fired, -1)
		if len(ms) == 0 || strings.Join(firedRE.Split(fired, -1), "") != "" {
			fail("want values past their bounds and when, and nothing else")
		}
		for _, m := range ms {
			v, b := amount(t, m[2]), amount(t, m[6])
			if !compare(map[string]string{"over": ">", "at or over": ">=", "under": "<", "at or under": "<="}[m[4]], v, b) {
				fail("%s %s is not %s %s", m[1], m[2], m[4], m[6])
			}
		}
		if m := ms[0]; m[2] != a.Value || m[6] != a.Threshold {
			fail("value %s, threshold %s; the API says %s and %s", m[2], m[6], a.Value, a.Threshold)
		}
		if tc.worst != "" && ms[0][2] != tc.worst && a.State == StateFiring && strings.Contains(nowIs, "recovering") {
			fail("the value that fired is %s, want the worst, %s", ms[0][2], tc.worst)
		}
		at = ms[0][3]
	}
	when := clockOf(at)
	if when.After(now) || when.Before(a.ActiveSince.Truncate(time.Second)) || a.ValueAt.Format("15:04:05") != at {
		fail("at %s: want a time the alert was active (since %s), as value_at (%s)", at, a.ActiveSince.Format("15:04:05"), a.ValueAt.Format("15:04:05"))
	}
	// Where it stands now.
	holds := make([]string, len(a.Evidence.Conditions))
	for i, c := range a.Evidence.Conditions {
		holds[i] = c.Holds
	}
	switch {
	case strings.Contains(nowIs, "still "):
		if slices.Contains(holds, "false") || slices.Contains(holds, "unknown") {
			fail("still, but the evidence holds %v", holds)
		}
		if !strings.HasPrefix(nowIs, "now "+a.Current+", ") && len(holds) == 1 {
			fail("current %q", a.Current)
		}
	case strings.Contains(nowIs, "recovering"):
		if a.State != StateFiring || a.ResolvesAt.IsZero() || !a.ResolvesAt.After(now) {
			fail("recovering, but %s, resolves_at %v", a.State, a.ResolvesAt)
		}
		if slices.Contains(holds, "true") {
			fail("recovering, but the evidence holds %v", holds)
		}
		m := recoveringRE.FindStringSubmatch(nowIs)
		if m == nil {
			if !strings.Contains(nowIs, "no longer holds, recovering (resolves at "+a.ResolvesAt.Format("15:04:05")+" unless it holds again)") {
				fail("recovering in other words")
			}
			break
		}
		if m[2] != a.ResolvesAt.Format("15:04:05") || m[1] != a.Current {
			fail("resolves at %s, now %s; the API says %v and %s", m[2], m[1], a.ResolvesAt, a.Current)
		}
		c := a.Evidence.Conditions[0]
		if v, b := amount(t, c.Value), amount(t, c.Threshold); (m[3] == "below") == (v > b) {
			fail("stays %s, but the value now is %s against %s", m[3], c.Value, c.Threshold)
		}
	default:
		fail("says neither still nor recovering")
	}
}

// amount parses a value as a summary writes it: a duration ("31.2ms"),
// a slope ("12ms/min"), a ratio ("5.00%"), a rate ("3.2/s"), degrees
// ("91°C") or a number.
func amount(t *testing.T, s string) float64 {
	t.Helper()
	trim := func(suffix string) (string, bool) { return strings.TrimSuffix(s, suffix), strings.HasSuffix(s, suffix) }
	if d, ok := trim("/min"); ok {
		v, err := time.ParseDuration(d)
		if err != nil {
			t.Fatalf("amount %q: %v", s, err)
		}
		return v.Seconds()
	}
	for suffix, scale := range map[string]float64{"%": 0.01, "/s": 1, "°C": 1} {
		if n, ok := trim(suffix); ok {
			v, err := strconv.ParseFloat(n, 64)
			if err != nil {
				t.Fatalf("amount %q: %v", s, err)
			}
			return v * scale
		}
	}
	if d, err := time.ParseDuration(s); err == nil {
		return d.Seconds()
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("amount %q: not a value", s)
	}
	return v
}

// TestSummaryCause: the summary names the cause the evidence has: a slow
// endpoint, inputs that grew, the GPU.
func TestSummaryCause(t *testing.T) {
	dev := &GPUEvidence{UUID: "GPU-1", Utilization: 0.97, MemoryRatio: 0.97, Throttled: []string{"hw_thermal_slowdown"}}
	for _, tc := range []struct {
		ev   Evidence
		want string
	}{
		{Evidence{CauseHint: correlate.HintOneEndpointSlow, SlowEndpoint: "one endpoint slow: 10.0.3.7:8001 is 3.5x the pool's p99"},
			"one endpoint slow: 10.0.3.7:8001 is 3.5x the pool's p99"},
		{Evidence{CauseHint: correlate.HintInputsGrew, Inputs: &InputsEvidence{RequestBytesP90: 1 << 22, BaselineRequestBytesP90: 1 << 20, Moved: correlate.HintInputsGrew}},
			"inputs grew: request bytes p90 ≤ 4194304 vs usual ≤ 1048576"},
		{Evidence{CauseHint: correlate.HintInputShapeChanged, Inputs: &InputsEvidence{RequestBytesP90: 1 << 20, BaselineRequestBytesP90: 1 << 20,
			RowsP90: 4, BaselineRowsP90: 32, Moved: correlate.HintInputShapeChanged}},
			"input shape changed: request bytes p90 ≤ 1048576 vs usual ≤ 1048576, rows p90 ≤ 4 vs usual ≤ 32"},
		{Evidence{CauseHint: correlate.HintGPUSaturated, GPU: dev}, "GPU saturated: GPU-1 97% busy"},
		{Evidence{CauseHint: correlate.HintGPUThrottled, GPU: dev}, "GPU throttled: GPU-1 (hw_thermal_slowdown)"},
		{Evidence{CauseHint: correlate.HintGPUMemoryPressure, GPU: dev}, "GPU memory pressure: GPU-1 97% of its memory used"},
		{Evidence{CauseHint: correlate.HintNotGPU, GPU: &GPUEvidence{UUID: "GPU-1", Utilization: 0.3}}, "not the GPU: GPU-1 30% busy"},
		{Evidence{CauseHint: correlate.HintGPUSaturated}, "cause hint gpu_saturated"},
		{Evidence{CauseHint: correlate.HintUnknown, GPU: dev}, ""},
		{Evidence{CauseHint: correlate.HintNone}, ""},
	} {
		if got := causeOf(tc.ev); got != tc.want {
			t.Errorf("causeOf(%s) = %q, want %q", tc.ev.CauseHint, got, tc.want)
		}
	}
}

// TestSummaryNamesTheSlowEndpoint: the built-in latency alert on a model
// with a slow replica names it in every summary of its life, also once
// the evidence no longer does (the picker moved the calls away).
func TestSummaryNamesTheSlowEndpoint(t *testing.T) {
	tc := summaryCases()[1]
	r := newRig(t, &Config{})
	tc.learn(r)
	tc.healthy(r)
	r.run(10 * time.Second)
	tc.bad[0](r)
	r.run(2 * time.Second)
	r.models = nil // the picker moved the calls; the endpoint is no longer named
	tc.healthy(r)
	r.run(time.Second)
	for r.state(tc.alert, "m") != "" {
		a := r.e.Alerts()[0]
		if s := a.Annotations["summary"]; !strings.Contains(s, "one endpoint slow: 10.0.3.7:8001 is 3.5x the pool's p99") ||
			!strings.Contains(s, "(seen at ") {
			t.Fatalf("%s: %q, want the slow endpoint, seen earlier", a.State, s)
		}
		r.run(time.Second)
	}
}

// TestSummaryWithoutVerdict: an alert whose model has too few calls to
// judge, or none in its windows, says it has no verdict and when it
// resolves without one, not where it stood before.
func TestSummaryWithoutVerdict(t *testing.T) {
	r := newRig(t, &Config{Rules: []RuleConfig{summaryRule("HighP99",
		Condition{Kind: KindThreshold, Quantile: "p99", Window: 10 * time.Second, Value: "500ms"})}})
	r.src.set("m", calls(1000, ms(100), ms(800), nil))
	r.run(3 * time.Second)
	r.src.set("m", calls(5, ms(100), ms(800), nil))
	r.run(time.Second)
	s := r.e.Alerts()[0].Annotations["summary"]
	if !strings.Contains(s, "p99 800ms at 14:00:01, over its bound 500ms; now no verdict: too few calls") ||
		!strings.Contains(s, "without one it resolves at 14:05:03") {
		t.Errorf("too few calls: %q", s)
	}
	r.src.drop("m")
	r.run(time.Second)
	s = r.e.Alerts()[0].Annotations["summary"]
	if !strings.Contains(s, "p99 800ms at 14:00:01, over its bound 500ms; now no verdict since 14:00:03; without one it resolves at 14:05:03") {
		t.Errorf("no calls: %q", s)
	}
}
