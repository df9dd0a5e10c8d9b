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
	dto "github.com/prometheus/client_model/go"
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
	// A traced call: its exemplar must not leak into the text format.
	r.Record(testKey, Sample{Total: 120 * time.Millisecond, Code: "OK", TraceID: [16]byte{1, 2, 3}})
	r.Rotate()
	text := exposition(t, reg)

	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = bytes.NewBufferString(text)
	out, err := cmd.CombinedOutput()
	if err != nil || len(out) > 0 {
		t.Fatalf("promtool check metrics: %v\n%s\nexposition:\n%s", err, out, text)
	}
}

// nativeHistogram gathers reg and returns the native histogram of
// testKey's infergate_request_duration_seconds.
func nativeHistogram(t *testing.T, reg prometheus.Gatherer) *dto.Histogram {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "infergate_request_duration_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "model" && l.GetValue() == testKey.Model {
					return m.GetHistogram()
				}
			}
		}
	}
	t.Fatal("no infergate_request_duration_seconds series of testKey")
	return nil
}

// TestNativeHistogramResolution: the native buckets are 2^(1/32) wide
// (docs/metrics.md's 2.2% bound) and a series keeps that resolution
// however it fills its range: every bucket from 100 µs to 60 s, and a
// value beyond.
func TestNativeHistogramResolution(t *testing.T) {
	if g := nativeBucketGrowth; g < 1.0218 || g > 1.0220 {
		t.Fatalf("bucket growth %v, want 2^(1/32)", g)
	}
	r, _ := newTestRegistry(t, Options{})
	reg := prometheus.NewPedanticRegistry()
	if err := r.Register(reg); err != nil {
		t.Fatal(err)
	}
	r.Record(testKey, Sample{Total: 50 * time.Millisecond, Code: "OK"})
	if s := nativeHistogram(t, reg).GetSchema(); s != nativeSchema {
		t.Fatalf("schema %d, want %d", s, nativeSchema)
	}
	// Geometric steps of 0.1% (finer than a bucket) put calls in every
	// bucket from 100 µs to 60 s: indexes ceil(32·log2 v), -425 to 190.
	for v := 100e-6; v <= 60; v *= 1.001 {
		r.Record(testKey, Sample{Total: time.Duration(v * 1e9), Code: "OK"})
	}
	r.Record(testKey, Sample{Total: 60 * time.Second, Code: "OK"})
	const fullRange = 616
	h := nativeHistogram(t, reg)
	var populated int
	for _, s := range h.GetPositiveSpan() {
		populated += int(s.GetLength())
	}
	if h.GetSchema() != nativeSchema || populated != fullRange {
		t.Fatalf("schema %d with %d buckets, want %d with %d", h.GetSchema(), populated, nativeSchema, fullRange)
	}
	r.Record(testKey, Sample{Total: 100 * time.Second, Code: "OK"})
	h = nativeHistogram(t, reg)
	populated = 0
	for _, s := range h.GetPositiveSpan() {
		populated += int(s.GetLength())
	}
	// 100 s is bucket 213: 60 s's 190, 22 empty ones, then its own.
	if s := h.GetSchema(); s != nativeSchema || populated != fullRange+1 || len(h.GetPositiveSpan()) != 2 {
		t.Errorf("after a value past the range: schema %d, %d buckets in %d spans; want %d, %d in 2", s, populated, len(h.GetPositiveSpan()), nativeSchema, fullRange+1)
	}
}
