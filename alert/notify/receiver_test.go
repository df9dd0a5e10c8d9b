package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// TestBuildAndSend: a receiver with two webhooks, slack and log delivers
// one message to each, labels integrations by kind and index, and counts
// the outcomes on the registry given.
func TestBuildAndSend(t *testing.T) {
	var mu sync.Mutex
	hits := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		mu.Lock()
		hits[r.URL.Path]++
		mu.Unlock()
	}))
	defer srv.Close()
	var logs bytes.Buffer
	var logMu sync.Mutex
	logger := slog.New(slog.NewJSONHandler(&lockedWriter{w: &logs, mu: &logMu}, nil))
	reg := prometheus.NewRegistry()
	metrics := NewMetrics(reg)

	cfg := ReceiverConfig{
		Name:    "oncall",
		Webhook: []WebhookConfig{{URL: srv.URL + "/a"}, {URL: srv.URL + "/b"}},
		Slack:   []SlackConfig{{URL: srv.URL + "/slack"}},
		Log:     true,
	}
	r, err := Build(cfg, WithLogger(logger), WithMetrics(metrics), WithHTTPClient(srv.Client()))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Webhook[0].Timeout != 0 {
		t.Error("Build filled defaults into the caller's config")
	}
	var integrations []string
	for _, s := range r.Senders() {
		integrations = append(integrations, s.Integration())
	}
	if want := []string{"webhook/0", "webhook/1", "slack", "log"}; !slices.Equal(integrations, want) {
		t.Errorf("integrations %v, want %v", integrations, want)
	}
	r.Send(testMessage())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := r.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if want := map[string]int{"/a": 1, "/b": 1, "/slack": 1}; !maps.Equal(hits, want) {
		t.Errorf("server hits %v, want %v", hits, want)
	}
	for _, integ := range integrations {
		if got := counter(t, metrics.notifications, "oncall", integ, "success"); got != 1 {
			t.Errorf("%s: %v successes, want 1", integ, got)
		}
	}
	if n, err := reg.Gather(); err != nil || len(n) != 4 {
		t.Errorf("registry has %d metric families (%v), want 4", len(n), err)
	}

	var rec map[string]any
	if err := json.Unmarshal(logs.Bytes(), &rec); err != nil {
		t.Fatalf("log %q: %v", logs.String(), err)
	}
	if rec["level"] != "WARN" || rec["msg"] != Text(testMessage()) || rec["receiver"] != "oncall" ||
		rec["status"] != "firing" || rec["count"] != float64(2) || rec["group"] != testMessage().GroupKey {
		t.Errorf("log record %v", rec)
	}
}

func TestBuildInvalid(t *testing.T) {
	_, err := Build(ReceiverConfig{Name: "x", Slack: []SlackConfig{{URL: "slack"}}})
	if err == nil || err.Error() != `receiver "x": slack_configs[0].url "slack": must be http or https` {
		t.Errorf("Build = %v", err)
	}
}

func TestLogNotifierLevels(t *testing.T) {
	for _, tc := range []struct {
		status, level string
	}{{StatusFiring, "WARN"}, {StatusResolved, "INFO"}} {
		var buf bytes.Buffer
		n := &logNotifier{log: slog.New(slog.NewTextHandler(&buf, nil))}
		m := testMessage()
		m.Status = tc.status
		if retryable, err := n.Notify(context.Background(), m); err != nil || retryable {
			t.Errorf("Notify = %v, %v", retryable, err)
		}
		if !strings.Contains(buf.String(), "level="+tc.level) {
			t.Errorf("%s: log %q, want level %s", tc.status, buf.String(), tc.level)
		}
	}
}

// TestNewMetricsShared: two NewMetrics on one registry share the series.
func TestNewMetricsShared(t *testing.T) {
	reg := prometheus.NewRegistry()
	a, b := NewMetrics(reg), NewMetrics(reg)
	a.forSender("r", "log").delivered()
	b.forSender("r", "log").delivered()
	if got := counter(t, a.notifications, "r", "log", "success"); got != 2 {
		t.Errorf("shared counter = %v, want 2", got)
	}
	var nilMetrics *Metrics
	nilMetrics.forSender("r", "log").drop(reasonClosed) // must not panic
}

type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
