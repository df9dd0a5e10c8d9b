package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/infergate/infergate/proto/kservepb"
)

// TestDamagedStateFilesKeepServing: an alert state file that used to
// crash infergate at start ({"groups":{"x":null}}, SIGSEGV) or random
// bytes in it, and a truncated baseline file, are set aside, and the
// proxy serves model calls and stops cleanly on SIGTERM.
func TestDamagedStateFilesKeepServing(t *testing.T) {
	t.Parallel()
	for name, state := range map[string]string{
		"null group":   `{"version":1,"groups":{"x":null}}`,
		"random bytes": "\x9c\x01\xff\x00garbage",
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			stateFile := filepath.Join(dir, "alerts.json")
			baselineFile := filepath.Join(dir, "baseline.json")
			if err := os.WriteFile(stateFile, []byte(state), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(baselineFile, []byte(`{"version":1,"models":{"m":{"recen`), 0o600); err != nil {
				t.Fatal(err)
			}
			rules := filepath.Join(dir, "rules.yaml")
			if err := os.WriteFile(rules, []byte("baseline:\n  file: "+baselineFile+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			sim := startSim(t)
			gate := startProxy(t, sim.grpc, "--alert-state-file", stateFile, "--rules", rules)
			if _, err := kservepb.NewGRPCInferenceServiceClient(dial(t, gate.grpc)).ModelInfer(testCtx(t), simpleRequest("after-damage")); err != nil {
				t.Fatalf("model call through a proxy started on damaged files: %v", err)
			}
			fams := scrape(t, gate.admin)
			wantDamaged := 1.0
			if name == "null group" {
				wantDamaged = 0 // parsed; the null group alone is skipped
			}
			if got := counterSum(fams, "infergate_state_file_damaged_total", map[string]string{"file": "alert_state"}); got != wantDamaged {
				t.Errorf("alert_state damaged = %v, want %v", got, wantDamaged)
			}
			if got := counterSum(fams, "infergate_state_file_damaged_total", map[string]string{"file": "baseline"}); got != 1 {
				t.Errorf("baseline damaged = %v, want 1", got)
			}
			matches, _ := filepath.Glob(baselineFile + ".corrupt-*")
			if len(matches) != 1 {
				t.Errorf("baseline set aside as %v, want one NAME.corrupt-TIMESTAMP", matches)
			}
			if wantDamaged == 1 {
				_, body := httpGet(t, "http://"+gate.admin+"/api/v1/alerts")
				if !strings.Contains(body, "state_reset") {
					t.Errorf("/api/v1/alerts does not say the state was reset: %s", body)
				}
			}
			if err := gate.sigterm(t); err != nil {
				t.Fatalf("exit after SIGTERM: %v", err)
			}
		})
	}
}
