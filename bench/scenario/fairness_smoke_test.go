package scenario

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestFairnessSmoke runs bench fairness short (4 s per case, one round)
// with real processes: bin/simserver, bin/infergate --flow-control and,
// when installed, HAProxy. Through infergate the critical tenant has
// every call answered beside tenants offering twice the capacity, the
// two standard tenants get their fair shares (Jain's index), and when
// the critical tenant wants 90% the standard ones still get their
// minimum share. No latency is bounded here: that is bench fairness's to
// report.
func TestFairnessSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	sim, ig := filepath.Join("..", "..", "bin", "simserver"), filepath.Join("..", "..", "bin", "infergate")
	for _, b := range []string{sim, ig} {
		if _, err := os.Stat(b); err != nil {
			t.Skipf("%s not built", b)
		}
	}
	cfg := FairnessConfig{Simserver: sim, Infergate: ig, InfergateArgs: []string{"--drain-delay", "0"},
		HAProxy: FindHAProxy(), Only: []string{"overload", "critical-heavy"}, Duration: 4 * time.Second, Rounds: 1}
	if cfg.HAProxy == "" {
		cfg.HAProxySkipped = "not installed"
	}
	if testing.Verbose() {
		cfg.Log = os.Stderr
	}
	res, err := RunFairness(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, r := range res.Runs {
		if r.Path != PathInfergateFlow {
			continue
		}
		seen++
		a := r.Tenants[0]
		if a.Answered < 0.95 {
			t.Errorf("%s: the critical tenant had %.1f%% of its calls answered (%v), want 95%% or more", r.Case, 100*a.Answered, a.Errors)
		}
		var lower, all float64
		for _, tr := range r.Tenants {
			all += tr.Goodput
			if tr.Band != "critical" {
				lower += tr.Goodput
			}
		}
		switch r.Case {
		case "overload":
			if r.Jain < 0.9 {
				t.Errorf("overload: Jain's index %.3f over the standard tenants' shares, want 0.9 or more (%s)", r.Jain, r.line())
			}
		case "critical-heavy":
			if all == 0 || lower/all < 0.04 {
				t.Errorf("critical-heavy: the standard tenants got %.1f%% of the answers, want their minimum share (%s)", 100*lower/all, r.line())
			}
		}
	}
	if seen != 2 {
		t.Fatalf("%d infergate runs, want 2", seen)
	}
	if md := res.Markdown(); len(md) == 0 {
		t.Error("no report")
	}
}

func TestFairnessSeesBatchingInInfergateArgs(t *testing.T) {
	for _, c := range []struct {
		args []string
		want bool
	}{
		{nil, false},
		{[]string{"--batching", "adaptive", "--batch-models", "resnet50"}, true},
		{[]string{"--batching=static"}, true},
		{[]string{"--batching", "off"}, false},
		{[]string{"--batching-max-batch", "8"}, false},
	} {
		if got := batched(c.args); got != c.want {
			t.Errorf("batched(%q) = %v, want %v", c.args, got, c.want)
		}
	}
}
