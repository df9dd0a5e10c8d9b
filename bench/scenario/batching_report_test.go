package scenario

import (
	"bytes"
	"encoding/json"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/infergate/infergate/bench/report"
)

// cannedReport builds a report by hand: capacity 200 rps, five
// configurations at loads 0.1x, 1x and 8x. p(goodput, p99) per point.
func cannedReport(adaptive8x BatchPoint, adaptiveLowP99 float64) *BatchingReport {
	cfg := BatchingConfig{Model: "resnet50", SLO: 50 * time.Millisecond, Duration: time.Second, Conns: 2}
	r := newBatchingReport(cfg)
	r.Capacity = Capacity{Throughput: 200, Concurrency: 2, Runs: []CapacityRun{{Concurrency: 1, Throughput: 150}, {Concurrency: 2, Throughput: 200}},
		PhysicalLimit: 2000, PhysicalBatch: 64}
	statics := reportedStatics(StaticSetting(32, 2*time.Millisecond), DefaultSweepDelays)
	r.Configs = append([]BatchSetting{OffSetting()}, statics...)
	r.Configs = append(r.Configs, AdaptiveSetting(50*time.Millisecond, 64, true))
	pt := func(config string, ld, good, p99, batch float64) BatchPoint {
		return BatchPoint{Config: config, Load: ld, Offered: ld * 200, Throughput: good, Goodput: good, P50: p99 / 2, P99: p99, P999: p99 * 1.5,
			Completed: int64(good), Seconds: 1, MeanBatch: batch, Saturated: good < 0.5*ld*200}
	}
	r.Points = []BatchPoint{
		pt("off", 0.1, 20, 10, 1), pt("off", 1, 90, 300, 1), {Config: "off", Load: 8, Offered: 1600, Skipped: true, Saturated: true},
		pt("best 32/2ms", 0.1, 20, 12, 1.1), pt("best 32/2ms", 1, 200, 20, 2), pt("best 32/2ms", 8, 1500, 40, 14),
		pt("triton 64/0ms", 0.1, 20, 11, 1), pt("triton 64/0ms", 1, 198, 19, 1.8), pt("triton 64/0ms", 8, 1200, 45, 12),
		pt("heavy 32/10ms", 0.1, 20, 25, 1.5), pt("heavy 32/10ms", 1, 190, 30, 3), pt("heavy 32/10ms", 8, 1000, 48, 20),
		pt("adaptive", 0.1, 20, adaptiveLowP99, 1), pt("adaptive", 1, 196, 21, 2),
	}
	adaptive8x.Config, adaptive8x.Load, adaptive8x.Offered = "adaptive", 8, 1600
	r.Points = append(r.Points, adaptive8x)
	return r
}

