package monitor

import (
	"encoding/hex"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
)

func traceID(b byte) [16]byte {
	var id [16]byte
	for i := range id {
		id[i] = b
	}
	return id
}

func hexID(b byte) string { id := traceID(b); return hex.EncodeToString(id[:]) }

// durationFamily gathers reg and returns the request histogram's metric of
// testKey's label set.
func durationMetric(t *testing.T, reg prometheus.Gatherer) *dto.Histogram {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "infergate_request_duration_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "model" && lp.GetValue() == testKey.Model {
					return m.GetHistogram()
				}
			}
		}
	}
	t.Fatal("no infergate_request_duration_seconds for the test series")
	return nil
}

func exemplarTrace(e *dto.Exemplar) string {
	for _, lp := range e.GetLabel() {
		if lp.GetName() == ExemplarLabel {
			return lp.GetValue()
		}
	}
	return ""
}

// A traced call's trace id is the exemplar of the classic bucket its
// latency fell in and one of the native histogram's exemplars; the newest
// call of a bucket wins, across the series (code classes) of one label
// set; untraced calls leave none.
func TestExemplarsOnTheirBuckets(t *testing.T) {
	r, clk := newTestRegistry(t, Options{})
	reg := prometheus.NewPedanticRegistry()
	if err := r.Register(reg); err != nil {
		t.Fatal(err)
	}
	errKey := testKey
	errKey.CodeClass = CodeClassServerError
	r.Record(testKey, Sample{Total: 120 * time.Millisecond, Code: "OK", TraceID: traceID(1)}) // le 0.15
	clk.t = clk.t.Add(time.Second)
	r.Record(errKey, Sample{Total: 130 * time.Millisecond, Code: "Unavailable", TraceID: traceID(2)}) // le 0.15, newer
	at2 := clk.t
	r.Record(testKey, Sample{Total: 3 * time.Millisecond, Code: "OK", TraceID: traceID(3)}) // le 0.005
	// Newer by the clock: calls may land on different shards, and the
	// newest exemplar of a bucket is chosen by its time.
	clk.t = clk.t.Add(time.Millisecond)
	r.Record(testKey, Sample{Total: 4 * time.Millisecond, Code: "OK", TraceID: traceID(5)}) // le 0.005, newer: replaces 3
	r.Record(testKey, Sample{Total: 4500 * time.Microsecond, Code: "OK"})                   // untraced: keeps 5
	r.Record(testKey, Sample{Total: 90 * time.Second, Code: "OK", TraceID: traceID(4)})     // +Inf
	r.Record(testKey, Sample{Total: 7 * time.Millisecond, Code: "OK"})                      // le 0.01: untraced, none

	h := durationMetric(t, reg)
	want := map[float64]string{0.15: hexID(2), 0.005: hexID(5), math.Inf(1): hexID(4)}
	wantAt := map[float64]time.Time{0.15: at2, 0.005: clk.t, math.Inf(1): clk.t}
	for _, b := range h.GetBucket() {
		e := b.GetExemplar()
		w, ok := want[b.GetUpperBound()]
		switch {
		case !ok && e != nil:
			t.Errorf("bucket le=%g has exemplar %v, want none", b.GetUpperBound(), e)
		case ok && e == nil:
			t.Errorf("bucket le=%g has no exemplar, want trace %s", b.GetUpperBound(), w)
		case ok && exemplarTrace(e) != w:
			t.Errorf("bucket le=%g: exemplar trace %q, want %s", b.GetUpperBound(), exemplarTrace(e), w)
		}
		if ok && e != nil && !e.GetTimestamp().AsTime().Equal(wantAt[b.GetUpperBound()]) {
			t.Errorf("bucket le=%g: exemplar at %v, want the clock's %v", b.GetUpperBound(), e.GetTimestamp().AsTime(), wantAt[b.GetUpperBound()])
		}
		delete(want, b.GetUpperBound())
	}
	if len(want) > 0 {
		t.Errorf("buckets missing from the exposition: %v", want)
	}
	var native []string
	for _, e := range h.GetExemplars() {
		native = append(native, exemplarTrace(e))
		if exemplarTrace(e) == hexID(2) && e.GetValue() != 0.13 {
			t.Errorf("native exemplar value %g, want the call's 0.13 s", e.GetValue())
		}
	}
	if len(native) != 3 || !strings.Contains(strings.Join(native, " "), hexID(2)) {
		t.Errorf("native histogram exemplars %v, want the three buckets' latest", native)
	}
}

