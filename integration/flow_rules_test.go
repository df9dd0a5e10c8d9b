package integration

import (
	"os/exec"
	"testing"
)

// TestTenantSLORulesCheck: the per-tenant SLO rules shipped for
// Prometheus are valid rule files (promtool check rules).
func TestTenantSLORulesCheck(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool not installed (Debian package prometheus; .ci/run installs it)")
	}
	out, err := exec.Command(promtool, "check", "rules", "../examples/rules/tenant-slo.yaml").CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
}
