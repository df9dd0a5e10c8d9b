package scenario

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/infergate/infergate/bench/internal/stubserver"
	"github.com/infergate/infergate/bench/load"
	"github.com/infergate/infergate/bench/report"
)

// TestMeasureOverheadAgainstStub runs the whole measurement loop with the
// in-process stub as the model server: direct, a second stub standing in for
// infergate, and Debian's nginx (when installed) proxying to the stub.
func TestMeasureOverheadAgainstStub(t *testing.T) {
	direct, err := stubserver.Start(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Stop()
	other, err := stubserver.Start(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Stop()
	paths := []Path{{PathDirect, direct.Addr}, {PathInfergate, other.Addr}}
	if _, err := os.Stat(nginxBin); err == nil {
		listen, err := FreeAddr()
		if err != nil {
			t.Fatal(err)
		}
		ng, err := StartNginx(t.Context(), nginxBin, NginxConfig{Dir: t.TempDir(), Listen: listen, Upstream: direct.Addr, Workers: "1"})
		if err != nil {
			t.Fatal(err)
		}
		defer ng.Stop()
		paths = append(paths, Path{PathNginx, listen})
	}
	cfg := OverheadConfig{
		Simserver: "unused", Duration: 100 * time.Millisecond, Warmup: -1, Conns: 1,
		Payloads: []PayloadSpec{{Name: "small", Shape: []int64{1, 16}, Concurrency: 2}, {Name: "large", Shape: []int64{1, 262144}, Concurrency: 2}},
	}
	_ = cfg.Validate() // fills defaults; the binary check does not matter here
	rep, err := MeasureOverhead(t.Context(), cfg, paths)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Payloads) != 2 {
		t.Fatalf("payloads = %d", len(rep.Payloads))
	}
	for _, p := range rep.Payloads {
		if len(p.Runs) != 2*len(paths) || len(p.Paths) != len(paths) {
			t.Errorf("%s: %d runs, %d path summaries", p.Name, len(p.Runs), len(p.Paths))
		}
		for _, ps := range p.Paths {
			if ps.Failed != 0 || !(ps.MaxRPS.Median > 0) || !(ps.P99.Median > 0) {
				t.Errorf("%s/%s: %+v", p.Name, ps.Path, ps)
			}
		}
		if p.Paths[0].VsDirect.Median != 1 || p.Paths[0].AddedP50.Median != 0 {
			t.Errorf("%s: direct compared with itself: %+v", p.Name, p.Paths[0])
		}
		if p.Rate.Median <= 0 {
			t.Errorf("%s: open-loop rate %v", p.Name, p.Rate)
		}
	}
	if rep.Payloads[1].RequestBytes < 1<<20 {
		t.Errorf("large payload is %d bytes", rep.Payloads[1].RequestBytes)
	}
	md := rep.Markdown()
	for _, path := range paths {
		if !strings.Contains(md, "| "+path.Name) {
			t.Errorf("markdown lacks path %s:\n%s", path.Name, md)
		}
	}
}

// fakeRun is a finished run with the given label and figures.
func fakeRun(label string, mode load.Mode, rps, p50, p99 float64) *load.Result {
	r := &load.Result{Label: label, Mode: mode, Throughput: rps, Completed: 100, RequestBytes: 4200,
		Latency: load.Latency{P50: p50, P99: p99}}
	if mode == load.Open {
		r.Rate = 500
		r.Arrival = "fixed"
	}
	return r
}

func TestOverheadSummary(t *testing.T) {
	cfg := OverheadConfig{Simserver: "x", Repeat: 3, Payloads: []PayloadSpec{{Name: "4KiB", Shape: []int64{1, 1024}, Concurrency: 32}}}
	_ = cfg.Validate()
	paths := []Path{{PathDirect, "a"}, {PathInfergate, "b"}, {PathNginx, "c"}}
	rep := newOverheadReport(cfg, paths)
	// Per repetition: direct, infergate, nginx (closed rps; open p50, p99).
	figures := [][3][3]float64{
		{{1000, 0.2, 1.0}, {900, 0.3, 1.5}, {800, 0.25, 1.2}},
		{{1100, 0.2, 1.1}, {880, 0.32, 1.4}, {1000, 0.26, 1.3}},
		{{1000, 0.1, 0.9}, {950, 0.2, 1.9}, {500, 0.3, 1.0}},
	}
	for i, f := range figures {
		for j, p := range paths {
			rep.add(0, fakeRun(fmt.Sprintf("4KiB/%s/closed#%d", p.Name, i+1), load.Closed, f[j][0], 0, 0))
			rep.add(0, fakeRun(fmt.Sprintf("4KiB/%s/open#%d", p.Name, i+1), load.Open, 0, f[j][1], f[j][2]))
		}
	}
	rep.summarise()
	ps := rep.Payloads[0]
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
	ig := ps.Paths[1]
	if !near(ig.MaxRPS.Median, 900) || !near(ig.MaxRPS.Min, 880) || !near(ig.MaxRPS.Max, 950) {
		t.Errorf("infergate max rps = %+v", ig.MaxRPS)
	}
	// Added p99 per repetition: 0.5, 0.3, 1.0.
	if !near(ig.AddedP99.Median, 0.5) || !near(ig.AddedP99.Min, 0.3) || !near(ig.AddedP99.Max, 1.0) {
		t.Errorf("infergate added p99 = %+v", ig.AddedP99)
	}
	// Throughput vs direct per repetition: 0.9, 0.8, 0.95.
	if !near(ig.VsDirect.Median, 0.9) {
		t.Errorf("infergate vs direct = %+v", ig.VsDirect)
	}
	// infergate/nginx per repetition: 1.125, 0.88, 1.9.
	if ps.InfergateVsNginx == nil || !near(ps.InfergateVsNginx.Median, 1.125) || !near(ps.InfergateVsNginx.Max, 1.9) {
		t.Errorf("infergate vs nginx = %+v", ps.InfergateVsNginx)
	}
	if ig.Saturated || ps.Paths[2].Saturated {
		t.Errorf("saturated at 500/s: infergate (max 900) %v, nginx (max 800) %v", ig.Saturated, ps.Paths[2].Saturated)
	}
	md := rep.Markdown()
	for _, want := range []string{
		"## Proxy overhead: kserve identity_fp32, 5s per measurement (+1s warmup), 3 repetitions, median [min..max]",
		"### 4KiB (shape [1 1024], request 4200 bytes): max rps at c=32, latency at 500/s",
		"| direct    | 1000 [1000..1100] |                1.00x |",
		"| infergate |    900 [880..950] | 0.90x [0.80x..0.95x] |",
		"+0.500 [+0.300..+1.000] |",
		"infergate / nginx max throughput: 1.12x [0.88x..1.90x]",
		"nginx: worker_processes auto",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	var buf bytes.Buffer
	if err := report.WriteJSON(&buf, rep); err != nil {
		t.Fatal(err)
	}
	var back map[string]any
	if err := json.Unmarshal(buf.Bytes(), &back); err != nil {
		t.Fatalf("json does not parse: %v", err)
	}
	if !strings.Contains(buf.String(), `"added_p99_ms": {`) || !strings.Contains(buf.String(), `"infergate_vs_nginx_throughput"`) {
		t.Errorf("json lacks summary fields:\n%s", buf.String())
	}
	if runs := rep.RunsMarkdown(); !strings.Contains(runs, "4KiB/nginx/open#3") {
		t.Errorf("runs table lacks a run:\n%s", runs)
	}
}

func TestSpreadOf(t *testing.T) {
	s := spreadOf([]float64{3, 1, math.NaN(), 2, 10})
	if s.Median != 2.5 || s.Min != 1 || s.Max != 10 || s.N != 4 {
		t.Errorf("spreadOf = %+v", s)
	}
	if e := spreadOf(nil); !math.IsNaN(e.Median) || e.N != 0 {
		t.Errorf("empty spread = %+v", e)
	}
	data, err := json.Marshal(spreadOf(nil))
	if err != nil || string(data) != `{"median":null,"min":null,"max":null,"n":0}` {
		t.Errorf("json = %s, %v", data, err)
	}
}

func TestOverheadSaturatedPath(t *testing.T) {
	cfg := OverheadConfig{Simserver: "x", Payloads: []PayloadSpec{{Name: "1MiB", Shape: []int64{1, 262144}, Concurrency: 8}}}
	_ = cfg.Validate()
	rep := newOverheadReport(cfg, []Path{{PathDirect, "a"}, {PathNginx, "c"}})
	rep.add(0, fakeRun("1MiB/direct/closed#1", load.Closed, 1000, 0, 0))
	rep.add(0, fakeRun("1MiB/nginx/closed#1", load.Closed, 510, 0, 0))
	rep.add(0, fakeRun("1MiB/direct/open#1", load.Open, 0, 4, 17))
	rep.add(0, fakeRun("1MiB/nginx/open#1", load.Open, 0, 600, 1000))
	rep.summarise()
	if ps := rep.Payloads[0].Paths; ps[0].Saturated || !ps[1].Saturated {
		t.Errorf("saturated: direct %v, nginx %v; want false, true", ps[0].Saturated, ps[1].Saturated)
	}
	md := rep.Markdown()
	if !strings.Contains(md, "|  600 * | 1000 * |") || !strings.Contains(md, "mostly queueing") {
		t.Errorf("markdown does not flag the saturated path:\n%s", md)
	}
}
