package alert

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/infergate/infergate/alert/notify"
	"github.com/infergate/infergate/monitor/baseline"
	"github.com/infergate/infergate/monitor/correlate"
	"github.com/infergate/infergate/monitor/gpu"
)

func thresholdRule() RuleConfig {
	return RuleConfig{
		Name:          "HighP99",
		Condition:     Condition{Kind: KindThreshold, Quantile: "p99", Window: time.Minute, Value: "500ms"},
		Severity:      SeverityCritical,
		For:           5 * time.Minute,
		KeepFiringFor: 30 * time.Second,
		Annotations:   map[string]string{"summary": "{{.Labels.model}} p99 {{.Value}} > {{.Threshold}}"},
	}
}

func TestThresholdLifecycle(t *testing.T) {
	r := newRig(t, &Config{Rules: []RuleConfig{thresholdRule()}, Route: &RouteConfig{Receiver: "log", GroupWait: time.Second}})
	r.src.set("resnet50", calls(6000, ms(100), ms(300), nil))
	r.run(time.Minute)
	if got := r.e.Alerts(); len(got) != 0 {
		t.Fatalf("healthy model has alerts: %+v", got)
	}
	r.src.set("resnet50", calls(6000, ms(100), ms(800), nil))
	r.run(10 * time.Second)
	if s := r.state("HighP99", "resnet50"); s != StatePending {
		t.Fatalf("after 10s over: %q, want pending", s)
	}
	r.run(4*time.Minute + 40*time.Second)
	if s := r.state("HighP99", "resnet50"); s != StatePending {
		t.Fatalf("at 4m50s over: %q, want still pending (for: 5m)", s)
	}
	if m, _ := r.sink.take(); len(m) != 0 {
		t.Fatalf("notified while pending: %v", m)
	}
	r.run(15 * time.Second)
	if s := r.state("HighP99", "resnet50"); s != StateFiring {
		t.Fatalf("after 5m over: %q, want firing", s)
	}
	msgs, to := r.sink.take()
	if len(msgs) != 1 || to[0] != "log" || msgs[0].Status != notify.StatusFiring {
		t.Fatalf("firing notifications: %v %v", msgs, to)
	}
	a := msgs[0].Alerts[0]
	if a.Labels["model"] != "resnet50" || a.Labels["severity"] != "critical" || a.Annotations["summary"] != "resnet50 p99 800ms > 500ms" {
		t.Errorf("alert = %+v", a)
	}
	// Healthy again: still firing for keep_firing_for, then resolved once.
	r.src.set("resnet50", calls(6000, ms(100), ms(300), nil))
	r.run(20 * time.Second)
	if s := r.state("HighP99", "resnet50"); s != StateFiring {
		t.Fatalf("20s after recovery: %q, want firing (keep_firing_for 30s)", s)
	}
	r.run(40 * time.Second)
	if s := r.state("HighP99", "resnet50"); s != "" {
		t.Fatalf("after recovery: %q, want resolved", s)
	}
	r.run(time.Minute)
	msgs, _ = r.sink.take()
	if len(msgs) != 1 || msgs[0].Status != notify.StatusResolved || msgs[0].Alerts[0].EndsAt.IsZero() {
		t.Fatalf("resolved notifications: %+v", msgs)
	}
}

// TestTooFewCallsNeverFire: a p99 over a hundred calls is their slowest
// call; with no confidence bound the rule decides nothing, however slow.
func TestTooFewCallsNeverFire(t *testing.T) {
	rule := thresholdRule()
	rule.For = 0
	r := newRig(t, &Config{Rules: []RuleConfig{rule}})
	r.src.set("m", calls(5, ms(10), 10*time.Second, nil))
	r.run(10 * time.Minute)
	if got := r.e.Alerts(); len(got) != 0 {
		t.Fatalf("alerts on 5 calls: %+v", got)
	}
	// The same window with enough calls fires.
	r.src.set("m", calls(1200, ms(10), 10*time.Second, nil))
	r.run(2 * time.Second)
	if s := r.state("HighP99", "m"); s != StateFiring {
		t.Fatalf("with 1200 calls: %q, want firing", s)
	}
	// Back to a handful of calls: the alert keeps its state (no verdict).
	r.src.set("m", calls(5, ms(10), ms(10), nil))
	r.run(time.Minute)
	if s := r.state("HighP99", "m"); s != StateFiring {
		t.Fatalf("too few calls resolved the alert: %q", s)
	}
	ev := r.e.Alerts()[0].Evidence.Conditions[0]
	if ev.Holds != "unknown" || !strings.Contains(ev.Note, "too few calls") {
		t.Errorf("evidence = %+v", ev)
	}
	// Five minutes without a verdict: resolved, not firing forever.
	r.run(5 * time.Minute)
	if s := r.state("HighP99", "m"); s != "" {
		t.Fatalf("after 6 minutes without a verdict: %q, want resolved", s)
	}
}

