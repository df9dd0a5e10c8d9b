package scenario

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/infergate/infergate/bench/load"
	"github.com/infergate/infergate/bench/report"
)

func TestUploadsConfigDefaultsAndErrors(t *testing.T) {
	c := UploadsConfig{Simserver: "/bin/sh", Infergate: "/bin/sh"}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.Callers != 100 || c.Bytes != 4<<20 || c.Model != "identity_fp32" || c.Duration != 10*time.Second ||
		c.Repeat != 3 || c.CallTimeout != 30*time.Second || c.Sample != 100*time.Millisecond || c.HAProxyThreads != 2 {
		t.Errorf("defaults: %+v", c)
	}
	c = UploadsConfig{Bytes: 6, Callers: -1}
	err := c.Validate()
	for _, want := range []string{"simserver: binary path required", "no proxy to measure", "bytes 6: must be a positive multiple of 4", "callers -1"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v, want %q", err, want)
		}
	}
}

func TestParseStatusField(t *testing.T) {
	status := "Name:\tnginx\nVmPeak:\t  20000 kB\nVmHWM:\t    9000 kB\nVmRSS:\t    8000 kB\n"
	for field, want := range map[string]int64{"VmHWM": 9000 << 10, "VmRSS": 8000 << 10} {
		if got, err := parseStatusField(strings.NewReader(status), field); err != nil || got != want {
			t.Errorf("%s = %d, %v; want %d", field, got, err, want)
		}
	}
	if _, err := parseStatusField(strings.NewReader("Name:\tx\n"), "VmHWM"); err == nil {
		t.Error("no VmHWM line: no error")
	}
	if _, err := parseStatusField(strings.NewReader("VmRSS:\t12 MB\n"), "VmRSS"); err == nil {
		t.Error("bad unit: no error")
	}
}

func TestParseStatPpid(t *testing.T) {
	if p, ok := parseStatPpid("4242 (nginx: worker (x) y) S 4200 4200 1 0"); !ok || p != 4200 {
		t.Errorf("ppid = %d, %v", p, ok)
	}
	if _, ok := parseStatPpid("garbage"); ok {
		t.Error("garbage parsed")
	}
}

// TestRSSOfThisProcess reads this test's own memory the ways the scenario
// reads a proxy's: VmHWM after a reset, the sampler, and its children.
func TestRSSOfThisProcess(t *testing.T) {
	pid := os.Getpid()
	rss, err := procStatusField(pid, "VmRSS")
	if err != nil || rss <= 0 {
		t.Fatalf("VmRSS = %d, %v", rss, err)
	}
	if err := resetHWM(pid); err != nil {
		t.Logf("cannot reset VmHWM here: %v", err)
	}
	s := startRSSSampler(func() []int { return []int{pid} }, 10*time.Millisecond)
	time.Sleep(50 * time.Millisecond)
	s.stop()
	if s.samples < 2 || s.procs != 1 || s.peak <= 0 {
		t.Errorf("sampler: %d samples, %d procs, peak %d", s.samples, s.procs, s.peak)
	}
	if hwm, err := procStatusField(pid, "VmHWM"); err != nil || hwm <= 0 {
		t.Errorf("VmHWM = %d, %v", hwm, err)
	}
	if kids := childPids(os.Getppid()); !containsInt(kids, pid) {
		t.Errorf("children of %d = %v, lack %d", os.Getppid(), kids, pid)
	}
}

func containsInt(xs []int, x int) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

func fakeUploadsRun(path string, round int, ok, failed int64, rps, p50, p99 float64, peakMiB float64, method string) UploadsRun {
	res := &load.Result{Label: path, Completed: ok, Failed: failed, Throughput: rps, RequestBytes: 4194330, Seconds: 5,
		Latency: load.Latency{P50: p50, P99: p99}}
	if failed > 0 {
		res.Errors = map[string]int64{"DeadlineExceeded": failed}
	}
	peak := int64(peakMiB * (1 << 20))
	return UploadsRun{Path: path, Round: round, Result: res, MBps: rps * 4194330 / 1e6,
		RSS: UploadsRSS{Method: method, PeakBytes: peak, SampledPeakBytes: peak - 1<<20, StartBytes: 10 << 20, Samples: 50, Processes: 1}}
}

func TestUploadsSummary(t *testing.T) {
	cfg := UploadsConfig{Simserver: "x", Infergate: "x", Nginx: "x", HAProxy: "x", Duration: 5 * time.Second, Repeat: 2}
	_ = cfg.Validate()
	rep := newUploadsReport(cfg, []Path{{PathInfergate, "a"}, {PathNginx, "b"}, {PathHAProxy, "c"}})
	rep.Runs = []UploadsRun{
		fakeUploadsRun(PathInfergate, 1, 300, 0, 60, 1500, 2500, 200, RSSHWM),
		fakeUploadsRun(PathNginx, 1, 250, 0, 50, 1800, 2600, 14, RSSSampledWorkers),
		fakeUploadsRun(PathHAProxy, 1, 200, 2, 40, 2000, 3000, 30, RSSHWM),
		fakeUploadsRun(PathInfergate, 2, 330, 0, 66, 1400, 2400, 220, RSSHWM),
		fakeUploadsRun(PathNginx, 2, 300, 0, 60, 1700, 2500, 15, RSSSampledWorkers),
		fakeUploadsRun(PathHAProxy, 2, 210, 1, 42, 1900, 2900, 31, RSSHWM),
	}
	rep.summarise()
	if len(rep.Paths) != 3 {
		t.Fatalf("%d summaries", len(rep.Paths))
	}
	ig, ng, hp := rep.Paths[0], rep.Paths[1], rep.Paths[2]
	if ig.OK != 630 || ig.CallsPerS.Median != 63 || ig.PeakRSS.Max != 220 || ig.RSSMethod != RSSHWM {
		t.Errorf("infergate: %+v", ig)
	}
	// infergate / nginx per round: 1.2 and 1.1.
	if ig.VsNginx == nil || math.Abs(ig.VsNginx.Median-1.15) > 1e-9 || math.Abs(ig.VsNginx.Min-1.1) > 1e-9 {
		t.Errorf("infergate vs nginx = %+v", ig.VsNginx)
	}
	if ng.RSSMethod != RSSSampledWorkers || hp.Failed != 3 || hp.Errors["DeadlineExceeded"] != 3 {
		t.Errorf("nginx %+v, haproxy %+v", ng, hp)
	}
	md := rep.Markdown()
	for _, want := range []string{
		"## Big concurrent uploads: 100 callers on 100 connections, 4 MiB requests, 5s per run, 2 interleaved rounds, median [min..max]",
		"| infergate |      630 |",
		"63.0 [60.0..66.0] | 1.15x [1.10x..1.20x] |",
		"| haproxy   |      410 | 3 (DeadlineExceeded=3) |",
		"210.0 [200.0..220.0]",
		" VmHWM |",
		" workers |",
		"nginx: worker_processes auto",
		"haproxy: one process, nbthread 2",
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
	for _, want := range []string{`"peak_rss_mib": {`, `"throughput_vs_nginx"`, `"rss_method": "VmHWM"`, `"request_mb_per_s"`} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("json lacks %s", want)
		}
	}
}

func TestByteSize(t *testing.T) {
	for n, want := range map[int]string{4 << 20: "4 MiB", 3 << 19: "1.5 MiB", 1 << 20: "1 MiB", 4096: "4 KiB", 100: "100 B", 4194330: "4 MiB"} {
		if got := byteSize(n); got != want {
			t.Errorf("byteSize(%d) = %q, want %q", n, got, want)
		}
	}
}