// /metrics serves the exemplars in OpenMetrics to a scraper that asks for
// it, and the text format (without them) to one that does not.
func TestExemplarsOpenMetrics(t *testing.T) {
	r, _ := newTestRegistry(t, Options{})
	reg := prometheus.NewPedanticRegistry()
	if err := r.Register(reg); err != nil {
		t.Fatal(err)
	}
	r.Record(testKey, Sample{Total: 120 * time.Millisecond, Code: "OK", TraceID: traceID(0xab)})
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{EnableOpenMetrics: true}))
	defer srv.Close()
	get := func(accept string) string {
		req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	om := get("application/openmetrics-text; version=1.0.0")
	wantLine := `le="0.15"} 1 # {trace_id="` + hexID(0xab) + `"} 0.12 `
	if !strings.Contains(om, wantLine) {
		t.Errorf("OpenMetrics exposition lacks the exemplar %q:\n%s", wantLine, grepLines(om, "duration_seconds_bucket"))
	}
	if text := get(""); strings.Contains(text, "trace_id") {
		t.Errorf("text exposition carries exemplars:\n%s", grepLines(text, "trace_id"))
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// A traced call costs no more allocations than an untraced one once its
// shard holds an exemplar set (one 800-byte allocation per shard, ever).
func TestExemplarAllocBudget(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts differ under -race; `make test-allocs` runs this without it")
	}
	r, _ := newTestRegistry(t, Options{Shards: 1})
	untraced := Sample{Total: 120 * time.Millisecond, Upstream: 100 * time.Millisecond, Code: "OK"}
	traced := untraced
	traced.TraceID = traceID(7)
	r.Record(testKey, traced) // creates the series and the shard's exemplar set
	plain := testing.AllocsPerRun(1000, func() { r.Record(testKey, untraced) })
	withTrace := testing.AllocsPerRun(1000, func() { r.Record(testKey, traced) })
	t.Logf("allocations per Record: %.2f untraced, %.2f traced", plain, withTrace)
	if withTrace > plain {
		t.Errorf("a traced Record allocates %.2f times, an untraced one %.2f: exemplars must not allocate per call", withTrace, plain)
	}
}

// The series of a dropped label set take their exemplars with them.
func TestExemplarsGoWithTheSeries(t *testing.T) {
	r, clk := newTestRegistry(t, Options{IdleTimeout: 2 * time.Second})
	reg := prometheus.NewPedanticRegistry()
	if err := r.Register(reg); err != nil {
		t.Fatal(err)
	}
	exemplars := func() int {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, mf := range mfs {
			if mf.GetName() == "infergate_request_duration_seconds" {
				for _, m := range mf.GetMetric() {
					n += len(m.GetHistogram().GetExemplars())
				}
			}
		}
		return n
	}
	r.Record(testKey, Sample{Total: time.Millisecond, Code: "OK", TraceID: traceID(9)})
	if exemplars() != 1 {
		t.Fatal("no exemplars after a traced call")
	}
	tick(r, clk, 5)
	if n := exemplars(); n != 0 {
		t.Errorf("%d exemplars kept after their series were dropped", n)
	}
}

// Scrapes read exemplars while calls write them (run with -race).
func TestExemplarsConcurrentWithScrapes(t *testing.T) {
	r, _ := newTestRegistry(t, Options{})
	reg := prometheus.NewPedanticRegistry()
	if err := r.Register(reg); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 500 {
				r.Record(testKey, Sample{Total: time.Duration(1+i%300) * time.Millisecond, Code: "OK", TraceID: traceID(byte(g + 1))})
			}
		})
	}
	for range 20 {
		if _, err := reg.Gather(); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	if h := durationMetric(t, reg); len(h.GetExemplars()) == 0 {
		t.Error("no exemplars after the traced calls")
	}
}
