package integration

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// demoSeeds and demoSeconds shorten what a new user runs first, `bin/demo
// -no-fault` for seeds 1-20: long enough to cover the cold start where the
// hedges' delay and the baselines are still guesses (hedges at about 3 s,
// a baseline page at 12 s, before issue 36).
const (
	demoSeeds   = 20
	demoSeconds = 14
	demoAtOnce  = 4
)

var (
	demoLoadLine = regexp.MustCompile(`load:\s+sent (\d+)\s+ok (\d+)\s+errors (\d+)\s+shed (\d+)`)
	// demoRow is a model's row: its name and route, and its calls.
	demoRow = regexp.MustCompile(`(?m)^(\S+)(?: \((\w+)\))?\s+(kserve|tf)\s+\S+\s+\S+\s+(\d+)`)
)

// TestDemoColdStartIsQuiet: the demo without a fault, on a healthy
// simserver, for 20 seeds: no call fails or is shed, no alert fires, and
// no route moves to its fallback (a few hedges may go there while the
// hedge delay is learnt; a route change would send it a resnet50's share).
func TestDemoColdStartIsQuiet(t *testing.T) {
	if testing.Short() {
		t.Skip("20 demo runs")
	}
	t.Parallel()
	var wg sync.WaitGroup
	sem := make(chan struct{}, demoAtOnce)
	for seed := 1; seed <= demoSeeds; seed++ {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			ctx, cancel := context.WithTimeout(context.Background(), time.Duration(demoSeconds+60)*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, filepath.Join(binDir, "demo"), "-no-fault", "-seconds", strconv.Itoa(demoSeconds),
				"-seed", strconv.Itoa(seed), "-rate-scale", "0.5", "-interval", "1h")
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Errorf("seed %d: demo: %v\n%s", seed, err, out)
				return
			}
			if msg := demoProblems(string(out)); msg != "" {
				t.Errorf("seed %d: %s\n%s", seed, msg, out)
			}
		})
	}
	wg.Wait()
}

// demoProblems reads the demo's final table and says what is wrong with a
// quiet run ("" nothing).
func demoProblems(out string) string {
	final := out[strings.LastIndex(out, "final"):]
	var problems []string
	m := demoLoadLine.FindStringSubmatch(final)
	if m == nil {
		return "no load line in the final table"
	}
	if m[3] != "0" || m[4] != "0" || m[1] != m[2] {
		problems = append(problems, fmt.Sprintf("sent %s, ok %s, errors %s, shed %s: want every call answered", m[1], m[2], m[3], m[4]))
	}
	if !strings.Contains(final, "alerts: none") {
		problems = append(problems, "an alert fired")
	}
	primary, fallback := 0, 0
	for _, r := range demoRow.FindAllStringSubmatch(final, -1) {
		if r[1] != "resnet50" {
			continue
		}
		n, _ := strconv.Atoi(r[4])
		if r[2] == "fallback" {
			fallback += n
		} else {
			primary += n
		}
	}
	if primary == 0 || fallback*50 > primary {
		problems = append(problems, fmt.Sprintf("resnet50: %d calls on the primary, %d on the fallback: want over 98%% on the primary (no route change)", primary, fallback))
	}
	return strings.Join(problems, "; ")
}

// demoProblems finds each fault in a final table.
func TestDemoProblems(t *testing.T) {
	table := func(fallback int, alerts, load string) string {
		return fmt.Sprintf(`infergate demo, final, 14s after load start (latency windows: 1m)

MODEL                PROTO   METHOD      CODE  CALLS/1m  REQ/S  P50 ms
resnet50             kserve  ModelInfer  ok         709   59.1    8.89
resnet50 (fallback)  kserve  ModelInfer  ok         %d    0.2   62.14
resnet50             tf      Predict     ok         253   21.1    7.85
simple               kserve  ModelInfer  ok         598   49.8    0.15

alerts: %s
load:  %s  in flight 0
`, fallback, alerts, load)
	}
	ok := "sent 2895  ok 2895  errors 0  shed 0"
	for _, tc := range []struct {
		name, out, want string
	}{
		{"quiet, two hedges on the fallback", table(2, "none", ok), ""},
		{"a route change", table(400, "none", ok), "no route change"},
		{"an alert", table(2, "1 firing: ModelErrorRatio", ok), "an alert fired"},
		{"failed calls", table(2, "none", "sent 2895  ok 2000  errors 895  shed 0"), "want every call answered"},
	} {
		got := demoProblems(tc.out)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