func TestBatchingCriteria(t *testing.T) {
	good := BatchPoint{Throughput: 1700, Goodput: 1700, P99: 45, Completed: 1700, Seconds: 1, MeanBatch: 16}
	cases := []struct {
		name  string
		rep   *BatchingReport
		value [5]float64
		known [5]bool
		pass  [5]bool
	}{
		{"all pass", cannedReport(good, 10.5), [5]float64{8.5, 0.98, 1.05, 0.9, 0.85},
			[5]bool{true, true, true, true, true}, [5]bool{true, true, true, true, true}},
		{"adaptive saturated at 8x, slow at 10%", cannedReport(BatchPoint{Skipped: true, Saturated: true}, 12),
			[5]float64{0.98, 0, 1.2, 0, 0.098}, [5]bool{true, true, true, false, true}, [5]bool{false, false, false, false, false}},
		{"8x p99 past the SLO", cannedReport(BatchPoint{Throughput: 1700, Goodput: 1600, P99: 60, Completed: 1700, Seconds: 1}, 10.5),
			// Criterion 5 falls back to 1x, the best point within the SLO.
			[5]float64{8, 0.98, 1.05, 1.2, 0.098}, [5]bool{true, true, true, true, true}, [5]bool{true, true, true, false, false}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.rep.Summarise()
			if len(tc.rep.Criteria) != 5 {
				t.Fatalf("%d criteria", len(tc.rep.Criteria))
			}
			for i, c := range tc.rep.Criteria {
				if c.Known != tc.known[i] || math.Abs(c.Value-tc.value[i]) > 1e-9 || c.Pass != tc.pass[i] {
					t.Errorf("criterion %d (%s) = %v known=%v pass=%v, want %v known=%v pass=%v",
						i+1, c.Name, c.Value, c.Known, c.Pass, tc.value[i], tc.known[i], tc.pass[i])
				}
			}
		})
	}
	t.Run("per configuration", func(t *testing.T) {
		r := cannedReport(good, 10.5)
		r.Summarise()
		want := map[string]ConfigSummary{
			"off":      {Config: "off", MaxGoodput: 90, MaxGoodputLoad: 1, MaxWithinSLO: 20, MaxWithinSLOLoad: 0.1},
			"adaptive": {Config: "adaptive", MaxGoodput: 1700, MaxGoodputLoad: 8, MaxWithinSLO: 1700, MaxWithinSLOLoad: 8},
		}
		for _, cs := range r.PerConfig {
			if w, ok := want[cs.Config]; ok && cs != w {
				t.Errorf("got %+v, want %+v", cs, w)
			}
		}
		if len(r.PerConfig) != 5 {
			t.Errorf("%d summaries", len(r.PerConfig))
		}
	})
	t.Run("no adaptive configuration", func(t *testing.T) {
		r := cannedReport(good, 10)
		r.Configs = r.Configs[:len(r.Configs)-1]
		r.Summarise()
		for _, c := range r.Criteria {
			if c.Known || c.Pass || c.Result() != "n/a (FAIL)" {
				t.Errorf("%s: %+v", c.Name, c)
			}
		}
	})
}

func TestBatchingMarkdown(t *testing.T) {
	r := cannedReport(BatchPoint{Throughput: 1700, Goodput: 1700, P99: 45, Completed: 1700, Seconds: 1, MeanBatch: 16}, 10.5)
	r.Summarise()
	summary := r.SummaryTable().Markdown()
	want := `### Criteria

| criterion                                                          | value |  target | result |
| ------------------------------------------------------------------ | ----: | ------: | -----: |
| 1. adaptive max goodput / unbatched max throughput                 |  8.50 |    >= 8 |   PASS |
| 2. min over loads of adaptive goodput / best static goodput        |  0.98 | >= 0.95 |   PASS |
| 3. adaptive p99 / batching-off p99 at the lowest load              |  1.05 |  <= 1.1 |   PASS |
| 4. adaptive strict p99 of successful calls at 8x / SLO             |  0.90 |    <= 1 |   PASS |
| 5. adaptive max throughput with strict p99 <= SLO / physical limit |  0.85 | >= 0.75 |   PASS |

1. adaptive 1700 rps within SLO at load 8x; unbatched max 200 rps (closed loop c=2)
2. worst at load 1x: adaptive 196 rps vs best 32/2ms 200 rps
3. at load 0.1x (20/s): adaptive p99 10.5 ms, off p99 10.0 ms; p50 5.25 vs 5.00 ms
4. at 8x (1600/s offered): p99 45.0 ms of 1700 successful calls, SLO 50.0 ms; 0 failed (0.0%): -
5. adaptive 1700 rps at load 8x (p99 45.0 ms); physical limit 2000 rows/s (batches of 64 straight to the model server)
`
	if summary != want {
		t.Errorf("summary =\n%s\nwant\n%s", summary, want)
	}
	strict := r.StrictTable().Markdown()
	for _, row := range []string{
		"| load | offered/s | tput | tput / physical limit |   failed | p50 ms | p99 ms | p99 / SLO | p99 <= SLO |",
		"| 8x   |      1600 | 1700 |                  0.85 | 0 (0.0%) |  0.000 |   45.0 |      0.90 |        yes |",
	} {
		if !strings.Contains(strict, row) {
			t.Errorf("strict table lacks %q:\n%s", row, strict)
		}
	}
	main := r.MainTable().Markdown()
	for _, row := range []string{
		"| load | offered/s | off tput | good |  p99 | batch | best 32/2ms tput |",
		"| 0.1x |        20 |       20 |   20 | 10.0 |   1.0 |",
		"| 1x   |       200 |       90 |   90 | 300* |   1.0 |",
		"| 8x   |      1600 |     sat. |    0 |    - |     - |             1500 | 1500 | 40.0 |  14.0 |",
		"- heavy 32/10ms (latency-heavy): --batching static --batch-models resnet50 --batch-max-size 32 --batch-max-delay 10ms",
		"- adaptive (adaptive): --batching adaptive --batch-models resnet50 --batch-max-size 64 --batch-slo 50ms --batch-shed",
	} {
		if !strings.Contains(main, row) {
			t.Errorf("main table lacks %q:\n%s", row, main)
		}
	}
	full := r.Markdown()
	for _, s := range []string{"**200 rps** at c=2", "### Every point", "### Unbatched capacity runs", "| adaptive      |   8x |"} {
		if !strings.Contains(full, s) {
			t.Errorf("markdown lacks %q:\n%s", s, full)
		}
	}
	if strings.Contains(full, "Static sweep") {
		t.Error("sweep table shown without a sweep")
	}
}

