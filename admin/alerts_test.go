package admin

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/infergate/infergate/alert"
	"github.com/infergate/infergate/monitor"
)

// newEngine is an alert engine with one threshold rule over an empty
// monitor, its state kept in stateFile ("" keeps none).
func newEngine(t *testing.T, stateFile string) *alert.Engine {
	t.Helper()
	cfg := &alert.Config{StateFile: stateFile, Rules: []alert.RuleConfig{{
		Name:      "HighP99",
		Condition: alert.Condition{Kind: alert.KindThreshold, Quantile: "p99", Window: time.Minute, Value: "500ms"},
		Severity:  alert.SeverityCritical,
	}}}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	e, err := alert.New(alert.Options{Config: cfg, Latency: monitor.NewRegistry(monitor.Options{}), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return e
}

// Silence and ack bodies: over the cap, 413 naming the limit (not 400
// "unexpected EOF"); refused by validation, 400 with the reason and
// nothing stored; an empty ack body is allowed.
func TestSilenceBodies(t *testing.T) {
	e := newEngine(t, "")
	h := (&Server{Gatherer: prometheus.NewRegistry(), Alerts: e, Token: "t"}).Handler()
	post := func(path string, body []byte) *httptest.ResponseRecorder {
		req := httptest.NewRequest("POST", path, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer t")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	now := time.Now()
	big, _ := json.Marshal(alert.Silence{Matchers: []alert.Matcher{{Name: "alertname", Value: "x"}}, EndsAt: now.Add(time.Hour), Comment: strings.Repeat("c", MaxSilenceBody)})
	if rec := post("/api/v1/silences", big); rec.Code != http.StatusRequestEntityTooLarge || !strings.Contains(rec.Body.String(), "limit of 65536 bytes (64 KiB)") {
		t.Errorf("big silence: %d %s", rec.Code, rec.Body)
	}
	if rec := post("/api/v1/alerts/fp/ack", bytes.Repeat([]byte(" "), maxAckBody+1)); rec.Code != http.StatusRequestEntityTooLarge || !strings.Contains(rec.Body.String(), "16 KiB") {
		t.Errorf("big ack: %d %s", rec.Code, rec.Body)
	}
	for _, s := range []alert.Silence{
		{Matchers: []alert.Matcher{{Name: "x", Value: "*"}}, EndsAt: now.Add(time.Hour)},
		{Matchers: []alert.Matcher{{Name: "alertname", Value: "x"}}, EndsAt: time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)},
	} {
		b, _ := json.Marshal(s)
		if rec := post("/api/v1/silences", b); rec.Code != http.StatusBadRequest {
			t.Errorf("%s: %d %s", b, rec.Code, rec.Body)
		}
	}
	if n := len(e.Silences()); n != 0 {
		t.Errorf("%d silences stored, want 0", n)
	}
	good, _ := json.Marshal(alert.Silence{Matchers: []alert.Matcher{{Name: "alertname", Value: "HighP99"}}, EndsAt: now.Add(time.Hour)})
	rec := post("/api/v1/silences", good)
	if rec.Code != http.StatusOK {
		t.Fatalf("good silence: %d %s", rec.Code, rec.Body)
	}
	var added struct{ ID string }
	_ = json.Unmarshal(rec.Body.Bytes(), &added)
	if rec := post("/api/v1/alerts/nosuch/ack", nil); rec.Code != http.StatusNotFound {
		t.Errorf("empty ack body: %d %s", rec.Code, rec.Body)
	}
	// A delete needs the token too; with it, the silence goes.
	del := httptest.NewRecorder()
	h.ServeHTTP(del, httptest.NewRequest("DELETE", "/api/v1/silences/"+added.ID, nil))
	if del.Code != http.StatusUnauthorized || len(e.Silences()) != 1 {
		t.Errorf("delete without the token: %d, %d silences", del.Code, len(e.Silences()))
	}
	req := httptest.NewRequest("DELETE", "/api/v1/silences/"+added.ID, nil)
	req.Header.Set("Authorization", "Bearer t")
	del = httptest.NewRecorder()
	h.ServeHTTP(del, req)
	if del.Code != http.StatusOK || len(e.Silences()) != 0 {
		t.Errorf("delete: %d %s, %d silences", del.Code, del.Body, len(e.Silences()))
	}
}

// A damaged state file set aside at start: /api/v1/alerts says the alerts
// and silences shown are not those from before the restart.
func TestAlertsSayTheStateWasReset(t *testing.T) {
	file := filepath.Join(t.TempDir(), "state.json")
	if err := os.WriteFile(file, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	h := (&Server{Gatherer: prometheus.NewRegistry(), Alerts: newEngine(t, file)}).Handler()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/api/v1/alerts", nil))
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"state_reset"`) {
		t.Errorf("/api/v1/alerts does not say the state was reset: %d %s", rec.Code, rec.Body)
	}
}
