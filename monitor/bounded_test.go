package monitor

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

func TestLabelsFromClientsAreBounded(t *testing.T) {
	r, _ := newTestRegistry(t, Options{MaxLabelBytes: 16})
	reg := prometheus.NewRegistry()
	if err := r.Register(reg); err != nil {
		t.Fatal(err)
	}
	ok := Sample{Total: time.Millisecond, Code: "OK"}
	long := testKey
	long.Model = strings.Repeat("m", 1<<20)
	r.Record(long, ok)
	longVersion := testKey
	longVersion.Version = strings.Repeat("9", 17)
	r.Record(longVersion, ok)
	bad := testKey
	bad.Method = "Model\xffInfer"
	r.Record(bad, ok)
	edge := testKey
	edge.Model = strings.Repeat("e", 16) // at the limit: a label
	r.Record(edge, ok)
	r.Rotate()

	if r.Len() != 1 {
		t.Fatalf("%d series, want only the one at the limit", r.Len())
	}
	text := exposition(t, reg)
	for _, want := range []string{
		`infergate_series_overflow_total{reason="label_too_long"} 2`,
		`infergate_series_overflow_total{reason="label_invalid_utf8"} 1`,
		`model="eeeeeeeeeeeeeeee"`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("exposition lacks %q", want)
		}
	}
	if strings.Contains(text, "mmmmmmmmmmmmmmmmm") || strings.Contains(text, "\xff") {
		t.Error("a bad label value reached the exposition")
	}
	if len(text) > 64<<10 {
		t.Errorf("exposition is %d bytes after a 1 MiB name", len(text))
	}
}

func TestUnknownModelsShareOneSeries(t *testing.T) {
	r, _ := newTestRegistry(t, Options{})
	notFound := Sample{Total: time.Millisecond, Code: "NotFound"}
	for i := range 500 {
		k := testKey
		k.Model, k.CodeClass = fmt.Sprintf("junk-%d", i), CodeClassClientError
		r.Record(k, notFound)
	}
	// Unknown methods without a model, answered Unimplemented.
	for i := range 100 {
		r.Record(SeriesKey{Method: fmt.Sprintf("/x.Y/Z%d", i), Upstream: "triton", CodeClass: CodeClassServerError},
			Sample{Total: time.Millisecond, Code: "Unimplemented"})
	}
	if r.Len() != 2 {
		t.Fatalf("%d series after 600 junk names, want 2 (unknown model, unknown method)", r.Len())
	}
	// A known model keeps its own name for NotFound (a missing version).
	r.Record(testKey, Sample{Total: time.Millisecond, Code: "OK"})
	k := testKey
	k.Version, k.CodeClass = "7", CodeClassClientError
	r.Record(k, notFound)
	r.Rotate()
	models := map[string]uint64{}
	for _, ss := range r.Snapshot() {
		models[ss.Key.Model+"/"+ss.Key.Method] += ss.Stats[Window1m][ComponentTotal].Count
	}
	want := map[string]uint64{
		UnknownLabel + "/" + testKey.Method:  500,
		"/" + UnknownLabel:                   100,
		testKey.Model + "/" + testKey.Method: 2,
	}
	if fmt.Sprint(models) != fmt.Sprint(want) {
		t.Errorf("calls by model/method = %v, want %v", models, want)
	}
}

func TestIdleSeriesAreDroppedAndFreeTheCap(t *testing.T) {
	r, clk := newTestRegistry(t, Options{MaxSeries: 2, IdleTimeout: 10 * time.Second})
	reg := prometheus.NewRegistry()
	if err := r.Register(reg); err != nil {
		t.Fatal(err)
	}
	ok := Sample{Total: time.Millisecond, Code: "OK"}
	key := func(m string) SeriesKey { return withModel(testKey, m) }
	r.Record(key("a"), ok)
	r.Record(key("b"), ok)
	r.Record(key("c"), ok) // over the cap
	if r.Len() != 2 {
		t.Fatalf("%d series, want the cap of 2", r.Len())
	}
	tick(r, clk, 5)
	r.Record(key("b"), ok) // b stays busy
	tick(r, clk, 6)
	if r.Len() != 1 || r.Series(key("b")) == r.overflow {
		t.Fatalf("after a idled for 11s: %d series, want b only", r.Len())
	}
	if strings.Contains(exposition(t, reg, "infergate_request_duration_seconds"), `model="a"`) {
		t.Error("the dropped series' histogram labels are still exported")
	}
	r.Record(key("c"), ok)
	if got := r.Series(key("c")); got == r.overflow {
		t.Fatal("c still goes to overflow after a freed its place")
	}
	tick(r, clk, 11)
	if r.Len() != 0 {
		t.Fatalf("%d series after everything idled, want 0", r.Len())
	}
}