func TestBaselineRule(t *testing.T) {
	r := newRig(t, &Config{Rules: []RuleConfig{{
		Name: "Slow", Condition: Condition{Kind: KindBaseline, Quantile: "p90", AbovePercent: 200},
	}}})
	for range 60 {
		r.c.add(time.Second)
		r.bs.Observe("m", baseline.Sample{0.01, 0.012, 0.03}, false)
	}
	r.src.set("m", calls(1000, ms(12), ms(30), nil))
	r.run(time.Minute)
	if got := r.e.Alerts(); len(got) != 0 {
		t.Fatalf("at baseline: %+v", got)
	}
	r.src.set("m", calls(1000, ms(30), ms(60), nil)) // p90 x2.5: not +200%
	r.run(time.Minute)
	if got := r.e.Alerts(); len(got) != 0 {
		t.Fatalf("at +150%%: %+v", got)
	}
	r.src.set("m", calls(1000, ms(40), ms(80), nil)) // x3.3
	r.run(time.Second)
	if s := r.state("Slow", "m"); s != StateFiring {
		t.Fatalf("at +233%%: %q, want firing", s)
	}
	ev := r.e.Alerts()[0].Evidence
	if ev.Baseline == nil || ev.Baseline.Source != baseline.SourceRecent {
		t.Errorf("evidence baseline = %+v", ev.Baseline)
	}
}

// TestDefaultBaselineRuleReferenceIncident: the built-in rule fires on
// a x1.47 slowdown of every call within one evaluation of the window
// filling, and not on one slow call among many.
func TestDefaultBaselineRuleReferenceIncident(t *testing.T) {
	r := newRig(t, &Config{})
	for range 300 {
		r.c.add(time.Second)
		r.bs.Observe("m", baseline.Sample{0.1, 0.12, 0.15}, false)
	}
	r.src.set("m", calls(500, ms(100), ms(150), nil))
	r.run(time.Minute)
	// One slow call: the p99 of 500 is 2s, its bound is not.
	one := calls(500, ms(100), 2*time.Second, nil)
	one.Bounds[0].Lower[2], one.Bounds[0].Lower[3] = ms(150), ms(150)
	r.src.set("m", one)
	r.run(time.Minute)
	if got := r.e.Alerts(); len(got) != 0 {
		t.Fatalf("one slow call alerted: %+v", got)
	}
	r.src.set("m", calls(500, ms(147), ms(220), nil))
	r.run(time.Second)
	if s := r.state("ModelLatencyAboveBaseline", "m"); s != StateFiring {
		t.Fatalf("x1.47: %q, want firing", s)
	}
}

func TestTrendRule(t *testing.T) {
	r := newRig(t, &Config{Rules: []RuleConfig{{
		Name: "Creep", Condition: Condition{Kind: KindTrend, Quantile: "p99", Window: 5 * time.Minute, Slope: "10ms/min"},
	}}})
	// Flat with noise: no trend.
	for i := range 600 {
		r.src.set("m", calls(1000, ms(50), ms(150+float64(i%7)*3), nil))
		r.run(time.Second)
	}
	if got := r.e.Alerts(); len(got) != 0 {
		t.Fatalf("flat p99 alerted: %+v", got)
	}
	// +20ms/min.
	fired := -1
	for i := range 600 {
		r.src.set("m", calls(1000, ms(50), ms(150+float64(i)/3+float64(i%7)*3), nil))
		r.run(time.Second)
		if fired < 0 && r.state("Creep", "m") == StateFiring {
			fired = i
		}
	}
	if fired < 0 {
		t.Fatalf("+20ms/min never fired: %+v", r.e.Alerts())
	}
	t.Logf("creep fired after %ds", fired)
}

