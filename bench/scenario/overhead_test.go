package scenario

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/infergate/infergate/bench/load"
	"github.com/infergate/infergate/bench/report"
	"github.com/infergate/infergate/internal/stubserver"
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
		Simserver: "unused", Duration: 100 * time.Millisecond, Warmup: -1, Conns: []int{1},
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
		if len(p.Runs) != 2*len(paths) {
			t.Errorf("%s: %d runs", p.Name, len(p.Runs))
		}
		if len(p.Cells) != 2 || p.Cells[0].Mode != load.Closed || p.Cells[1].Mode != load.Open {
			t.Fatalf("%s: cells %+v, want one closed and one open", p.Name, p.Cells)
		}
		for _, c := range p.Cells {
			if len(c.Paths) != len(paths) {
				t.Errorf("%s/%s: %d path summaries", p.Name, c.key(), len(c.Paths))
			}
			for _, ps := range c.Paths {
				if ps.Failed != 0 || !(ps.RPS.Median > 0) || !(ps.P99.Median > 0) {
					t.Errorf("%s/%s/%s: %+v", p.Name, c.key(), ps.Path, ps)
				}
			}
		}
		closed, open := p.Cells[0], p.Cells[1]
		if closed.Paths[0].VsDirect.Median != 1 || closed.Paths[0].AddedP50.Median != 0 {
			t.Errorf("%s: direct compared with itself: %+v", p.Name, closed.Paths[0])
		}
		if open.Rate == nil || open.Rate.Median <= 0 {
			t.Errorf("%s: open-loop rate %v", p.Name, open.Rate)
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

func closedC(callers, conns int) cellKey {
	return cellKey{Mode: load.Closed, Callers: callers, Conns: conns}
}
func openX(conns int) cellKey { return cellKey{Mode: load.Open, Conns: conns} }

// addFake stores a finished run of payload 0 with the given figures.
func addFake(rep *OverheadReport, tool, path string, k cellKey, r int, rps, p50, p99 float64) {
	res := &load.Result{Label: runLabel(rep.Payloads[0].Name, tool, path, k, r), Mode: k.Mode, Throughput: rps,
		Completed: 100, RequestBytes: 4200, Conns: k.Conns, Concurrency: k.Callers, Latency: load.Latency{P50: p50, P99: p99}}
	if k.Mode == load.Open {
		res.Rate, res.Arrival = 500, "fixed"
	}
	rep.add(0, runKey{tool, path, k, r}, res)
}

func TestOverheadSummary(t *testing.T) {
	cfg := OverheadConfig{Simserver: "x", Repeat: 3, Conns: []int{1}, Payloads: []PayloadSpec{{Name: "4KiB", Shape: []int64{1, 1024}, Concurrency: 32}}}
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
			addFake(rep, ToolBench, p.Name, closedC(32, 1), i+1, f[j][0], 0.5, 2)
			addFake(rep, ToolBench, p.Name, openX(1), i+1, 500, f[j][1], f[j][2])
		}
	}
	rep.summarise()
	ps := rep.Payloads[0]
	if len(ps.Cells) != 2 || ps.Agreement != nil {
		t.Fatalf("cells %d, agreement %v; want 2 cells and no agreement without ghz", len(ps.Cells), ps.Agreement)
	}
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
	closed, open := ps.Cells[0], ps.Cells[1]
	ig := closed.Paths[1]
	if !near(ig.RPS.Median, 900) || !near(ig.RPS.Min, 880) || !near(ig.RPS.Max, 950) {
		t.Errorf("infergate max rps = %+v", ig.RPS)
	}
	// Throughput vs direct per repetition: 0.9, 0.8, 0.95.
	if !near(ig.VsDirect.Median, 0.9) {
		t.Errorf("infergate vs direct = %+v", ig.VsDirect)
	}
	// infergate/nginx per repetition: 1.125, 0.88, 1.9.
	if closed.InfergateVsNginx == nil || !near(closed.InfergateVsNginx.Median, 1.125) || !near(closed.InfergateVsNginx.Max, 1.9) {
		t.Errorf("infergate vs nginx = %+v", closed.InfergateVsNginx)
	}
	// Added p99 per repetition: 0.5, 0.3, 1.0.
	oig := open.Paths[1]
	if !near(oig.AddedP99.Median, 0.5) || !near(oig.AddedP99.Min, 0.3) || !near(oig.AddedP99.Max, 1.0) {
		t.Errorf("infergate added p99 = %+v", oig.AddedP99)
	}
	if oig.Saturated || open.Paths[2].Saturated {
		t.Errorf("saturated at 500/s: infergate (max 900) %v, nginx (max 800) %v", oig.Saturated, open.Paths[2].Saturated)
	}
	md := rep.Markdown()
	for _, want := range []string{
		"## Proxy overhead: kserve, 5s per measurement (+1s warmup), 3 interleaved repetitions, median [min..max]; clients: bench",
		"### 4KiB identity_fp32, shape [1 1024], request 4200 bytes: closed-loop max rps",
		"| 32      | 1     | direct    | 1000 [1000..1100] |",
		"| 32      | 1     | infergate |    900 [880..950] | 0.90x [0.80x..0.95x] | 1.12x [0.88x..1.90x] |",
		"| open 500/s x1 | infergate |",
		"+0.500 [+0.300..+1.000] |",
		"ghz: skipped (no ghz binary given)",
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
	if runs := rep.RunsMarkdown(); !strings.Contains(runs, "4KiB/nginx/open x1#3") {
		t.Errorf("runs table lacks a run:\n%s", runs)
	}
}

