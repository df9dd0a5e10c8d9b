package scenario

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestBatchingSmoke runs the real scenario, tiny, against bin/simserver
// and bin/infergate when they are built (go build -o bin/ ./cmd/infergate
// ./examples/simserver) and infergate has the batching flags; otherwise
// it skips. It checks that every part runs, not the numbers.
func TestBatchingSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	sim, ig := filepath.Join("..", "..", "bin", "simserver"), filepath.Join("..", "..", "bin", "infergate")
	for _, b := range []string{sim, ig} {
		if _, err := os.Stat(b); err != nil {
			t.Skipf("%s not built", b)
		}
	}
	help, _ := exec.Command(ig, "-h").CombinedOutput()
	if !strings.Contains(string(help), "batch-max-delay") {
		t.Skip("bin/infergate has no batching flags")
	}
	cfg := BatchingConfig{
		Simserver: sim, Infergate: ig,
		Loads: []float64{0.1, 2}, Duration: 300 * time.Millisecond, Warmup: 100 * time.Millisecond, MinRequests: -1,
		CapacityConcurrency: []int{2}, CapacityDuration: 300 * time.Millisecond,
		Static: []BatchSetting{StaticSetting(16, 2*time.Millisecond)},
	}
	if testing.Verbose() {
		cfg.Log = os.Stderr
	}
	rep, err := RunBatching(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Capacity.Throughput <= 0 || len(rep.Configs) != 3 || len(rep.Points) != 6 || len(rep.Criteria) != 5 {
		t.Fatalf("report: capacity %+v, %d configs, %d points, %d criteria", rep.Capacity, len(rep.Configs), len(rep.Points), len(rep.Criteria))
	}
	for _, p := range rep.Points {
		if p.Completed == 0 {
			t.Errorf("%s at %gx: nothing completed", p.Config, p.Load)
		}
		if p.Config != "off" && p.Load == 2 && !(p.MeanBatch > 1) {
			t.Errorf("%s at 2x capacity: mean batch %g, want > 1", p.Config, p.MeanBatch)
		}
	}
	if md := rep.Markdown(); !strings.Contains(md, "### Criteria") {
		t.Errorf("markdown:\n%s", md)
	}
}