func TestErrorRule(t *testing.T) {
	r := newRig(t, &Config{Rules: []RuleConfig{{
		Name: "Errors", Condition: Condition{Kind: KindErrors, Ratio: "1%", Codes: []string{"Internal"}},
	}}})
	r.src.set("m", calls(500, ms(10), ms(20), map[string]uint64{"Internal": 1, "NotFound": 40}))
	r.run(time.Minute)
	if got := r.e.Alerts(); len(got) != 0 {
		t.Fatalf("0.2%% Internal (and client errors) alerted: %+v", got)
	}
	r.src.set("m", calls(500, ms(10), ms(20), map[string]uint64{"Internal": 25}))
	r.run(time.Second)
	if s := r.state("Errors", "m"); s != StateFiring {
		t.Fatalf("5%% Internal: %q, want firing", s)
	}
	// Too few calls: no verdict either way.
	r2 := newRig(t, &Config{Rules: []RuleConfig{{Name: "Errors", Condition: Condition{Kind: KindErrors, Ratio: "1%"}}}})
	r2.src.set("m", calls(10, ms(10), ms(20), map[string]uint64{"Internal": 5}))
	r2.run(time.Minute)
	if got := r2.e.Alerts(); len(got) != 0 {
		t.Fatalf("5 of 10 calls alerted under min_calls: %+v", got)
	}
}

func TestCompoundGPUAndTrend(t *testing.T) {
	r := newRig(t, &Config{Rules: []RuleConfig{{
		Name: "GPUBusyLatencyRising", Severity: SeverityCritical,
		All: []Condition{
			{Kind: KindGPU, Field: "utilization", Value: "0.9"},
			{Kind: KindThreshold, Quantile: "p99", Value: "100ms"},
		},
	}}})
	dev := gpu.Device{UUID: "GPU-1", Utilization: 0.5, Known: gpu.FieldUtilization}
	r.models = []correlate.ModelState{{Model: "m", GPUUUID: "GPU-1", GPU: &dev}}
	r.src.set("m", calls(1000, ms(50), ms(200), nil))
	r.run(10 * time.Second)
	if got := r.e.Alerts(); len(got) != 0 {
		t.Fatalf("latency alone fired the compound: %+v", got)
	}
	dev.Utilization = 0.95
	r.run(time.Second)
	a := r.e.Alerts()
	if len(a) != 1 || a[0].State != StateFiring || a[0].Labels["gpu"] != "GPU-1" || a[0].Evidence.GPU == nil {
		t.Fatalf("GPU busy and p99 high: %+v", a)
	}
	r.src.set("m", calls(1000, ms(50), ms(60), nil))
	r.run(time.Second)
	if got := r.e.Alerts(); len(got) != 0 {
		t.Fatalf("GPU busy alone kept the compound: %+v", got)
	}
}

// TestGPUFaultOneNotification: one GPU saturates under 50 models whose
// latency rises: the GPU alert inhibits the 50 latency alerts, and one
// notification goes out.
func TestGPUFaultOneNotification(t *testing.T) {
	r := newRig(t, &Config{
		Rules: []RuleConfig{
			{Name: "GPUSaturated", Condition: Condition{Kind: KindGPU, Field: "utilization", Value: "0.95"}, Labels: map[string]string{"kind": "gpu"}},
			{Name: "Latency", Condition: Condition{Kind: KindThreshold, Quantile: "p50", Value: "100ms"}, Labels: map[string]string{"kind": "latency"}},
		},
		Route: &RouteConfig{Receiver: "log", GroupBy: []string{"alertname", "model"}, GroupWait: 2 * time.Second},
	})
	r.gpus = []gpu.Device{{UUID: "GPU-7", Utilization: 0.5, Known: gpu.FieldUtilization}}
	for i := range 50 {
		m := "model-" + string(rune('a'+i/26)) + string(rune('a'+i%26))
		r.models = append(r.models, correlate.ModelState{Model: m, GPUUUID: "GPU-7"})
		r.src.set(m, calls(1000, ms(20), ms(40), nil))
	}
	r.run(10 * time.Second)
	r.gpus[0].Utilization = 0.99
	for i := range 50 {
		m := "model-" + string(rune('a'+i/26)) + string(rune('a'+i%26))
		r.src.set(m, calls(1000, ms(300), ms(600), nil))
	}
	r.run(time.Minute)
	msgs, _ := r.sink.take()
	if len(msgs) != 1 || msgs[0].Alerts[0].Name != "GPUSaturated" {
		var names []string
		for _, m := range msgs {
			names = append(names, m.GroupKey)
		}
		t.Fatalf("%d notifications, want 1 (GPU): %v", len(msgs), names)
	}
	muted := 0
	for _, a := range r.e.Alerts() {
		if strings.HasPrefix(a.Muted, "inhibited by GPUSaturated") {
			muted++
		}
	}
	if muted != 50 {
		t.Errorf("%d latency alerts inhibited, want 50", muted)
	}
}

