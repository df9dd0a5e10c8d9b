package alert

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/infergate/infergate/alert/notify"
	"github.com/infergate/infergate/monitor"
)

// monRig is an engine over a real monitor registry on a fake clock: the
// windows, the slices and the series' code classes are the proxy's.
type monRig struct {
	t    *testing.T
	c    *clock
	reg  *monitor.Registry
	sink *sink
	act  *fakeActuator
	e    *Engine
}

func newMonRig(t *testing.T, cfg *Config) *monRig {
	t.Helper()
	if err := cfg.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	r := &monRig{t: t, c: newClock(), sink: &sink{}, act: &fakeActuator{}}
	r.reg = monitor.NewRegistry(monitor.Options{NoRequestHistogram: true, Now: r.c.now})
	e, err := New(Options{Config: cfg, Latency: r.reg, Now: r.c.now, Send: r.sink.send, Actuator: r.act,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	r.e = e
	return r
}

// record records n calls of model ending with code, in the code class
// the proxy gives them.
func (r *monRig) record(model, code, class string, n int) {
	k := monitor.SeriesKey{Model: model, Version: "1", Method: "/inference.GRPCInferenceService/ModelInfer",
		Upstream: "u", CodeClass: class, Route: monitor.RoutePrimary}
	for range n {
		r.reg.Record(k, monitor.Sample{Total: ms(5), Upstream: ms(4), Code: code})
	}
}

// second ends one second: the slice completes and the engine evaluates it.
func (r *monRig) second() {
	r.c.add(time.Second)
	r.reg.Rotate()
	r.e.Step()
}

func (r *monRig) state(name, model string) State {
	for _, a := range r.e.Alerts() {
		if a.Name == name && a.Labels["model"] == model {
			return a.State
		}
	}
	return ""
}

// TestLowTrafficModelAlerts: a model at 5 calls/s failing 100% with
// UNAVAILABLE fires the built-in ModelErrorRatio within a few evaluations;
// the 2s window alone (10 calls, 20 needed) never judged it.
func TestLowTrafficModelAlerts(t *testing.T) {
	r := newMonRig(t, &Config{})
	for range 30 {
		r.record("m", "OK", monitor.CodeClassOK, 5)
		r.second()
	}
	if s := r.state("ModelErrorRatio", "m"); s != "" {
		t.Fatalf("healthy: ModelErrorRatio %q", s)
	}
	fired := 0
	for i := 1; i <= 10; i++ {
		r.record("m", "Unavailable", monitor.CodeClassServerError, 5)
		r.second()
		if r.state("ModelErrorRatio", "m") == StateFiring {
			fired = i
			break
		}
	}
	if fired == 0 || fired > 4 {
		t.Fatalf("ModelErrorRatio fired after %d evaluations of a 5 calls/s model failing 100%%, want 1 to 4", fired)
	}
	ev := r.e.Alerts()[0].Evidence.Conditions[0]
	if !strings.Contains(ev.Note, "over ") {
		t.Errorf("evidence %+v does not say the window grew", ev)
	}
}

// TestClientCausedErrorsNeverPage: a hostile client sending 30 calls/s
// whose own 2ms deadlines run out, and 30 calls/s to models that do not
// exist, beside a well-behaved client, raises no alert under the built-in
// rules, and an errors rule with action: fallback never moves the model.
// The same DEADLINE_EXCEEDED from the server (the proxy's
// upstream timeout) still fires.
func TestClientCausedErrorsNeverPage(t *testing.T) {
	cfg := &Config{}
	cfg.Rules = append(DefaultRules(cfg), RuleConfig{Name: "ErrorsFallback", Action: "fallback",
		Condition: Condition{Kind: KindErrors, Ratio: "1%"}})
	r := newMonRig(t, cfg)
	for i := range 60 {
		r.record("m", "OK", monitor.CodeClassOK, 20)
		r.record("m", "DeadlineExceeded", monitor.CodeClassClientError, 30)
		r.record(fmt.Sprintf("nosuch-%d", i%5), "NotFound", monitor.CodeClassClientError, 6)
		r.second()
	}
	if as := r.e.Alerts(); len(as) != 0 {
		t.Fatalf("alerts %+v, want none", as)
	}
	if len(r.act.calls) != 0 {
		t.Fatalf("actions %v, want none", r.act.calls)
	}
	if msgs, _ := r.sink.take(); len(msgs) != 0 {
		t.Fatalf("%d notifications, want none", len(msgs))
	}
	for range 5 {
		r.record("m", "OK", monitor.CodeClassOK, 20)
		r.record("m", "DeadlineExceeded", monitor.CodeClassServerError, 10)
		r.second()
	}
	if s := r.state("ModelErrorRatio", "m"); s != StateFiring {
		t.Fatalf("server-side DEADLINE_EXCEEDED: ModelErrorRatio %q, want firing", s)
	}
	if len(r.act.calls) != 1 {
		t.Fatalf("actions %v, want the fallback started once", r.act.calls)
	}
}

// TestNoTrafficResolves: once a failing model gets no calls, its alert
// holds while the grown window (1m) still has its calls, then resolves
// with "no traffic" in the evidence; it is not re-paged meanwhile, and
// resolves once (it used to hold for 5 minutes, re-page, then
// resolve "with no verdict").
func TestNoTrafficResolves(t *testing.T) {
	r := newMonRig(t, &Config{})
	for range 10 {
		r.record("m", "Unavailable", monitor.CodeClassServerError, 5)
		r.second()
	}
	if s := r.state("ModelErrorRatio", "m"); s != StateFiring {
		t.Fatalf("ModelErrorRatio %q, want firing", s)
	}
	r.sink.take()
	var msgs []*notify.Message
	resolvedAt := 0
	for i := 1; i <= 120 && resolvedAt == 0; i++ {
		r.second()
		m, _ := r.sink.take()
		msgs = append(msgs, m...)
		for _, mm := range m {
			if mm.Status == notify.StatusResolved {
				resolvedAt = i
			}
		}
	}
	if resolvedAt == 0 || resolvedAt > 62 {
		t.Fatalf("resolved %d s after the last call, want within the 1m window", resolvedAt)
	}
	if len(msgs) != 1 {
		t.Fatalf("%d messages after traffic stopped, want the resolved one only", len(msgs))
	}
	a := msgs[0].Alerts[0]
	if !strings.Contains(a.Evidence, "no traffic") {
		t.Errorf("resolved evidence %q, want it to say no traffic", a.Evidence)
	}
}

// TestUndecidedAlertIsNotRepaged: an alert whose model still has calls,
// too few to judge, holds without a re-page until it goes stale.
func TestUndecidedAlertIsNotRepaged(t *testing.T) {
	cfg := &Config{Route: &RouteConfig{Receiver: LogReceiver, RepeatInterval: 30 * time.Second},
		Rules: []RuleConfig{{Name: "E", Condition: Condition{Kind: KindErrors, Ratio: "1%", Window: 5 * time.Second, MinCalls: 50}}}}
	r := newMonRig(t, cfg)
	for range 15 {
		r.record("m", "Unavailable", monitor.CodeClassServerError, 5)
		r.second()
	}
	if s := r.state("E", "m"); s != StateFiring {
		t.Fatalf("E %q, want firing", s)
	}
	// One call every 5s: never 50 in a minute, never no traffic. Once
	// the failures have left the 1m window, nothing decides the alert.
	for i := range 180 {
		if i%5 == 0 {
			r.record("m", "OK", monitor.CodeClassOK, 1)
		}
		r.second()
		if i == 60 {
			r.sink.take()
		}
	}
	if s := r.state("E", "m"); s != StateFiring {
		t.Fatalf("E %q, want still firing (undecided)", s)
	}
	if msgs, _ := r.sink.take(); len(msgs) != 0 {
		t.Fatalf("%d messages while undecided, want no re-page", len(msgs))
	}
}

// TestManyModelsOneMessage: fifty models failing at once are one message
// per rule under the default route, not fifty.
func TestManyModelsOneMessage(t *testing.T) {
	r := newMonRig(t, &Config{})
	for range 8 {
		for i := range 50 {
			r.record(fmt.Sprintf("m%02d", i), "Unavailable", monitor.CodeClassServerError, 5)
		}
		r.second()
	}
	msgs, _ := r.sink.take()
	if len(msgs) != 1 || len(msgs[0].Alerts) != 50 {
		n := 0
		if len(msgs) > 0 {
			n = len(msgs[0].Alerts)
		}
		t.Fatalf("%d messages (first with %d alerts), want 1 with 50", len(msgs), n)
	}
}

// TestRestartDoesNotResolveAsNoTraffic: a firing alert restored at a
// restart does not resolve as "no traffic" only because the new process
// has not seen a call yet; it takes a minute of watching with no call.
func TestRestartDoesNotResolveAsNoTraffic(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state.json")
	r := newMonRig(t, &Config{StateFile: state})
	for range 10 {
		r.record("m", "Unavailable", monitor.CodeClassServerError, 5)
		r.second()
	}
	if s := r.state("ModelErrorRatio", "m"); s != StateFiring {
		t.Fatalf("ModelErrorRatio %q, want firing", s)
	}
	r.e.Close()

	r2 := newMonRig(t, &Config{StateFile: state})
	r2.c.t = r.c.t // the restart happens now, not back at the clock's start
	for range 30 {
		r2.second()
	}
	if s := r2.state("ModelErrorRatio", "m"); s != StateFiring {
		t.Fatalf("restored alert %q 30s after the restart, want still firing (no minute watched yet)", s)
	}
	for range 40 {
		r2.second()
	}
	if s := r2.state("ModelErrorRatio", "m"); s != "" {
		t.Errorf("restored alert %q after 70s without a call, want resolved", s)
	}
}
