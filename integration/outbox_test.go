package integration

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// flakyHook is a webhook receiver that refuses (503) or accepts (200) as
// the test says, and counts what it accepted by status.
type flakyHook struct {
	srv      *httptest.Server
	mu       sync.Mutex
	refuse   bool
	refused  map[string]int // by message status: attempts refused
	accepted map[string]int // by message status
}

func newFlakyHook(t *testing.T) *flakyHook {
	h := &flakyHook{refused: map[string]int{}, accepted: map[string]int{}}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var m struct {
			Status string `json:"status"`
		}
		json.Unmarshal(b, &m)
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.refuse {
			h.refused[m.Status]++
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		h.accepted[m.Status]++
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *flakyHook) setRefuse(v bool) { h.mu.Lock(); h.refuse = v; h.mu.Unlock() }

func (h *flakyHook) counts() (refused, accepted map[string]int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	r, a := map[string]int{}, map[string]int{}
	for k, v := range h.refused {
		r[k] = v
	}
	for k, v := range h.accepted {
		a[k] = v
	}
	return r, a
}

// waitUntil polls cond until it holds or limit passes.
func waitUntil(t *testing.T, what string, limit time.Duration, cond func() bool) {
	t.Helper()
	for start := time.Now(); time.Since(start) < limit; time.Sleep(100 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out after %v waiting for %s", limit, what)
}

// TestOwedNotificationsSurviveRestart: the receiver is down when an
// alert fires; infergate is stopped (SIGTERM) with the page undelivered;
// the receiver comes back; a restarted infergate sends the page, exactly
// once. The same for the resolved notice owed at the next stop.
func TestOwedNotificationsSurviveRestart(t *testing.T) {
	t.Parallel()
	h := newFlakyHook(t)
	rules := writeFile(t, "rules.yaml", fmt.Sprintf(`
rules:
  - name: TestErrors
    kind: errors
    ratio: 10%%
    window: 2s
    severity: critical
receivers:
  - name: hook
    webhook_configs: [{url: %q}]
route:
  receiver: hook
  group_by: [alertname]
  group_wait: 0s
  group_interval: 1s
`, h.srv.URL))
	state := filepath.Join(t.TempDir(), "alerts.json")
	sim := startSim(t)
	startGate := func() (*proc, *load) {
		g := startProxy(t, sim.grpc, "--rules", rules, "--alert-state-file", state)
		return g, startLoad(t, g.grpc, 2, 1, 20*time.Millisecond)
	}

	h.setRefuse(true)
	gate, l := startGate()
	fault(t, sim.admin, `{"model":"resnet50","error_rate":1,"error_code":"INTERNAL"}`)
	waitAlert(t, gate.admin, "TestErrors", "resnet50", "firing", 30*time.Second)
	waitUntil(t, "the firing page to be refused", 20*time.Second, func() bool { r, _ := h.counts(); return r["firing"] > 0 })
	l.stop()
	if err := gate.sigterm(t); err != nil {
		t.Fatalf("SIGTERM: %v", err)
	}

	h.setRefuse(false)
	gate, l = startGate()
	waitUntil(t, "the owed firing page after the restart", 20*time.Second, func() bool { _, a := h.counts(); return a["firing"] > 0 })

	// The fault ends while the receiver is down again: the resolved
	// notice is owed at the next stop.
	h.setRefuse(true)
	heal(t, sim.admin)
	waitAlert(t, gate.admin, "TestErrors", "resnet50", "", 30*time.Second)
	waitUntil(t, "the resolved notice to be refused", 20*time.Second, func() bool { r, _ := h.counts(); return r["resolved"] > 0 })
	l.stop()
	if err := gate.sigterm(t); err != nil {
		t.Fatalf("SIGTERM: %v", err)
	}

	h.setRefuse(false)
	gate, l = startGate()
	defer l.stop()
	waitUntil(t, "the owed resolved notice after the restart", 20*time.Second, func() bool { _, a := h.counts(); return a["resolved"] > 0 })
	// Nothing more is owed: a few evaluations later nothing else arrived.
	time.Sleep(3 * time.Second)
	if _, a := h.counts(); a["firing"] != 1 || a["resolved"] != 1 {
		t.Errorf("accepted %v; want exactly one firing page and one resolved notice", a)
	}
	if _, body := httpGet(t, "http://"+gate.admin+"/api/v1/alerts"); body == "" {
		t.Error("no alerts API")
	}
}