func TestGroupingAndRepeat(t *testing.T) {
	rule := thresholdRule()
	rule.For = 0
	r := newRig(t, &Config{Rules: []RuleConfig{rule},
		Route: &RouteConfig{Receiver: "log", GroupBy: []string{"alertname"}, GroupWait: 5 * time.Second, GroupInterval: time.Minute, RepeatInterval: 5 * time.Minute}})
	for _, m := range []string{"a", "b", "c"} {
		r.src.set(m, calls(6000, ms(10), ms(900), nil))
	}
	r.run(10 * time.Second)
	msgs, _ := r.sink.take()
	if len(msgs) != 1 || len(msgs[0].Alerts) != 3 {
		t.Fatalf("3 models, group by alertname: %d messages", len(msgs))
	}
	r.run(4*time.Minute + 40*time.Second)
	if msgs, _ := r.sink.take(); len(msgs) != 0 {
		t.Fatalf("re-sent before repeat_interval: %d", len(msgs))
	}
	r.run(20 * time.Second)
	if msgs, _ := r.sink.take(); len(msgs) != 1 {
		t.Fatalf("after repeat_interval: %d messages, want 1", len(msgs))
	}
	// A fourth model joins: one update after group_interval.
	r.src.set("d", calls(6000, ms(10), ms(900), nil))
	r.run(time.Minute + time.Second)
	msgs, _ = r.sink.take()
	if len(msgs) != 1 || len(msgs[0].Alerts) != 4 {
		t.Fatalf("new member: %d messages", len(msgs))
	}
}

func TestSilenceAndAck(t *testing.T) {
	rule := thresholdRule()
	rule.For = 0
	r := newRig(t, &Config{Rules: []RuleConfig{rule}})
	if _, err := r.e.AddSilence(Silence{Matchers: []Matcher{{Name: "model", Value: "res*"}}, EndsAt: r.c.t.Add(time.Hour), Comment: "maintenance"}); err != nil {
		t.Fatal(err)
	}
	r.src.set("resnet50", calls(6000, ms(10), ms(900), nil))
	r.src.set("bert", calls(6000, ms(10), ms(900), nil))
	r.run(time.Minute)
	msgs, _ := r.sink.take()
	if len(msgs) != 1 || msgs[0].Alerts[0].Labels["model"] != "bert" {
		t.Fatalf("silence of res*: %+v", msgs)
	}
	var fp string
	for _, a := range r.e.Alerts() {
		if a.Labels["model"] == "bert" {
			fp = a.Fingerprint
		}
	}
	if _, err := r.e.Ack(fp, "oncall", "looking"); err != nil {
		t.Fatal(err)
	}
	r.run(10 * time.Minute)
	if msgs, _ := r.sink.take(); len(msgs) != 0 {
		t.Fatalf("acknowledged alert repeated: %d", len(msgs))
	}
	// The silence ends after an hour: resnet50 is notified.
	r.run(time.Hour)
	msgs, _ = r.sink.take()
	found := false
	for _, m := range msgs {
		for _, a := range m.Alerts {
			found = found || a.Labels["model"] == "resnet50"
		}
	}
	if !found {
		t.Errorf("resnet50 not notified after its silence ended")
	}
}

