package scenario

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/infergate/infergate/internal/stubserver"
)

func TestBatchSettingArgs(t *testing.T) {
	cases := []struct {
		name string
		s    BatchSetting
		want string
	}{
		{"off", OffSetting(), "--batching off"},
		{"static", StaticSetting(32, 2*time.Millisecond), "--batching static --batch-models resnet50 --batch-max-size 32 --batch-max-delay 2ms"},
		{"static no delay", StaticSetting(64, 0), "--batching static --batch-models resnet50 --batch-max-size 64 --batch-max-delay 0s"},
		{"adaptive", AdaptiveSetting(50*time.Millisecond, 64, false), "--batching adaptive --batch-models resnet50 --batch-max-size 64 --batch-slo 50ms"},
		{"adaptive shed", AdaptiveSetting(50*time.Millisecond, 64, true), "--batching adaptive --batch-models resnet50 --batch-max-size 64 --batch-slo 50ms --batch-shed"},
		{"every flag", BatchSetting{Mode: BatchStatic, MaxSize: 16, MaxDelay: time.Millisecond, PreferredSizes: []int{8, 16}, QueueSize: 512, Slots: 1},
			"--batching static --batch-models resnet50 --batch-max-size 16 --batch-preferred-sizes 8,16 --batch-max-delay 1ms --batch-queue-size 512 --batch-slots 1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := strings.Join(tc.s.Args("resnet50"), " "); got != tc.want {
				t.Errorf("Args = %q\nwant   %q", got, tc.want)
			}
		})
	}
	if n := StaticSetting(64, 0).Name; n != "static 64/0ms" {
		t.Errorf("name = %q", n)
	}
}

func TestParseStatic(t *testing.T) {
	got, err := ParseStatic("64:2ms, 32:5ms,16:0")
	if err != nil {
		t.Fatal(err)
	}
	want := []BatchSetting{StaticSetting(64, 2*time.Millisecond), StaticSetting(32, 5*time.Millisecond), StaticSetting(16, 0)}
	if !slices.EqualFunc(got, want, sameStatic) {
		t.Errorf("got %+v", got)
	}
	for _, bad := range []struct{ spec, err string }{
		{"64", `scenario: static "64": want SIZE:DELAY, e.g. 32:2ms`},
		{"0:2ms", `scenario: static "0:2ms": size must be a positive integer`},
		{"8:soon", `scenario: static "8:soon": delay must be a duration >= 0 (e.g. 2ms)`},
		{" , ", `scenario: static " , ": no configuration`},
	} {
		if _, err := ParseStatic(bad.spec); err == nil || err.Error() != bad.err {
			t.Errorf("ParseStatic(%q) error = %v, want %q", bad.spec, err, bad.err)
		}
	}
}

func TestParseLists(t *testing.T) {
	if got, err := ParseFloats("0.1, 1,16"); err != nil || !slices.Equal(got, []float64{0.1, 1, 16}) {
		t.Errorf("ParseFloats = %v, %v", got, err)
	}
	if _, err := ParseFloats("1,-2"); err == nil {
		t.Error("ParseFloats accepted a negative load")
	}
	if got, err := ParseInts("8,16"); err != nil || !slices.Equal(got, []int{8, 16}) {
		t.Errorf("ParseInts = %v, %v", got, err)
	}
	if _, err := ParseInts("8,0"); err == nil {
		t.Error("ParseInts accepted 0")
	}
	if got, err := ParseDurations("1ms,10ms"); err != nil || !slices.Equal(got, []time.Duration{time.Millisecond, 10 * time.Millisecond}) {
		t.Errorf("ParseDurations = %v, %v", got, err)
	}
}

func TestPickBestAndReportedStatics(t *testing.T) {
	entries := []SweepEntry{
		{Setting: StaticSetting(8, time.Millisecond), TotalGoodput: 900, MeanP99: 10},
		{Setting: StaticSetting(32, 2*time.Millisecond), TotalGoodput: 2000, MeanP99: 30},
		{Setting: StaticSetting(64, 5*time.Millisecond), TotalGoodput: 2010, MeanP99: 35}, // within 1%, slower
		{Setting: StaticSetting(64, 10*time.Millisecond), TotalGoodput: 1500},             // never unsaturated
	}
	if got := pickBest(entries); got != 1 {
		t.Errorf("pickBest = %d, want 1 (the faster of two within 1%%)", got)
	}
	names := func(ss []BatchSetting) string {
		var out []string
		for _, s := range ss {
			out = append(out, s.Name+" ["+s.Role+"]")
		}
		return strings.Join(out, ", ")
	}
	delays := []time.Duration{time.Millisecond, 10 * time.Millisecond}
	cases := []struct {
		best BatchSetting
		want string
	}{
		{StaticSetting(32, 2*time.Millisecond), "best 32/2ms [best static], triton 64/0ms [Triton default], heavy 32/10ms [latency-heavy]"},
		{StaticSetting(32, 10*time.Millisecond), "best 32/10ms [best static], triton 64/0ms [Triton default], heavy 64/10ms [latency-heavy]"},
		{StaticSetting(64, 0), "best 64/0ms [best static, Triton default], heavy 32/10ms [latency-heavy]"},
	}
	for _, tc := range cases {
		if got := names(reportedStatics(tc.best, delays)); got != tc.want {
			t.Errorf("reportedStatics(%s) = %s\nwant %s", tc.best.Name, got, tc.want)
		}
	}
}

