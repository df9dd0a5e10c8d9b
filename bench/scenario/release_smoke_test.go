package scenario

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/infergate/infergate/release"
)

// TestReleaseSmoke runs the real release scenario's slow case on both
// doors against bin/simserver and bin/infergate (make build): a candidate
// 1.3x slower at 10% of 100 calls/s is rolled back within the run, by a
// decision that gives the ratio in words, and no call fails meanwhile.
// How fast is bench release's to report, not a test's to bound.
func TestReleaseSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	sim, ig := filepath.Join("..", "..", "bin", "simserver"), filepath.Join("..", "..", "bin", "infergate")
	for _, b := range []string{sim, ig} {
		if _, err := os.Stat(b); err != nil {
			t.Skipf("%s not built", b)
		}
	}
	cfg := ReleaseConfig{Simserver: sim, Infergate: ig, Cases: []string{ReleaseSlow}, Duration: 20 * time.Second}
	if testing.Verbose() {
		cfg.Log = os.Stderr
	}
	res, err := RunRelease(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Runs) != 2 {
		t.Fatalf("%d runs, want one per door", len(res.Runs))
	}
	for _, r := range res.Runs {
		if r.State != "rolled_back" || r.Failed > 0 || r.Calls < 1500 {
			t.Errorf("%s door: %s, %d of %d calls failed; want rolled back, none failed", r.Door, r.State, r.Failed, r.Calls)
		}
		if !(r.Share > 5 && r.Share < 15) {
			t.Errorf("%s door: candidate share %.1f%% before the rollback, want about 10%%", r.Door, r.Share)
		}
		var words string
		for _, d := range r.Decisions {
			if d.Kind == release.Rollback {
				words = d.Reason
			}
		}
		if !strings.Contains(words, "x version 1's") {
			t.Errorf("%s door: rollback reason %q, want the ratio to version 1's in words", r.Door, words)
		}
	}
	if md := res.Markdown(); !strings.Contains(md, "| slow | relay | 1 | rolled_back |") {
		t.Errorf("report:\n%s", md)
	}
}