func TestEscalationAndSchedules(t *testing.T) {
	rule := thresholdRule()
	rule.For = 0
	rule.Severity = SeverityWarning
	rule.Escalate = &EscalateConfig{After: 10 * time.Minute}
	cfg := &Config{
		Rules:     []RuleConfig{rule},
		Schedules: []ScheduleConfig{{Name: "business", TimeZone: "Europe/Berlin", Weekdays: []string{"monday", "tuesday", "wednesday", "thursday", "friday"}, Start: "09:00", End: "18:00"}},
		Receivers: []notify.ReceiverConfig{{Name: "team-chat"}, {Name: "pager"}, {Name: "pager-secondary"}},
		Route: &RouteConfig{Receiver: "team-chat", GroupWait: time.Second, Routes: []*RouteConfig{
			{Match: map[string]string{"escalated": "true"}, Receiver: "pager-secondary"},
			{Schedule: "business", Receiver: "team-chat"},
			{Schedule: "!business", Receiver: "pager"},
		}},
	}
	r := newRig(t, cfg) // Tuesday 14:00 UTC = 15:00 in Berlin: business hours
	r.src.set("m", calls(6000, ms(10), ms(900), nil))
	r.run(5 * time.Second)
	_, to := r.sink.take()
	if len(to) != 1 || to[0] != "team-chat" {
		t.Fatalf("business hours: %v", to)
	}
	r.run(10 * time.Minute)
	msgs, to := r.sink.take()
	// A repeat to the team at 5m, then the escalation.
	if n := len(to); n != 2 || to[0] != "team-chat" || to[1] != "pager-secondary" || msgs[1].Alerts[0].Labels["severity"] != "critical" {
		t.Fatalf("after 10m: %v", to)
	}
	// Off-hours: a new alert goes to the pager.
	r2 := newRig(t, cfg)
	r2.c.t = time.Date(2026, 11, 3, 22, 0, 0, 0, time.UTC)
	r2.src.set("m", calls(6000, ms(10), ms(900), nil))
	r2.run(5 * time.Second)
	if _, to := r2.sink.take(); len(to) != 1 || to[0] != "pager" {
		t.Fatalf("off-hours: %v", to)
	}
}

// TestRestartDoesNotRepage: a firing, notified alert survives a restart
// through the state file and is not sent again before repeat_interval.
func TestRestartDoesNotRepage(t *testing.T) {
	dir := t.TempDir()
	rule := thresholdRule()
	rule.For = 0
	mk := func() *Config {
		return &Config{Rules: []RuleConfig{rule}, StateFile: filepath.Join(dir, "state.json"),
			Route: &RouteConfig{Receiver: "log", GroupWait: time.Second, RepeatInterval: 10 * time.Minute}}
	}
	r := newRig(t, mk())
	r.src.set("m", calls(6000, ms(10), ms(900), nil))
	r.run(10 * time.Second)
	if msgs, _ := r.sink.take(); len(msgs) != 1 {
		t.Fatalf("first page: %d", len(msgs))
	}
	r.e.Close()
	if _, err := os.Stat(filepath.Join(dir, "state.json")); err != nil {
		t.Fatal(err)
	}
	r2 := newRig(t, mk())
	r2.c.t = r.c.t.Add(30 * time.Second)
	if s := r2.state("HighP99", "m"); s != StateFiring {
		t.Fatalf("restored state: %q", s)
	}
	r2.src.set("m", calls(6000, ms(10), ms(900), nil))
	r2.run(5 * time.Minute)
	if msgs, _ := r2.sink.take(); len(msgs) != 0 {
		t.Fatalf("re-paged after restart: %d", len(msgs))
	}
	r2.run(5 * time.Minute)
	if msgs, _ := r2.sink.take(); len(msgs) != 1 {
		t.Fatalf("repeat after restart: %d, want 1", len(msgs))
	}
}

// fakeActuator records the actions the engine asks for.
type fakeActuator struct{ calls []string }

func (f *fakeActuator) Start(action string, labels map[string]string) (string, error) {
	f.calls = append(f.calls, "start "+action+" "+labels["model"])
	return "fallback " + labels["model"] + " -> edge", nil
}

func (f *fakeActuator) Stop(action string, labels map[string]string) (string, error) {
	f.calls = append(f.calls, "stop "+action+" "+labels["model"])
	return "back to " + labels["model"], nil
}

