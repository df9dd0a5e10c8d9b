package scenario

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestBalanceSmoke runs the real balance scenario, short (2 s healthy, 3
// s with one replica slow, 3 s with one killed, one round), against bin/simserver and
// bin/infergate (make build), nginx and, when installed, HAProxy. It
// checks that every path runs and the slow replica's share is read;
// infergate may fail no call. The numbers are bench balance's to report,
// not a test's to bound.
func TestBalanceSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	if _, err := os.Stat(nginxBin); err != nil {
		t.Skip("nginx not installed")
	}
	sim, ig := filepath.Join("..", "..", "bin", "simserver"), filepath.Join("..", "..", "bin", "infergate")
	for _, b := range []string{sim, ig} {
		if _, err := os.Stat(b); err != nil {
			t.Skipf("%s not built", b)
		}
	}
	cfg := BalanceConfig{
		Simserver: sim, Infergate: ig, InfergateArgs: []string{"--drain-delay", "0"},
		Nginx: nginxBin, NginxWorkers: "1", HAProxy: FindHAProxy(),
		Rate: 200, Healthy: 2 * time.Second, Slow: 3 * time.Second, KillRate: 100, KillFor: 3 * time.Second, Rounds: 1,
	}
	want := []string{PathInfergatePool}
	if cfg.HAProxy != "" {
		want = append(want, PathHAProxyLeastConn)
	} else {
		cfg.HAProxySkipped = "not installed"
	}
	want = append(want, PathNginxLeastConn)
	if testing.Verbose() {
		cfg.Log = os.Stderr
	}
	res, err := RunBalance(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Runs) != len(want) {
		t.Fatalf("%d runs, want %d (%v)", len(res.Runs), len(want), want)
	}
	for i, r := range res.Runs {
		// The peers' share of the slow replica is never 0; infergate's
		// may well be in 3 s.
		if r.Path != want[i] || r.Calls == 0 || !(r.HealthyP99 > 0) || !(r.SlowP99 > 0) || r.SlowShare < 0 || r.SlowShare > 1 ||
			(r.Path != PathInfergatePool && r.SlowShare == 0) {
			t.Errorf("run %d: %+v, want path %s with calls, p99s and the slow replica's share read", i, r, want[i])
		}
		if r.Path == PathInfergatePool && r.Failed > 0 {
			t.Errorf("infergate failed %d calls", r.Failed)
		}
		if r.KillCalls == 0 {
			t.Errorf("%s: no call in the kill phase", r.Path)
		}
	}
	if md := res.Markdown(); !strings.Contains(md, "| infergate |") {
		t.Errorf("report:\n%s", md)
	}
	t.Logf("\n%s", res.Markdown())
}
