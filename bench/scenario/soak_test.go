package scenario

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/infergate/infergate/bench/load"
)

func TestParseVmRSS(t *testing.T) {
	status := "Name:\tinfergate\nVmPeak:\t  900000 kB\nVmRSS:\t   38212 kB\nThreads:\t12\n"
	got, err := parseVmRSS(strings.NewReader(status))
	if err != nil || got != 38212<<10 {
		t.Errorf("parseVmRSS = %d, %v; want %d", got, err, 38212<<10)
	}
	for _, bad := range []string{"Name:\tx\n", "VmRSS:\t12 MB\n", "VmRSS:\tx kB\n"} {
		if _, err := parseVmRSS(strings.NewReader(bad)); err == nil {
			t.Errorf("parseVmRSS(%q): no error", bad)
		}
	}
}

func TestParseSoakMetrics(t *testing.T) {
	body := "# HELP go_goroutines Number of goroutines.\n# TYPE go_goroutines gauge\ngo_goroutines 27\n" +
		"# TYPE infergate_x_total counter\ninfergate_x_total{model=\"a\"} 1\ninfergate_x_total{model=\"b\"} 2\n"
	lines, g, err := parseSoakMetrics([]byte(body))
	if err != nil || lines != 3 || g != 27 {
		t.Errorf("parseSoakMetrics = %d lines, %d goroutines, %v; want 3, 27", lines, g, err)
	}
	if _, _, err := parseSoakMetrics([]byte("up 1\n")); err == nil {
		t.Error("no error without go_goroutines")
	}
}

func soakReportWith(samples ...SoakSample) *SoakReport {
	return &SoakReport{Rate: 150, Arrival: "fixed", Duration: 300, Sample: 60, Baseline: 120, Tolerance: 0.10, Samples: samples}
}

func TestSoakJudge(t *testing.T) {
	const mib = 1 << 20
	cases := []struct {
		name    string
		samples []SoakSample
		verdict string
		line    []string
	}{
		{"steady", []SoakSample{
			{At: 0, RSSBytes: 10 * mib, Goroutines: 20},
			{At: 60, RSSBytes: 30 * mib, Goroutines: 40}, // before the baseline: ignored
			{At: 120.01, RSSBytes: 40 * mib, Goroutines: 40},
			{At: 180, RSSBytes: 42 * mib, Goroutines: 36},
		}, SoakPass, []string{"RSS PASS 40.0 MiB → 42.0 MiB (2m0s → 3m0s, +5.0%)", "goroutines PASS 40 → 36", "-10.0%"}},
		{"rss grows", []SoakSample{
			{At: 120, RSSBytes: 40 * mib, Goroutines: 40},
			{At: 300, RSSBytes: 45 * mib, Goroutines: 40},
		}, SoakFail, []string{"Verdict: FAIL", "RSS FAIL", "+12.5%", "goroutines PASS"}},
		{"goroutines leak", []SoakSample{
			{At: 120, RSSBytes: 40 * mib, Goroutines: 40},
			{At: 300, RSSBytes: 40 * mib, Goroutines: 400},
		}, SoakFail, []string{"RSS PASS", "goroutines FAIL 40 → 400", "+900.0%"}},
		{"too short", []SoakSample{
			{At: 0, RSSBytes: 40 * mib, Goroutines: 40},
			{At: 120, RSSBytes: 40 * mib, Goroutines: 40},
		}, SoakNone, []string{"n/a", "2m0s"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := soakReportWith(tc.samples...)
			r.Judge()
			if r.Verdict != tc.verdict {
				t.Errorf("verdict %s, want %s: %s", r.Verdict, tc.verdict, r.VerdictLine)
			}
			for _, w := range tc.line {
				if !strings.Contains(r.VerdictLine, w) {
					t.Errorf("verdict line %q lacks %q", r.VerdictLine, w)
				}
			}
		})
	}
}

func TestSoakMarkdown(t *testing.T) {
	r := soakReportWith(
		SoakSample{At: 0, RSSBytes: 20 << 20, Goroutines: 26, MetricsBytes: 11 << 10, MetricsSamples: 68, ScrapeMs: 1.5},
		SoakSample{At: 120, RSSBytes: 38 << 20, Goroutines: 39, MetricsBytes: 400 << 10, MetricsSamples: 2000, ScrapeMs: 3.25,
			Sent: 4500, OK: 4480, Failed: 20, Errors: map[string]int64{"NotFound": 12, "DeadlineExceeded": 8}, P50: 2.5, P99: 30.4},
		SoakSample{At: 300.002, RSSBytes: 39 << 20, Goroutines: 39, Sent: 4500, OK: 4500, P50: 2.4, P99: 29},
	)
	r.Mix = "a mix"
	r.Judge()
	md := r.Markdown()
	for _, w := range []string{
		"## Soak: 150 req/s (fixed) for 5m0s, a sample every 1m0s",
		"| t    | RSS MiB | goroutines |",
		"| 0s   |    20.0 |         26 |         11.0 |             68 |      1.50 |    0 |",
		"DeadlineExceeded=8 NotFound=12 |   2.50 |   30.4 |",
		"| 5m0s |",
		"Verdict: PASS",
	} {
		if !strings.Contains(md, w) {
			t.Errorf("markdown lacks %q:\n%s", w, md)
		}
	}
}

