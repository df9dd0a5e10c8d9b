package main

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/infergate/infergate/alert/notify"
	"github.com/infergate/infergate/internal/memlimit"
)

// A reload re-reads the flags over the file, refuses a bad configuration
// whole (metric 0, the running configuration kept, nothing applied),
// names what changed and what waits for a restart, and applies the rest.
func TestReloadRefusesWholeAndNamesRestartOnly(t *testing.T) {
	args := []string{"--upstream", "127.0.0.1:1", "--log-level", "warn"}
	cfg, err := parseConfig(args)
	if err != nil {
		t.Fatal(err)
	}
	g, err := newReloadGauges(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	r, err := newReloader(cfg, slog.New(slog.DiscardHandler), g)
	if err != nil {
		t.Fatal(err)
	}
	level := new(slog.LevelVar)
	level.Set(slog.LevelWarn)
	applied := 0
	r.steps = []reloadStep{logLevelStep(level), {name: "count", prepare: func(old, next *Config) (func() string, func(), error) {
		return func() string { applied++; return "" }, nil, nil
	}}}

	r.load = func([]string) (Config, error) {
		return Config{}, errors.New("config: batching.max_size: must be positive")
	}
	res := r.reload("test")
	if res.Status != "error" || !strings.Contains(res.Error, "batching.max_size") || gaugeValue(r.lastOK) != 0 || applied != 0 {
		t.Errorf("a bad configuration: %+v, metric %v, applied %d; want refused, field named, 0, nothing applied", res, gaugeValue(r.lastOK), applied)
	}

	next, err := parseConfig(append(args, "--log-level", "debug", "--listen", ":9999"))
	if err != nil {
		t.Fatal(err)
	}
	r.load = func([]string) (Config, error) { return next, nil }
	res = r.reload("test")
	if res.Status != "success" || gaugeValue(r.lastOK) != 1 || level.Level() != slog.LevelDebug || applied != 1 {
		t.Errorf("a good configuration: %+v, metric %v, level %v; want applied, 1, debug", res, gaugeValue(r.lastOK), level.Level())
	}
	if strings.Join(res.RestartRequired, ",") != "listen" || !strings.Contains(strings.Join(res.Changed, ","), "log.level") {
		t.Errorf("changed %v, restart_required %v; want log.level changed and listen waiting for a restart", res.Changed, res.RestartRequired)
	}
	if res = r.reload("test"); res.Status != "unchanged" {
		t.Errorf("the same configuration again: %q, want unchanged", res.Status)
	}
}

// /api/v1/status/config hides credentials: headers, Slack URLs, URL
// user info and query values, SMTP auth.
func TestRedact(t *testing.T) {
	tree := map[string]any{"alerting": map[string]any{"receivers": []any{map[string]any{
		"webhook_configs": []any{map[string]any{"url": "https://u:pw@hook.example/x?token=abc", "headers": map[string]any{"Authorization": "Bearer zzz"}}},
		"slack_configs":   []any{map[string]any{"url": "https://hooks.slack.example/services/T/B/SECRET"}},
		"email_configs":   []any{map[string]any{"auth_username": "me", "auth_password_file": "/run/pw"}},
	}}}}
	out := redact(tree, "")
	s := strings.Join(strings.Fields(strings.ReplaceAll(fmtAny(out), "\n", " ")), " ")
	for _, secret := range []string{"pw@", "abc", "zzz", "SECRET", "me"} {
		if strings.Contains(s, secret+" ") || strings.Contains(s, secret+"]") || strings.Contains(s, secret+"@") || strings.Contains(s, "="+secret) || strings.Contains(s, "/"+secret) {
			t.Errorf("%q shown: %s", secret, s)
		}
	}
	if !strings.Contains(s, "/run/pw") || !strings.Contains(s, "hook.example") {
		t.Errorf("redacted too much (paths and hosts are not secrets): %s", s)
	}
}

func fmtAny(v any) string {
	b, _ := yamlMarshal(v)
	return string(b)
}

func gaugeValue(g prometheus.Gauge) float64 {
	var m dto.Metric
	g.Write(&m)
	return m.GetGauge().GetValue()
}

// The tracing sampler changes live; the exporter's endpoint waits for a
// restart and says so.
func TestReloadTracingSampler(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	args := []string{"--upstream", "127.0.0.1:1", "--tracing", "--trace-endpoint", srv.URL, "--trace-sample-ratio", "0"}
	cfg, err := parseConfig(args)
	if err != nil {
		t.Fatal(err)
	}
	_, tr, stop, err := startTracing(cfg.Tracing, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	g, err := newReloadGauges(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	r, err := newReloader(cfg, slog.New(slog.DiscardHandler), g)
	if err != nil {
		t.Fatal(err)
	}
	r.steps = []reloadStep{tracingStep(tr)}
	sampled := func() bool {
		_, span := tr.Provider.Tracer("test").Start(context.Background(), "call")
		defer span.End()
		return span.SpanContext().IsSampled()
	}
	if sampled() {
		t.Fatal("sample_ratio 0 at start: a new trace sampled")
	}
	reloadWith := func(extra ...string) reloadResult {
		next, err := parseConfig(append(slices.Clone(args), extra...))
		if err != nil {
			t.Fatal(err)
		}
		r.load = func([]string) (Config, error) { return next, nil }
		return r.reload("test")
	}
	res := reloadWith("--trace-sample-ratio", "1")
	if res.Status != "success" || len(res.RestartRequired) != 0 || !sampled() {
		t.Errorf("sample_ratio 0 -> 1: %+v, sampled %t; want applied live, nothing waiting for a restart, new traces sampled", res, sampled())
	}
	// Tail-based sampling turned on live: every call recorded (sample_ratio
	// 0 no longer applies), the budget on the sampler.
	res = reloadWith("--trace-sample-ratio", "0", "--trace-max-spans-per-second", "50")
	if res.Status != "success" || len(res.RestartRequired) != 0 || !sampled() || tr.Tail().MaxSpansPerSecond() != 50 {
		t.Errorf("max_spans_per_second 0 -> 50: %+v, sampled %t, budget %v; want applied live, every call recorded, 50",
			res, sampled(), tr.Tail().MaxSpansPerSecond())
	}
	res = reloadWith("--trace-sample-ratio", "1", "--trace-endpoint", "http://127.0.0.1:1")
	if strings.Join(res.RestartRequired, ",") != "tracing.endpoint" {
		t.Errorf("a new endpoint: restart_required %v, want tracing.endpoint", res.RestartRequired)
	}
}

// A receiver that fails to build refuses the whole reload: the steps
// before it (the log level) and the rule changed beside it stay as they
// were, and the metric says 0.
func TestReloadRefusesAReceiverThatFailsToBuild(t *testing.T) {
	rules := func(value string) string {
		return writeYAML(t, "rules:", "  - {name: Slow, kind: threshold, quantile: p99, window: 5s, value: "+value+", severity: warning}",
			"receivers: [{name: hook, webhook_configs: [{url: 'http://127.0.0.1:9/hook'}]}]", "route: {receiver: hook}")
	}
	args := []string{"--upstream", "127.0.0.1:1", "--log-level", "warn", "--rules", rules("500ms")}
	cfg, err := parseConfig(args)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	w, err := newParts(cfg, memlimit.Result{}, prometheus.NewRegistry(), log)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	r, err := newReloader(cfg, log, w.reload)
	if err != nil {
		t.Fatal(err)
	}
	level := new(slog.LevelVar)
	level.Set(slog.LevelWarn)
	r.steps = []reloadStep{logLevelStep(level), alertingStep(w.al.engine)}

	next, err := parseConfig([]string{"--upstream", "127.0.0.1:1", "--log-level", "debug", "--rules", rules("900ms")})
	if err != nil {
		t.Fatal(err)
	}
	// What the load's checks would refuse, as a receiver whose build
	// fails for a reason only building finds.
	next.alerts.Receivers = append(next.alerts.Receivers, notify.ReceiverConfig{Name: "broken", Webhook: []notify.WebhookConfig{{}}})
	r.load = func([]string) (Config, error) { return next, nil }
	res := r.reload("test")
	if res.Status != "error" || !strings.Contains(res.Error, `receiver "broken"`) {
		t.Errorf("reload with a receiver that fails to build: %+v; want refused, naming the receiver", res)
	}
	if v := gaugeValue(r.lastOK); v != 0 {
		t.Errorf("infergate_config_last_reload_successful %v, want 0", v)
	}
	if level.Level() != slog.LevelWarn {
		t.Errorf("log level %v after a refused reload, want warn kept", level.Level())
	}
	if rs := w.al.engine.Rules(); len(rs) != 1 || rs[0].Value != "500ms" {
		t.Errorf("rules after a refused reload: %+v, want Slow at 500ms kept", rs)
	}
	if r.cur.Load().sha != res.SHA256 || r.cur.Load().cfg.Log.Level != "warn" {
		t.Errorf("the configuration in force changed: %s (%s)", r.cur.Load().sha, r.cur.Load().cfg.Log.Level)
	}
}
