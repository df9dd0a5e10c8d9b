package scenario

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/infergate/infergate/bench/load"
)

// TestOverheadSmoke runs the real scenario, tiny, against bin/simserver and
// bin/infergate when they are built (make build), through bench's byte
// relay (bin/bench relay, the path tcp-relay), through nginx when it is
// installed, through HAProxy in both modes (paths haproxy and haproxy-tcp)
// when it is installed (.ci/run installs both), and with ghz beside the project's load when ghz is installed
// (.ci/run installs it): a small call and a 16 MiB one on every path, so
// that every path's and both clients' message size limits are exercised.
// It checks that every part runs and nothing fails, not the numbers.
func TestOverheadSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	sim, ig := filepath.Join("..", "..", "bin", "simserver"), filepath.Join("..", "..", "bin", "infergate")
	benchBin := filepath.Join("..", "..", "bin", "bench")
	for _, b := range []string{sim, ig, benchBin} {
		if _, err := os.Stat(b); err != nil {
			t.Skipf("%s not built", b)
		}
	}
	cfg := OverheadConfig{
		Simserver: sim, Infergate: ig, NginxWorkers: "1", ByteRelay: benchBin,
		// Stop at once at the end instead of after the default 5 s of
		// draining for a load balancer.
		InfergateArgs: []string{"--drain-delay", "0"},
		Ghz:           FindGhz(),
		ProtoDir:      filepath.Join("..", "..", "proto", "defs"),
		Payloads: []PayloadSpec{
			{Name: "simple", Model: "simple", Inputs: []load.Tensor{
				{Name: "INPUT0", Datatype: "INT32", Shape: []int64{1, 16}}, {Name: "INPUT1", Datatype: "INT32", Shape: []int64{1, 16}}}},
			{Name: "16MiB", Shape: []int64{1, 4 << 20}},
		},
		Callers: []int{2}, Conns: []int{1}, Duration: 300 * time.Millisecond, Warmup: -1, OpenBase: "slowest",
	}
	if _, err := os.Stat(nginxBin); err == nil {
		cfg.Nginx = nginxBin
	}
	if hp := FindHAProxy(); hp != "" {
		cfg.HAProxy, cfg.HAProxyTCP = hp, true
	} else {
		t.Log("haproxy not installed: the paths haproxy and haproxy-tcp are left out")
	}
	if cfg.Ghz == "" {
		t.Log("ghz not installed: measuring with the project's load only")
	}
	if testing.Verbose() {
		cfg.Log = os.Stderr
	}
	rep, err := RunOverhead(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	tools := 1
	if cfg.Ghz != "" {
		tools = 2
	}
	paths := len(rep.Setup.Paths)
	want := []string{PathByteRelay}
	if cfg.HAProxy != "" {
		want = append(want, PathHAProxy, PathHAProxyTCP)
	}
	for _, name := range want {
		if !slices.ContainsFunc(rep.Setup.Paths, func(p Path) bool { return p.Name == name }) {
			t.Errorf("paths %v lack %s", rep.Setup.Paths, name)
		}
	}
	for _, p := range rep.Payloads {
		if len(p.Runs) != 2*tools*paths || len(p.Cells) != 2*tools {
			t.Errorf("%s: %d runs, %d cells; want %d and %d", p.Name, len(p.Runs), len(p.Cells), 2*tools*paths, 2*tools)
		}
		for _, r := range p.Runs {
			// The peers are other people's software: a call one of
			// them fails on a loaded machine (HAProxy answered two 16
			// MiB calls INTERNAL once in make test) is for the report,
			// not a failure of this test; ours and the direct path's
			// fail nothing.
			peer := slices.Contains([]string{PathNginx, PathHAProxy, PathHAProxyTCP}, strings.Split(r.Label, "/")[1])
			switch {
			case r.Mode == load.Closed && r.Completed == 0:
				t.Errorf("%s: no call completed (%d failed %v)", r.Label, r.Failed, r.Errors)
			case r.Failed != 0 && peer:
				t.Logf("%s (a peer): %d ok, %d failed %v", r.Label, r.Completed, r.Failed, r.Errors)
			case r.Failed != 0:
				t.Errorf("%s: %d ok, %d failed %v", r.Label, r.Completed, r.Failed, r.Errors)
			}
		}
	}
	if big := rep.Payloads[1].RequestBytes; big < 16<<20 {
		t.Errorf("16MiB request is %d bytes", big)
	}
	md := rep.Markdown()
	if cfg.Ghz != "" && cfg.Nginx != "" && !strings.Contains(md, "bench and ghz side by side") {
		t.Errorf("markdown lacks the agreement table:\n%s", md)
	}
	if cfg.HAProxy != "" && (!strings.Contains(md, "vs haproxy") || rep.Payloads[0].Cells[0].InfergateVsHAProxy == nil) {
		t.Errorf("no infergate vs haproxy ratio:\n%s", md)
	}
}