func TestStretchDuration(t *testing.T) {
	cases := []struct {
		d    time.Duration
		rate float64
		min  int
		want time.Duration
	}{
		{time.Second, 1000, 300, time.Second},
		{time.Second, 200, 300, 1500 * time.Millisecond},
		{time.Second, 10, 300, 3 * time.Second},
		{time.Second, 10, 0, time.Second},
	}
	for _, tc := range cases {
		if got := stretchDuration(tc.d, tc.rate, tc.min); got != tc.want {
			t.Errorf("stretchDuration(%s, %g, %d) = %s, want %s", tc.d, tc.rate, tc.min, got, tc.want)
		}
	}
}

func TestBatchingConfigValidate(t *testing.T) {
	cfg := BatchingConfig{Simserver: "/nonexistent/simserver", Model: "bert", Loads: []float64{1, 0}}
	err := cfg.Validate()
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		"batching: load 0: must be a positive fraction of capacity",
		`batching: model "bert": no known input shape`,
		"batching: simserver /nonexistent/simserver: binary not found",
		"batching: infergate: binary path required",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	if cfg.SLO != 50*time.Millisecond || cfg.Timeout != time.Second || cfg.CapacityDuration != 2500*time.Millisecond || cfg.SweepWarmup != 500*time.Millisecond {
		t.Errorf("defaults: %+v", cfg)
	}
}

// TestBatchRunnerFlow runs the whole scenario logic against in-process
// stubs: every configuration gets a fresh stub; "heavy" ones and the 8/…
// sweep candidate fail every call after the probe, so they saturate, are
// cut short and lose the sweep. Batch counters come from a fake scrape.
func TestBatchRunnerFlow(t *testing.T) {
	cfg := BatchingConfig{
		Simserver: "unused", Infergate: "unused",
		Loads: []float64{0.01, 0.02, 0.03}, Duration: 100 * time.Millisecond, Warmup: 30 * time.Millisecond, MinRequests: -1,
		CapacityConcurrency: []int{1, 2}, CapacityDuration: 100 * time.Millisecond,
		SweepSizes: []int{8, 64}, SweepDelays: []time.Duration{time.Millisecond}, SweepLoads: []float64{0.01},
	}
	_ = cfg.Validate() // fills defaults; the binaries do not matter here
	r, err := newBatchRunner(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var started []string
	r.start = func(ctx context.Context, s BatchSetting, tag string) (batchTarget, func(), error) {
		mu.Lock()
		started = append(started, tag)
		mu.Unlock()
		failing := strings.HasPrefix(s.Name, "heavy") || s.Name == "static 8/1ms"
		srv, err := stubserver.Start(func(ctx context.Context, n int64, model string) error {
			if failing && n > 2 { // the probe's two calls pass
				return status.Error(codes.Unavailable, "stub: failing on purpose")
			}
			return nil
		})
		if err != nil {
			return batchTarget{}, nil, err
		}
		admin := ""
		if s.Mode != BatchOff {
			admin = "fake"
		}
		return batchTarget{GRPC: srv.Addr, Admin: admin}, srv.Stop, nil
	}
	var scrapes int
	r.scrape = func(ctx context.Context, admin, model string) (BatchCounters, error) {
		scrapes++ // each scrape: 4 more batches of 10 items in all
		return BatchCounters{Found: true, Items: float64(10 * scrapes), Batches: float64(4 * scrapes)}, nil
	}
	rep, err := r.run(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if rep.Capacity.Throughput <= 0 || len(rep.Capacity.Runs) != 2 {
		t.Errorf("capacity = %+v", rep.Capacity)
	}
	wantStarts := []string{"capacity", "sweep-static_8_1ms", "sweep-static_64_1ms",
		"run-off", "run-best_64_1ms", "run-triton_64_0ms", "run-heavy_32_1ms", "run-adaptive"}
	if !slices.Equal(started, wantStarts) {
		t.Errorf("started %v\nwant    %v", started, wantStarts)
	}
	if len(rep.Sweep) != 2 || !rep.Sweep[1].Chosen || rep.Sweep[0].Chosen {
		t.Errorf("sweep = %+v", rep.Sweep)
	}
	if len(rep.Points) != 5*len(cfg.Loads) {
		t.Fatalf("%d points", len(rep.Points))
	}
	for _, p := range rep.Points {
		switch {
		case strings.HasPrefix(p.Config, "heavy"):
			// Saturated at the first two loads, the third skipped.
			if !p.Saturated || p.Goodput != 0 || (p.Load == 0.03) != p.Skipped {
				t.Errorf("heavy point %+v", p)
			}
		case p.Saturated || p.Skipped || p.Failed != 0 || p.Goodput <= 0:
			t.Errorf("healthy point %+v", p)
		case p.Config == "off" && p.MeanBatch != 1:
			t.Errorf("off mean batch = %g, want 1", p.MeanBatch)
		case p.Config != "off" && p.MeanBatch != 2.5:
			t.Errorf("%s mean batch = %g, want 2.5", p.Config, p.MeanBatch)
		}
	}
	if len(rep.Criteria) != 5 {
		t.Fatalf("criteria = %+v", rep.Criteria)
	}
	if c := rep.Criteria[1]; !c.Known || c.Value < 0.5 {
		t.Errorf("adaptive vs best static = %+v", c)
	}
}