func TestSoakMixFractions(t *testing.T) {
	cfg := SoakConfig{Simserver: "x", Infergate: "y"}
	_ = cfg.Validate() // fills defaults; the binaries do not matter here
	m, err := newSoakMix(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	const n = 100_000
	kinds := map[string]int{}
	short := 0
	junkNames := map[string]bool{}
	for seq := range int64(n) {
		c := m.next(seq)
		kinds[c.Kind]++
		if c.Timeout != 0 {
			short++
			if c.Timeout < cfg.ShortMin || c.Timeout > cfg.ShortMax {
				t.Fatalf("short deadline %s outside %s..%s", c.Timeout, cfg.ShortMin, cfg.ShortMax)
			}
		}
		switch c.Kind {
		case SoakJunk:
			junkNames[c.Payload.Model] = true
		case SoakStream:
			if c.StreamMethod == "" || c.Messages != 3 {
				t.Fatalf("stream call %+v", c)
			}
		}
	}
	near := func(name string, got int, want float64) {
		if f := float64(got) / n; math.Abs(f-want) > want*0.1 {
			t.Errorf("%s: fraction %.4f, want about %.4f", name, f, want)
		}
	}
	near(SoakJunk, kinds[SoakJunk], 0.01)
	near(SoakStream, kinds[SoakStream], 0.02)
	near(SoakResnet50, kinds[SoakResnet50], 0.97*0.40)
	near(SoakSimple, kinds[SoakSimple], 0.97*0.35)
	near(SoakHalfPlusTwo, kinds[SoakHalfPlusTwo], 0.97*0.25)
	near("short", short, 0.97*0.05)
	if len(junkNames) != kinds[SoakJunk] {
		t.Errorf("%d junk calls used %d names, want all distinct", kinds[SoakJunk], len(junkNames))
	}
}

func TestSoakValidate(t *testing.T) {
	cfg := SoakConfig{Simserver: "/nonexistent/simserver", Rate: -1, Sample: time.Hour, Duration: time.Minute,
		JunkFraction: 0.6, StreamFraction: 0.6, ShortMin: 5 * time.Millisecond, ShortMax: time.Millisecond}
	err := cfg.Validate()
	if err == nil {
		t.Fatal("no error")
	}
	for _, w := range []string{"rate -1", "sample 1h0m0s", "junk 0.6 + stream 0.6", "short deadlines", "binary not found", "infergate: binary path required"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q lacks %q", err, w)
		}
	}
}

// TestSoakSmoke runs the real scenario, tiny (about 3 s), against
// bin/simserver and bin/infergate when they are built; otherwise it skips.
// It checks that every part runs, not the numbers.
func TestSoakSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	sim, ig := filepath.Join("..", "..", "bin", "simserver"), filepath.Join("..", "..", "bin", "infergate")
	for _, b := range []string{sim, ig} {
		if _, err := os.Stat(b); err != nil {
			t.Skipf("%s not built", b)
		}
	}
	cfg := SoakConfig{
		Simserver: sim, Infergate: ig, Rate: 200, Duration: 3 * time.Second, Sample: time.Second,
		Baseline: time.Second, JunkFraction: 0.05, StreamFraction: 0.05, Arrival: load.Poisson,
		InfergateArgs: []string{"--drain-delay", "0s"}, // stop at once
	}
	if testing.Verbose() {
		cfg.Log = os.Stderr
	}
	rep, err := RunSoak(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Samples) != 4 {
		t.Fatalf("%d samples, want 4 (0s, 1s, 2s, 3s)", len(rep.Samples))
	}
	var ok, notFound int64
	for i, s := range rep.Samples {
		if s.RSSBytes <= 0 || s.Goroutines <= 0 || s.MetricsBytes <= 0 {
			t.Errorf("sample %d: %+v", i, s)
		}
		ok += s.OK
		notFound += s.Errors["NotFound"]
	}
	if ok == 0 || notFound == 0 {
		t.Errorf("%d calls ok, %d NotFound (junk); want some of each", ok, notFound)
	}
	if rep.Verdict == SoakNone || len(rep.Checks) != 2 {
		t.Errorf("verdict %s, checks %+v", rep.Verdict, rep.Checks)
	}
	if md := rep.Markdown(); !strings.Contains(md, "Verdict: ") {
		t.Errorf("markdown:\n%s", md)
	}
}
