package scenario

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestFailoverSmoke runs the real scenario, short (2 s faults), against
// bin/simserver and bin/infergate when they are built and infergate
// knows --fallback (its -h mentions "-fallback"); otherwise it skips, so
// it turns on by itself once the proxy side lands. It checks that every
// part runs and every call is accounted for, not the verdicts.
func TestFailoverSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	sim, ig := filepath.Join("..", "..", "bin", "simserver"), filepath.Join("..", "..", "bin", "infergate")
	for _, b := range []string{sim, ig} {
		if _, err := os.Stat(b); err != nil {
			t.Skipf("%s not built", b)
		}
	}
	help, _ := exec.Command(ig, "--help").CombinedOutput()
	if !strings.Contains(string(help), "-fallback") {
		t.Skip("bin/infergate has no --fallback flag")
	}
	cfg := FailoverConfig{
		Simserver: sim, Infergate: ig, Rate: 100,
		FaultTime: 2 * time.Second, Recovery: 2 * time.Second, Lead: time.Second,
	}
	if testing.Verbose() {
		cfg.Log = os.Stderr
	}
	rep, err := RunFailover(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Faults) != len(FailoverFaults) || !rep.Summary.Accounted || rep.Summary.Sent < 1000 {
		t.Fatalf("faults %d, summary %+v", len(rep.Faults), rep.Summary)
	}
	if rep.Summary.Outcomes[OutcomeOKFallback] == 0 {
		t.Errorf("no call answered by the fallback: %v", rep.Summary.Outcomes)
	}
	t.Log("\n" + rep.Markdown())
	if err := rep.WritePlots(t.TempDir()); err != nil {
		t.Error(err)
	}
}
