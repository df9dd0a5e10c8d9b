package main

import (
	"strings"
	"testing"

	"github.com/infergate/infergate/batcher"
)

// Issue 21: values that cannot work are refused by --check-config (exit
// 2) and at start, each error naming its field.
func TestCheckConfigRefusesValuesThatCannotWork(t *testing.T) {
	rule := func(fields string) []string {
		return []string{"rules:", "  - name: R", "    kind: errors", fields}
	}
	cases := []struct {
		name  string
		lines []string
		want  string
	}{
		{"action reboot", rule("    ratio: 5%\n    action: reboot"), `rules[0] ("R"): action: "reboot", want fallback`},
		{"error_ratio 200%", []string{"rules:", "  - name: R", "    kind: threshold", "    metric: error_ratio", "    value: 200%"}, `rules[0] ("R"): value: "200%", an error ratio is between 0 and 100%`},
		{"rate NaN", rule("    rate: NaN"), `rules[0] ("R"): rate: "NaN"`},
		{"repeat_interval 1ns", []string{"alerting:", "  route:", "    receiver: log", "    repeat_interval: 1ns"}, "route.repeat_interval: 1ns, must be at least 1s"},
		{"fallback cycle", []string{"routes:", "  - {model: a, fallback: {model: b}}", "  - {model: b, fallback: {model: a}}"}, "routes[a].fallback.model: fallback cycle a → b → a"},
		{"hostile template", rule("    ratio: 5%\n    annotations: {summary: '{{range 100000}}{{range 100000}}x{{end}}{{end}}'}"), `rules[0] ("R"): annotations.summary: template does about`},
		{"idempotent false + retry_unbatched", []string{"routes:", "  - {model: m, idempotent: false}", "batching:", "  mode: static", "  retry_unbatched: true", "  models: {m: {}}"},
			"config: batching.models.m.retry_unbatched: true, but routes[m].idempotent: false"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			file := writeYAML(t, append([]string{"upstream: a:1"}, tc.lines...)...)
			_, err := parseConfig([]string{"--config", file})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("parseConfig = %v, want %q", err, tc.want)
			}
			if code := run([]string{"--check-config", "--config", file}); code != 2 {
				t.Errorf("--check-config exits %d, want 2", code)
			}
		})
	}
	// The same route with retry_unbatched off for its model is valid.
	file := writeYAML(t, "upstream: a:1", "routes:", "  - {model: m, idempotent: false}", "batching:", "  mode: static", "  retry_unbatched: true", "  models: {m: {retry_unbatched: false}, n: {}}")
	if code := run([]string{"--check-config", "--config", file}); code != 0 {
		t.Errorf("--check-config of a valid config exits %d", code)
	}
}

// The routes' idempotent: false reaches the batcher: its policy for the
// model says no retry_unbatched, whatever the batching section says.
func TestNonIdempotentReachesTheBatcher(t *testing.T) {
	file := writeYAML(t, "upstream: a:1", "routes:", "  - {model: m, idempotent: false}", "batching:", "  mode: static", "  retry_unbatched: true", "  models: {m: {retry_unbatched: false}, n: {}}")
	c, err := parseConfig([]string{"--config", file})
	if err != nil {
		t.Fatal(err)
	}
	c.Batching.Models["m"] = batcher.ModelSettings{} // as if the check had let it through
	b, err := newBatcher(c.Batching, nonIdempotentModels(c.RoutingConfig))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if p := b.Policies(); p["m"].RetryUnbatched || !p["n"].RetryUnbatched {
		t.Errorf("retry_unbatched: m %v (not idempotent), n %v", p["m"].RetryUnbatched, p["n"].RetryUnbatched)
	}
}