func TestBatchingJSON(t *testing.T) {
	r := cannedReport(BatchPoint{Skipped: true}, 10)
	r.Sweep = []SweepEntry{newSweepEntry(StaticSetting(8, time.Millisecond), []BatchPoint{{Skipped: true, Saturated: true}})}
	r.Summarise()
	var buf bytes.Buffer
	if err := report.WriteJSON(&buf, r); err != nil {
		t.Fatal(err)
	}
	var back struct {
		Configs []struct {
			Name, Role string
			MaxDelay   string `json:"max_delay"`
		}
		Flags    map[string]string
		Points   []BatchPoint
		Criteria []Criterion
	}
	if err := json.Unmarshal(buf.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Points) != len(r.Points) || len(back.Criteria) != 5 || len(back.Configs) != 5 {
		t.Fatalf("round trip: %d points, %d criteria, %d configs", len(back.Points), len(back.Criteria), len(back.Configs))
	}
	if c := back.Configs[2]; c.MaxDelay != "0s" || !strings.HasSuffix(back.Flags[c.Name], "--batch-max-delay 0s") {
		t.Errorf("triton config = %+v, flags %q", c, back.Flags[c.Name])
	}
}

func TestBatchingPlot(t *testing.T) {
	r := cannedReport(BatchPoint{Throughput: 1700, Goodput: 1700, P99: 45, Completed: 1700, Seconds: 1, MeanBatch: 16}, 10.5)
	panels := r.Panels()
	if len(panels) != 3 {
		t.Fatalf("%d panels", len(panels))
	}
	// Skipped points are not drawn; the reference lines come last.
	if s := panels[0].Series[0]; s.Name != "off" || len(s.X) != 2 {
		t.Errorf("off series = %+v", s)
	}
	if s := panels[2].Series[len(panels[2].Series)-1]; s.Name != "SLO" || s.Y[0] != 50 || !s.Reference {
		t.Errorf("SLO line = %+v", s)
	}
	dir := t.TempDir()
	if d := os.Getenv("BATCHING_PLOT_DIR"); d != "" {
		dir = d // to look at the picture
	}
	path := filepath.Join(dir, "batching.png")
	if err := report.WritePlot(path, panels); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() < 600 || b.Dy() < 3*300 {
		t.Errorf("image %v too small for three panels", b)
	}
}