// TestRecordRacesDrop records into series while rotations drop them: no
// call may be lost. Calls moved into the windows of live series plus those
// of dropped series add up to the calls recorded. Run with -race.
func TestRecordRacesDrop(t *testing.T) {
	// The clock moves while calls are recorded (a call that enters the
	// slowest-calls keeper reads it), so it is read and moved atomically.
	var nowNs atomic.Int64
	nowNs.Store(time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC).UnixNano())
	r, _ := newTestRegistry(t, Options{IdleTimeout: time.Second, NoRequestHistogram: true,
		Now: func() time.Time { return time.Unix(0, nowNs.Load()).UTC() }})
	const workers, calls = 4, 3000
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range calls {
				k := testKey
				k.Model = fmt.Sprintf("m%d", (i/50+w)%7)
				r.Record(k, Sample{Total: time.Millisecond, Code: "OK"})
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
		}
		nowNs.Add(int64(time.Second))
		r.Rotate()
	}
	nowNs.Add(int64(time.Second))
	r.Rotate()
	var live uint64
	for _, ss := range r.Snapshot() {
		live += ss.Calls
	}
	t.Logf("%d calls in dropped series", r.droppedCalls.Load())
	if got := live + uint64(r.droppedCalls.Load()); got != workers*calls {
		t.Fatalf("calls counted %d (live %d + dropped %d), want %d", got, live, r.droppedCalls.Load(), workers*calls)
	}
}

// TestSeriesHeap: series with a call a second each, windows full, hold
// under 64 KiB each, request histogram included (busy series used to hold
// over 1 MiB each), so 1,000 of them stay under 64 MiB. Each series here
// is a model of its own, so each carries a full slow-call keeper (slow.go:
// at 1 call/s every step keeps its 10 calls): 42.8 KiB in all measured
// (about 100 KiB before issue 36: 85.7 with the calls and baselines of
// the slow keeper made compact, 61 with a window's seconds keeping their
// calls' components together, 44 with the request histogram counted by
// the shards instead of client_golang's, 43 with 32-bit call counts in
// a window's slices), docs/deployment.md's table.
func TestSeriesHeap(t *testing.T) {
	const n = 250
	before := heapInUse()
	r := busyRegistryAt(n, 1, Options{})
	after := heapInUse()
	perSeries := float64(after-before) / n
	t.Logf("%d series at 1 call/s: %.1f MiB, %.0f B per series", n, float64(after-before)/(1<<20), perSeries)
	if perSeries > 64<<10 {
		t.Errorf("a series at 1 call/s holds %.0f B, want < 64 KiB", perSeries)
	}
	if r.Len() != n {
		t.Fatalf("%d series", r.Len())
	}
}

// TestByteCountersSurviveADroppedCodeClass: the byte counters add the
// series of one label set across code classes; when the server_error
// series idles out while the OK one stays busy, the counters keep its
// bytes instead of going down (Prometheus would read a counter reset).
func TestByteCountersSurviveADroppedCodeClass(t *testing.T) {
	r, clk := newTestRegistry(t, Options{IdleTimeout: 10 * time.Second})
	reg := prometheus.NewRegistry()
	if err := r.Register(reg); err != nil {
		t.Fatal(err)
	}
	okKey, errKey := testKey, testKey
	okKey.CodeClass, errKey.CodeClass = CodeClassOK, CodeClassServerError
	r.Record(errKey, Sample{Total: time.Millisecond, Code: "Internal", BytesIn: 100, BytesOut: 10})
	r.Record(okKey, Sample{Total: time.Millisecond, Code: "OK", BytesIn: 1, BytesOut: 1})
	bytesIn := func() string {
		for _, line := range strings.Split(exposition(t, reg, "infergate_request_bytes_total"), "\n") {
			if strings.HasPrefix(line, "infergate_request_bytes_total{") {
				return line[strings.LastIndexByte(line, ' ')+1:]
			}
		}
		return "none"
	}
	if got := bytesIn(); got != "101" {
		t.Fatalf("request bytes %s, want 101", got)
	}
	for range 11 {
		clk.t = clk.t.Add(time.Second)
		r.Record(okKey, Sample{Total: time.Millisecond, Code: "OK", BytesIn: 1, BytesOut: 1}) // OK stays busy
		r.Rotate()
	}
	if r.Len() != 1 {
		t.Fatalf("%d series, want the server_error one dropped", r.Len())
	}
	if got := bytesIn(); got != "112" {
		t.Errorf("request bytes %s after the server_error series went, want 112 (it had 100)", got)
	}
}
