package monitor

import (
	"bytes"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// recordFixture records a small, exactly representable data set: values up
// to 2,047 µs sit in HDR buckets one microsecond wide.
func recordFixture(r *Registry) {
	for i := 1; i <= 10; i++ {
		d := time.Duration(i*100) * time.Microsecond
		r.Record(testKey, Sample{Total: d, Upstream: d / 2, Code: "OK", BytesIn: 100, BytesOut: 1000})
	}
	errKey := testKey
	errKey.CodeClass = CodeClassServerError
	r.Record(errKey, Sample{Total: 2 * time.Millisecond, Upstream: 1900 * time.Microsecond, Queue: 50 * time.Microsecond,
		Code: "Unavailable", BytesIn: 100})
	g := r.InFlight("triton")
	g.Inc()
	g.Inc()
	g.Dec()
}

func TestExpositionGolden(t *testing.T) {
	r, _ := newTestRegistry(t, Options{})
	reg := prometheus.NewPedanticRegistry()
	if err := r.Register(reg); err != nil {
		t.Fatal(err)
	}
	recordFixture(r)
	r.Rotate()
	got := exposition(t, reg, "infergate_request_latency", "infergate_queue_latency",
		"infergate_requests", "infergate_request_bytes", "infergate_response_bytes", "infergate_series")

	path := filepath.Join("testdata", "exposition.prom")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("exposition differs from %s (run with -update after checking):\n%s", path, got)
	}
}

func TestPromtoolCheckMetrics(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool not installed (CI installs Debian's prometheus package)")
	}
	r, _ := newTestRegistry(t, Options{})
	reg := prometheus.NewPedanticRegistry()
	if err := r.Register(reg); err != nil {
		t.Fatal(err)
	}
	recordFixture(r)
	// A series with an empty window too: NaN quantiles must lint clean.
	r.Record(SeriesKey{Model: "idle", Version: "1", Method: "Predict", Upstream: "tfs", CodeClass: CodeClassOK},
		Sample{Total: time.Millisecond, Code: "OK"})
	r.Rotate()
	text := exposition(t, reg)

	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = bytes.NewBufferString(text)
	out, err := cmd.CombinedOutput()
	if err != nil || len(out) > 0 {
		t.Fatalf("promtool check metrics: %v\n%s\nexposition:\n%s", err, out, text)
	}
}
