package integration

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
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

// TestAlertmanagerRestartedGetsFiringAlerts: a real Alertmanager that
// restarts (its alerts are kept in memory only) in the middle of an
// incident has the firing alert again within infergate's resend
// interval, not after the route's repeat_interval (5m), and the alert's
// endsAt always lies beyond the next re-send, so Alertmanager never
// resolves it while it fires.
func TestAlertmanagerRestartedGetsFiringAlerts(t *testing.T) {
	t.Parallel()
	bin, err := exec.LookPath("prometheus-alertmanager")
	if err != nil {
		t.Fatalf("prometheus-alertmanager not installed (.ci/run installs the Debian package): %v", err)
	}
	dir := t.TempDir()
	amCfg := writeFile(t, "am.yml", "route: {receiver: none}\nreceivers: [{name: none}]\n")
	web, cluster := freePort(t), freePort(t)
	startAM := func(n int) *exec.Cmd {
		cmd := exec.Command(bin, "--config.file="+amCfg, "--storage.path="+filepath.Join(dir, fmt.Sprint("am", n)),
			"--web.listen-address="+web, "--cluster.listen-address=", "--cluster.advertise-address="+cluster)
		log := &lockedBuffer{}
		cmd.Stdout, cmd.Stderr = log, log
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			cmd.Process.Kill()
			cmd.Wait()
			if t.Failed() {
				t.Logf("alertmanager %d log:\n%s", n, headTail(log.String(), 4<<10, 2<<10))
			}
		})
		waitHTTP(t, "http://"+web+"/-/ready", 60*time.Second)
		return cmd
	}
	am := startAM(1)
	rules := writeFile(t, "rules.yaml", fmt.Sprintf(`
rules:
  - name: TestErrors
    kind: errors
    ratio: 10%%
    window: 2s
    severity: critical
receivers:
  - name: am
    alertmanager_configs: [{urls: ["http://%s"], resend_interval: 2s, resend_validity: 8s}]
route:
  receiver: am
  group_wait: 0s
  group_interval: 1s
`, web))
	sim := startSim(t)
	gate := startProxy(t, sim.grpc, "--rules", rules)
	l := startLoad(t, gate.grpc, 2, 1, 20*time.Millisecond)
	defer l.stop()
	fault(t, sim.admin, `{"model":"resnet50","error_rate":1,"error_code":"INTERNAL"}`)
	defer heal(t, sim.admin)

	// amAlert returns the TestErrors alert Alertmanager holds, if active.
	amAlert := func() (endsAt time.Time, ok bool) {
		_, body := httpGet(t, "http://"+web+"/api/v2/alerts?active=true")
		var as []struct {
			Labels map[string]string `json:"labels"`
			EndsAt time.Time         `json:"endsAt"`
		}
		json.Unmarshal([]byte(body), &as)
		for _, a := range as {
			if a.Labels["alertname"] == "TestErrors" {
				return a.EndsAt, true
			}
		}
		return time.Time{}, false
	}
	waitUntil(t, "Alertmanager to hold the firing alert", 30*time.Second, func() bool { _, ok := amAlert(); return ok })
	// Over several re-sends, endsAt stays ahead of the next one.
	for range 3 {
		endsAt, ok := amAlert()
		if !ok {
			t.Fatal("Alertmanager lost the firing alert between re-sends")
		}
		if left := time.Until(endsAt); left <= 2*time.Second {
			t.Errorf("endsAt %v ahead, not beyond the next re-send (2s)", left.Round(time.Millisecond))
		}
		time.Sleep(2 * time.Second)
	}

	am.Process.Kill()
	am.Wait()
	startAM(2) // fresh: no alerts
	start := time.Now()
	waitUntil(t, "the restarted Alertmanager to hold the firing alert again", 20*time.Second, func() bool { _, ok := amAlert(); return ok })
	t.Logf("restarted Alertmanager has the firing alert after %v", time.Since(start).Round(100*time.Millisecond))
}