// TestOverheadAgreement: where bench and ghz rank infergate and nginx
// differently, the report says so; where they agree, it says that.
func TestOverheadAgreement(t *testing.T) {
	cfg := OverheadConfig{Simserver: "x", Ghz: "ghz", Conns: []int{4}, Callers: []int{8}, Payloads: []PayloadSpec{{Name: "simple", Shape: []int64{1, 16}}}}
	_ = cfg.Validate()
	rep := newOverheadReport(cfg, []Path{{PathDirect, "a"}, {PathInfergate, "b"}, {PathNginx, "c"}})
	c8 := closedC(8, 4)
	// bench: infergate 1.04x nginx, adds 0.5 ms at p50 against nginx's 0.25.
	addFake(rep, ToolBench, PathDirect, c8, 1, 10000, 1.0, 3)
	addFake(rep, ToolBench, PathInfergate, c8, 1, 5200, 1.5, 4)
	addFake(rep, ToolBench, PathNginx, c8, 1, 5000, 1.25, 5)
	// ghz: infergate 0.88x nginx, and also adds more at p50.
	addFake(rep, ToolGhz, PathDirect, c8, 1, 11000, 1.0, 3)
	addFake(rep, ToolGhz, PathInfergate, c8, 1, 5280, 1.7, 4)
	addFake(rep, ToolGhz, PathNginx, c8, 1, 6000, 1.5, 5)
	for _, tool := range []string{ToolBench, ToolGhz} {
		for _, p := range []string{PathDirect, PathInfergate, PathNginx} {
			addFake(rep, tool, p, openX(4), 1, 500, 1, 2)
		}
	}
	rep.summarise()
	p := rep.Payloads[0]
	if len(p.Cells) != 4 {
		t.Fatalf("cells = %d, want 2 loads x 2 clients", len(p.Cells))
	}
	got := map[string]Agreement{}
	for _, a := range p.Agreement {
		got[cellKey{a.Mode, a.Callers, a.Conns}.String()+" "+a.Figure] = a
	}
	tp := got["c8 x4 throughput"]
	if tp.Agree || tp.BenchFaster != PathInfergate || tp.GhzFaster != PathNginx || math.Abs(tp.Ghz-0.88) > 1e-9 {
		t.Errorf("throughput agreement = %+v; want bench infergate, ghz nginx (0.88x), disagree", tp)
	}
	if a := got["c8 x4 added p50"]; !a.Agree || a.BenchFaster != PathNginx {
		t.Errorf("added p50 agreement = %+v; want both nginx", a)
	}
	if a := got["c8 x4 added p99"]; !a.Agree || a.BenchFaster != PathInfergate {
		t.Errorf("added p99 agreement = %+v; want both infergate", a)
	}
	if a := got["open x4 added p50"]; !a.Agree || a.BenchFaster != "tie" {
		t.Errorf("open added p50 agreement = %+v; want a tie", a)
	}
	md := rep.Markdown()
	for _, want := range []string{
		"clients: bench, ghz",
		"| rps | rps ghz | vs direct | vs direct ghz | vs nginx | vs nginx ghz |",
		"| c8 x4 | throughput | 1.04x | 0.88x | infergate | nginx | **DISAGREE** |",
		"| c8 x4 | added p50 | +0.250 | +0.200 | nginx | nginx | agree |",
		"The clients disagree on 1 of",
	} {
		if !strings.Contains(strings.Join(strings.Fields(md), " "), want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
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
	addFake(rep, ToolBench, PathDirect, closedC(8, 2), 1, 1000, 0, 0)
	addFake(rep, ToolBench, PathNginx, closedC(8, 2), 1, 510, 0, 0)
	addFake(rep, ToolBench, PathDirect, openX(2), 1, 0, 4, 17)
	addFake(rep, ToolBench, PathNginx, openX(2), 1, 0, 600, 1000)
	rep.summarise()
	if ps := rep.Payloads[0].Cells[1].Paths; ps[0].Saturated || !ps[1].Saturated {
		t.Errorf("saturated: direct %v, nginx %v; want false, true", ps[0].Saturated, ps[1].Saturated)
	}
	md := rep.Markdown()
	if !strings.Contains(md, "| open 500/s x2 | nginx  | 600 * | 1000 * |") || !strings.Contains(md, "mostly queueing") {
		t.Errorf("markdown does not flag the saturated path:\n%s", md)
	}
}

// TestMeasureOverheadMatrix: every closed-loop caller count on every
// connection count, then the open loop on each connection count, on every
// path in turn, round after round; each run really uses its callers and
// connections.
func TestMeasureOverheadMatrix(t *testing.T) {
	var paths []Path
	for _, name := range []string{PathDirect, PathInfergate} {
		s, err := stubserver.Start(nil)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Stop()
		paths = append(paths, Path{name, s.Addr})
	}
	cfg := OverheadConfig{
		Simserver: "unused", Duration: 50 * time.Millisecond, Warmup: -1, Repeat: 2,
		Callers: []int{1, 3}, Conns: []int{1, 2}, OpenBase: "slowest",
		Payloads: []PayloadSpec{{Name: "simple", Model: "simple", Inputs: []load.Tensor{
			{Name: "INPUT0", Datatype: "INT32", Shape: []int64{1, 16}}, {Name: "INPUT1", Datatype: "INT32", Shape: []int64{1, 16}}}}},
	}
	if err := cfg.Validate(); err != nil && !strings.Contains(err.Error(), "simserver") {
		t.Fatal(err)
	}
	rep, err := MeasureOverhead(t.Context(), cfg, paths)
	if err != nil {
		t.Fatal(err)
	}
	p := rep.Payloads[0]
	var got []string
	for _, r := range p.Runs {
		got = append(got, r.Label)
	}
	var want []string
	for rep := 1; rep <= 2; rep++ {
		for _, k := range []cellKey{closedC(1, 1), closedC(3, 1), closedC(1, 2), closedC(3, 2), openX(1), openX(2)} {
			for _, path := range []string{PathDirect, PathInfergate} {
				want = append(want, runLabel("simple", ToolBench, path, k, rep))
			}
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("runs in order:\n%v\nwant:\n%v", got, want)
	}
	for i, r := range p.Runs {
		k := p.keys[i].cell
		if r.Conns != k.Conns || (k.Mode == load.Closed && r.Concurrency != k.Callers) || r.Mode != k.Mode || r.Failed != 0 || r.Completed == 0 {
			t.Errorf("%s: mode %s, %d callers, %d conns, %d ok, %d failed", r.Label, r.Mode, r.Concurrency, r.Conns, r.Completed, r.Failed)
		}
	}
	if p.RequestBytes < 128 || len(p.Cells) != 6 {
		t.Errorf("request %d bytes (two INT32 [1,16] inputs), %d cells", p.RequestBytes, len(p.Cells))
	}
	// Open rate: half the slowest path's best closed-loop rate that round.
	for _, c := range p.Cells[4:] {
		for rep := 1; rep <= 2; rep++ {
			slowest := math.Min(p.capacity(ToolBench, PathDirect, rep), p.capacity(ToolBench, PathInfergate, rep))
			if o := p.find(runKey{ToolBench, PathDirect, c.key(), rep}); math.Abs(o.Rate-slowest/2) > 1e-6 {
				t.Errorf("%s: rate %g, want half of %g", o.Label, o.Rate, slowest)
			}
		}
	}
}

// TestOverheadVsHAProxy: with the path haproxy, the throughput table gets
// infergate's ratio to HAProxy beside its ratio to nginx, and the setup
// says how HAProxy ran; a skipped HAProxy is said in the notes.
func TestOverheadVsHAProxy(t *testing.T) {
	cfg := OverheadConfig{Simserver: "x", Repeat: 2, Conns: []int{1}, Callers: []int{8}, HAProxy: "x", HAProxyTCP: true,
		Payloads: []PayloadSpec{{Name: "simple", Shape: []int64{1, 16}}}}
	_ = cfg.Validate()
	paths := []Path{{PathDirect, "a"}, {PathInfergate, "b"}, {PathNginx, "c"}, {PathHAProxy, "d"}, {PathHAProxyTCP, "e"}}
	rep := newOverheadReport(cfg, paths)
	c8 := closedC(8, 1)
	for r, rps := range [][]float64{{1000, 800, 700, 1000, 900}, {1100, 900, 750, 900, 950}} {
		for i, p := range paths {
			addFake(rep, ToolBench, p.Name, c8, r+1, rps[i], 0.5, 1)
			addFake(rep, ToolBench, p.Name, openX(1), r+1, 400, 0.5, 1)
		}
	}
	rep.summarise()
	closed := rep.Payloads[0].Cells[0]
	// infergate / haproxy per repetition: 0.8 and 1.0.
	if closed.InfergateVsHAProxy == nil || math.Abs(closed.InfergateVsHAProxy.Median-0.9) > 1e-9 {
		t.Errorf("infergate vs haproxy = %+v", closed.InfergateVsHAProxy)
	}
	md := rep.Markdown()
	for _, want := range []string{
		"| callers | conns | path        |               rps |            vs direct |             vs nginx |           vs haproxy | failed |",
		"| 8       | 1     | infergate   |    850 [800..900] | 0.81x [0.80x..0.82x] | 1.17x [1.14x..1.20x] | 0.90x [0.80x..1.00x] |      0 |",
		"| 8       | 1     | haproxy-tcp |",
		"haproxy: HAProxy, one process with nbthread 2, h2 (h2c) on both sides, http-reuse always",
		"haproxy-tcp: HAProxy in mode tcp",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	cfg = OverheadConfig{Simserver: "x", HAProxySkipped: "haproxy not found on PATH or at /usr/sbin/haproxy"}
	_ = cfg.Validate()
	if md := newOverheadReport(cfg, paths[:3]).Markdown(); !strings.Contains(md, "haproxy: skipped (haproxy not found on PATH or at /usr/sbin/haproxy); install it with `apt-get install -y haproxy`.") {
		t.Errorf("markdown does not say haproxy was skipped:\n%s", md)
	}
}

// A path that completed nothing in a round (a stalled peer, a client with
// no time to start) sets no open-loop rate; only all paths at 0 is an
// error (the smoke test failed on a loaded machine when one did).
func TestOpenRateSkipsAPathThatCompletedNothing(t *testing.T) {
	paths := []Path{{Name: "direct"}, {Name: "infergate"}, {Name: "haproxy"}}
	cfg := OverheadConfig{OpenBase: "slowest", OpenFraction: 0.5}
	r, err := openRate(cfg, paths, map[string]map[string]float64{"bench": {"direct": 100, "infergate": 80, "haproxy": 0}})
	if err != nil || r != 40 {
		t.Fatalf("open rate %v, %v; want 40 (half the slowest path that completed calls)", r, err)
	}
	if _, err := openRate(cfg, paths, map[string]map[string]float64{"bench": {}}); err == nil {
		t.Fatal("no path completed anything: want an error")
	}
}
