package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestRulesFileErrorsNameRuleAndField: a bad rules file stops the start
// with every problem, each naming the rule and the field.
func TestRulesFileErrorsNameRuleAndField(t *testing.T) {
	_, err := parseConfig([]string{"--upstream", "a:1", "--rules", "testdata/rules.bad.yaml"})
	if err == nil {
		t.Fatal("bad rules accepted")
	}
	for _, want := range []string{
		`rules testdata/rules.bad.yaml: rules[0] ("A"): quantile: "p98", want p50, p90, p99 or p999`,
		`rules[1] ("B"): window: 5m0s, want 1s to 1m0s (for longer, add for:)`,
		`rules[2] ("C"): codes: "Internl" is not a failing gRPC code name (e.g. Internal)`,
		`rules[3] ("D"): severity: "page", want warning or critical; slope: "fast" is not a rate like 10ms/min`,
		`rules[4] (""): name: missing; field: "util", want utilization, memory_ratio, temperature or throttled`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	if code := run([]string{"--upstream", "a:1", "--rules", "testdata/rules.bad.yaml", "--check-config"}); code != 2 {
		t.Errorf("exit code %d, want 2", code)
	}
}

func TestExampleRulesAndToken(t *testing.T) {
	dir := t.TempDir()
	tok := filepath.Join(dir, "token")
	os.WriteFile(tok, []byte("s3cret\n"), 0o600)
	c, err := parseConfig([]string{"--upstream", "a:1", "--rules", "../../examples/rules/rules.yaml", "--admin-token-file", tok})
	if err != nil {
		t.Fatal(err)
	}
	if c.adminToken != "s3cret" || len(c.alerts.Rules) != 4 {
		t.Errorf("token %q, %d rules", c.adminToken, len(c.alerts.Rules))
	}
	empty := filepath.Join(dir, "empty")
	os.WriteFile(empty, nil, 0o600)
	if _, err := parseConfig([]string{"--upstream", "a:1", "--admin-token-file", empty}); err == nil || !strings.Contains(err.Error(), "admin_token_file") {
		t.Errorf("empty token file: %v", err)
	}
}

// TestRulesExportPromtool: the exported rules (built-in and the
// examples) pass promtool check rules.
func TestRulesExportPromtool(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool not installed (apt-get install prometheus): the export must be checked by the real tool")
	}
	for _, args := range [][]string{{"export"}, {"export", "--rules", "../../examples/rules/rules.yaml"}} {
		var out, errOut bytes.Buffer
		if code := rulesCommand(args, &out, &errOut); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errOut.String())
		}
		f := filepath.Join(t.TempDir(), "rules.yml")
		os.WriteFile(f, out.Bytes(), 0o644)
		cmd := exec.Command(promtool, "check", "rules", f)
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%v: promtool: %v\n%s\n%s", args, err, b, out.String())
		}
		if !strings.Contains(out.String(), "histogram_quantile") && len(args) > 1 {
			t.Errorf("example export has no quantile rule:\n%s", out.String())
		}
	}
}