// actionRig is a rig whose one threshold rule, already true for model m,
// has action fallback carried out by act.
func actionRig(t *testing.T, act Actuator) (*rig, RuleConfig) {
	t.Helper()
	rule := thresholdRule()
	rule.For, rule.KeepFiringFor, rule.Action = 0, 0, "fallback"
	cfg := &Config{Rules: []RuleConfig{rule}, Route: &RouteConfig{Receiver: "log", GroupWait: time.Second, GroupInterval: time.Second}}
	r := newRig(t, cfg)
	r.e.lifecycle.actuator = act
	r.src.set("m", calls(6000, ms(10), ms(900), nil))
	return r, rule
}

// TestActions: a firing rule with an action starts it for its model,
// shows it in the evidence and the notification, and stops it on resolve.
func TestActions(t *testing.T) {
	act := &fakeActuator{}
	r, _ := actionRig(t, act)
	r.run(3 * time.Second)
	if len(act.calls) != 1 || act.calls[0] != "start fallback m" {
		t.Fatalf("actuator calls = %v", act.calls)
	}
	a := r.e.Alerts()[0]
	if len(a.Evidence.Actions) != 1 || a.Evidence.Actions[0] != "fallback m -> edge" {
		t.Errorf("evidence actions = %v", a.Evidence.Actions)
	}
	msgs, _ := r.sink.take()
	if len(msgs) == 0 || len(msgs[0].Alerts[0].Actions) != 1 {
		t.Errorf("notification without the action: %+v", msgs)
	}
	r.src.set("m", calls(6000, ms(10), ms(100), nil))
	r.run(3 * time.Second)
	if len(act.calls) != 2 || act.calls[1] != "stop fallback m" {
		t.Fatalf("after resolve: %v", act.calls)
	}
}

// panickyActuator panics on Start until it is fixed.
type panickyActuator struct {
	fakeActuator
	fixed bool
}

func (p *panickyActuator) Start(action string, labels map[string]string) (string, error) {
	if !p.fixed {
		panic("actuator bug")
	}
	return p.fakeActuator.Start(action, labels)
}

// TestEvaluationPanicKeepsTheEngine: a panic in one evaluation (here the
// actuator's) is logged and the next tick evaluates again: the engine, and
// with it the proxy, goes on; before, nothing recovered it and the whole
// process died.
func TestEvaluationPanicKeepsTheEngine(t *testing.T) {
	act := &panickyActuator{}
	r, rule := actionRig(t, act)
	r.c.add(time.Second)
	r.e.safeStep() // panics inside, recovered
	act.fixed = true
	for range 3 {
		r.c.add(time.Second)
		r.e.safeStep()
	}
	if r.state(rule.Name, "m") != StateFiring {
		t.Errorf("alert %q after a panicking evaluation: %v, want firing", rule.Name, r.state(rule.Name, "m"))
	}
}

// TestAckPendingAndTwice: a pending alert cannot be acknowledged (the
// silence would be expired at the next step and the alert page when it
// fires); acking a firing alert twice gives one silence, so repeated acks
// cannot fill the silence cap.
func TestAckPendingAndTwice(t *testing.T) {
	rule := thresholdRule()
	rule.For = time.Hour
	r := newRig(t, &Config{Rules: []RuleConfig{rule}})
	r.src.set("bert", calls(6000, ms(10), ms(900), nil))
	r.run(time.Minute)
	a := r.e.Alerts()[0]
	if a.State != StatePending {
		t.Fatalf("state %v, want pending", a.State)
	}
	if _, err := r.e.Ack(a.Fingerprint, "oncall", ""); err == nil || !strings.Contains(err.Error(), "pending") {
		t.Errorf("ack of a pending alert: %v, want an error saying it is pending", err)
	}
	r.run(time.Hour)
	if r.state(rule.Name, "bert") != StateFiring {
		t.Fatal("not firing after its for")
	}
	id1, err1 := r.e.Ack(a.Fingerprint, "oncall", "")
	id2, err2 := r.e.Ack(a.Fingerprint, "oncall", "again")
	if err1 != nil || err2 != nil || id1 != id2 || len(r.e.Silences()) != 1 {
		t.Errorf("two acks: %q %v, %q %v, %d silences; want one silence", id1, err1, id2, err2, len(r.e.Silences()))
	}
}
