package main

import (
	"bytes"
	"fmt"
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

// TestRulesExportClassicFallback: an exported latency rule reads the
// native histograms, and on a Prometheus that stores only the classic
// buckets (native histograms not enabled) it still fires on a slow model
// and stays quiet on a fast one: promtool's rule unit tests over classic
// series (Debian's promtool 2.42 cannot write native input series; the
// native half runs in a real Prometheus in integration's dashboard test).
func TestRulesExportClassicFallback(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool not installed (apt-get install prometheus): the export must be checked by the real tool")
	}
	dir := t.TempDir()
	rules := filepath.Join(dir, "rules.yaml")
	os.WriteFile(rules, []byte(`rules:
  - name: ModelP99Over100ms
    kind: threshold
    quantile: p99
    window: 1m
    value: 100ms
    severity: critical
`), 0o644)
	var out, errOut bytes.Buffer
	if code := rulesCommand([]string{"export", "--rules", rules}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if !strings.Contains(out.String(), "rate(infergate_request_duration_seconds{") {
		t.Fatalf("the export does not read the native histogram:\n%s", out.String())
	}
	os.WriteFile(filepath.Join(dir, "exported.yml"), out.Bytes(), 0o644)
	// 10 calls a second each: "slow" has 9 of them between 100 and 250 ms,
	// "fast" all under 100 ms.
	var series strings.Builder
	for _, m := range []struct {
		model      string
		under100ms int
	}{{"slow", 1}, {"fast", 10}} {
		for _, b := range []struct {
			le     string
			perSec int
		}{{"0.1", m.under100ms}, {"0.25", 10}, {"+Inf", 10}} {
			fmt.Fprintf(&series, "      - series: 'infergate_request_duration_seconds_bucket{model=%q,method=\"/inference.GRPCInferenceService/ModelInfer\",le=%q}'\n        values: '0+%dx40'\n",
				m.model, b.le, 15*b.perSec)
		}
		fmt.Fprintf(&series, "      - series: 'infergate_request_duration_seconds_count{model=%q,method=\"/inference.GRPCInferenceService/ModelInfer\"}'\n        values: '0+150x40'\n", m.model)
	}
	test := filepath.Join(dir, "test.yml")
	os.WriteFile(test, []byte(`rule_files: [exported.yml]
evaluation_interval: 15s
tests:
  - interval: 15s
    input_series:
`+series.String()+`    alert_rule_test:
      - eval_time: 5m
        alertname: ModelP99Over100ms
        exp_alerts:
          - exp_labels: {model: slow, severity: critical}
`), 0o644)
	cmd := exec.Command(promtool, "test", "rules", test)
	cmd.Dir = dir
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("promtool test rules: %v\n%s\n%s", err, b, out.String())
	}
}
