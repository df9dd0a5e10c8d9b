package monitor

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
	"github.com/prometheus/client_golang/prometheus"
)

var streamKey = SeriesKey{Model: "llm", Version: "1", Method: "/inference.GRPCInferenceService/ModelStreamInfer",
	Upstream: "triton", CodeClass: CodeClassOK, Route: RoutePrimary}

// recordRequest records one request of n responses: the first after ttfr,
// the others gap apart, as a stream meter does.
func recordRequest(r *Registry, key SeriesKey, ttfr, gap time.Duration, n int) {
	for i := range n {
		sm := StreamSample{Response: true, First: i == 0, Wait: gap}
		if i == 0 {
			sm.Wait = ttfr
		}
		sm.Done, sm.Responses = i == n-1, n
		r.RecordStream(key, sm)
	}
}

// TestStreamQuantilesMatchHDR records stream samples from several
// goroutines (shards, raw buffers and dense spills alike) and checks each
// quantity's Stats against one HDR histogram of the same values.
func TestStreamQuantilesMatchHDR(t *testing.T) {
	for _, requests := range []int{7, 400} { // raw values only; dense spills and packed slices
		t.Run(fmt.Sprint(requests), func(t *testing.T) {
			r, _ := newTestRegistry(t, Options{Shards: 4})
			ref := [NumStreamQuantities]*hdr.Histogram{newDense(), newDense(), newDense()}
			var maxes [NumStreamQuantities]time.Duration
			var mu sync.Mutex
			var wg sync.WaitGroup
			for w := range 4 {
				wg.Go(func() {
					rng := rand.New(rand.NewPCG(uint64(w), 9))
					for range requests {
						ttfr := time.Duration(rng.IntN(500_000)) * time.Microsecond
						gap := time.Duration(rng.IntN(40_000)) * time.Microsecond
						n := 1 + rng.IntN(50)
						recordRequest(r, streamKey, ttfr, gap, n)
						mu.Lock()
						_ = ref[StreamFirstResponse].RecordValue(toMicros(ttfr))
						_ = ref[StreamResponseGap].RecordValues(toMicros(gap), int64(n-1))
						_ = ref[StreamResponses].RecordValue(int64(n))
						maxes[StreamFirstResponse] = max(maxes[StreamFirstResponse], ttfr)
						if n > 1 {
							maxes[StreamResponseGap] = max(maxes[StreamResponseGap], gap)
						}
						maxes[StreamResponses] = max(maxes[StreamResponses], time.Duration(n)*time.Microsecond)
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			r.Rotate()
			ss := snapshotOf(t, r, streamKey)
			if ss.Stream == nil {
				t.Fatal("no stream stats")
			}
			if ss.Calls != 0 {
				t.Errorf("Calls = %d: stream samples are not calls", ss.Calls)
			}
			for q := range StreamQuantity(NumStreamQuantities) {
				h := ref[q]
				for _, w := range []Window{Window1m, Window5m, Window15m} {
					st := ss.Stream[w][q]
					if st.Count != uint64(h.TotalCount()) {
						t.Fatalf("%v %v: count %d, want %d", q, w, st.Count, h.TotalCount())
					}
					for i, p := range percentiles {
						want := min(fromMicros(h.ValueAtQuantile(p)), st.Max)
						if got := st.Quantile(Quantiles[i]); got != want {
							t.Errorf("%v %v p%v = %v, want %v", q, w, p, got, want)
						}
					}
					if st.Max != maxes[q] {
						t.Errorf("%v %v max = %v, want %v", q, w, st.Max, maxes[q])
					}
				}
			}
			if got, want := StreamResponses.Value(ss.Stream[Window1m][StreamResponses].Max), float64(ref[StreamResponses].Max()); got != want {
				t.Errorf("responses max reads %v, want %v", got, want)
			}
		})
	}
}

// TestStreamSeriesAreBounded: stream samples take series under the same
// cap and label rules as calls, keep a series alive while its streams
// answer, and go with it when it idles.
func TestStreamSeriesAreBounded(t *testing.T) {
	r, clk := newTestRegistry(t, Options{MaxSeries: 2, MaxLabelBytes: 64, IdleTimeout: 10 * time.Second})
	key := func(m string) SeriesKey { return withModel(streamKey, m) }
	r.Record(key("a"), Sample{Total: time.Millisecond, Code: "OK"})
	recordRequest(r, key("b"), time.Millisecond, time.Millisecond, 3) // a stream still open: no call yet
	recordRequest(r, key("c"), time.Millisecond, time.Millisecond, 2) // over the cap
	recordRequest(r, key(strings.Repeat("x", 65)), time.Millisecond, time.Millisecond, 2)
	if r.Len() != 2 {
		t.Fatalf("%d series, want the cap of 2", r.Len())
	}
	tick(r, clk, 1)
	snaps := r.Snapshot()
	last := snaps[len(snaps)-1]
	if last.Key != OverflowKey || last.Stream == nil || last.Stream[Window1m][StreamResponses].Count != 2 {
		t.Fatalf("overflow series: %+v, want the two requests over the cap and the long label", last)
	}
	if got := r.overflowBy[overflowMaxSeries].Load() + r.overflowBy[overflowTooLong].Load(); got != 0 {
		t.Errorf("overflow counter = %d: stream samples are not calls", got)
	}
	// b's streams keep answering; a has nothing more.
	for range 12 {
		recordRequest(r, key("b"), time.Millisecond, time.Millisecond, 1)
		tick(r, clk, 1)
	}
	if r.Len() != 1 || r.Series(key("b")) == r.overflow {
		t.Fatalf("after a idled: %d series, want b, kept alive by its stream samples", r.Len())
	}
	sp := r.Series(key("b")).stream.Load()
	tick(r, clk, 11)
	if r.Len() != 0 {
		t.Fatalf("%d series after b idled too, want 0", r.Len())
	}
	for _, sl := range append(append([]*streamSlice{}, sp.fine...), sp.coarse...) {
		if sl != nil {
			t.Fatal("a dropped series still holds stream slices")
		}
	}
	// A key that comes back starts afresh.
	recordRequest(r, key("b"), time.Millisecond, time.Millisecond, 1)
	tick(r, clk, 1)
	if ss := snapshotOf(t, r, key("b")); ss.Stream[Window15m][StreamResponses].Count != 1 {
		t.Errorf("a new series for b counts %d requests, want 1", ss.Stream[Window15m][StreamResponses].Count)
	}
}

// TestRecordStreamRacesDrop records stream samples while rotations drop
// idle series: none may be lost or land in a dead series. Run with -race.
func TestRecordStreamRacesDrop(t *testing.T) {
	r, clk := newTestRegistry(t, Options{IdleTimeout: time.Second, NoRequestHistogram: true})
	const workers, requests = 4, 2000
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range requests {
				k := streamKey
				k.Model = fmt.Sprintf("m%d", (i/50+w)%7)
				r.RecordStream(k, StreamSample{Done: true, Responses: 1})
			}
		})
	}
	var dropped int64
	rotate := func() {
		clk.t = clk.t.Add(time.Second)
		// Count what each series held before a rotation may drop it.
		before := map[*Series]*streamPart{}
		for _, s := range r.state.Load().list {
			before[s] = s.stream.Load()
		}
		r.Rotate()
		live := map[*Series]bool{}
		for _, s := range r.state.Load().list {
			live[s] = true
		}
		r.winMu.RLock()
		for s, sp := range before {
			if !live[s] && sp != nil {
				dropped += sp.samples // samples survive release: only slices are freed
			}
		}
		r.winMu.RUnlock()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
		}
		rotate()
	}
	rotate()
	var live int64
	r.winMu.RLock()
	for _, s := range r.state.Load().list {
		live += s.streamSamples()
	}
	r.winMu.RUnlock()
	if live+dropped != workers*requests {
		t.Fatalf("samples counted %d (live %d + dropped %d), want %d", live+dropped, live, dropped, workers*requests)
	}
}

// TestRecentStreams: the alert engine's recent window carries the stream
// quantities and their bounds, also for a model whose streams are all
// still open.
func TestRecentStreams(t *testing.T) {
	r, _ := newTestRegistry(t, Options{})
	for range 300 {
		recordRequest(r, streamKey, 200*time.Millisecond, 20*time.Millisecond, 5)
	}
	unary := testKey
	r.Record(unary, Sample{Total: time.Millisecond, Code: "OK"})
	r.Rotate()
	got, _ := r.Recent(5, func(k SeriesKey) string { return k.Model })
	rs, ok := got["llm"]
	if !ok {
		t.Fatalf("no recent stats for a model with open streams only: %v", got)
	}
	if rs.Stats[ComponentTotal].Count != 0 {
		t.Errorf("calls = %d, want 0", rs.Stats[ComponentTotal].Count)
	}
	st, b := rs.StreamOf(StreamFirstResponse)
	if st.Count != 300 || st.P99 < 199*time.Millisecond || st.P99 > 201*time.Millisecond {
		t.Errorf("TTFR stats %+v", st)
	}
	if !b.OK[2] || b.Lower[2] > st.P99 || b.Lower[2] < 199*time.Millisecond {
		t.Errorf("TTFR p99 bound %+v", b)
	}
	if st, _ := rs.StreamOf(StreamResponseGap); st.Count != 1200 {
		n := st.Count
		t.Errorf("%d gaps, want 1200", n)
	}
	if st, _ := rs.StreamOf(StreamResponses); StreamResponses.Value(st.P50) != 5 {
		v := StreamResponses.Value(st.P50)
		t.Errorf("responses p50 = %v, want 5", v)
	}
	if u := got["resnet"]; u.Stream != nil || u.Stats[ComponentTotal].Count != 1 {
		t.Errorf("unary model: %+v", u)
	}
}

// TestStreamExposition: the three summaries per window, responses as a
// number, the drop counter by reason, and promtool lints it clean.
func TestStreamExposition(t *testing.T) {
	r, _ := newTestRegistry(t, Options{})
	reg := prometheus.NewPedanticRegistry()
	if err := r.Register(reg); err != nil {
		t.Fatal(err)
	}
	recordRequest(r, streamKey, 2*time.Millisecond, time.Millisecond, 4)
	r.StreamDropped(StreamDropOutstanding)
	r.StreamDropped(StreamDropUnmatched)
	r.StreamDropped(StreamDropUnmatched)
	r.StreamDropped(numStreamDrops) // out of range: ignored
	r.Rotate()
	text := exposition(t, reg, "infergate_stream")
	lv := `code_class="ok",method="/inference.GRPCInferenceService/ModelStreamInfer",model="llm",route="primary",size_class="",upstream="triton",version="1",window="1m"`
	for _, want := range []string{
		`infergate_stream_first_response_seconds{` + lv + `,quantile="0.99"} 0.002` + "\n",
		`infergate_stream_first_response_seconds_count{` + lv + `} 1`,
		`infergate_stream_response_gap_seconds{` + lv + `,quantile="0.5"} 0.001` + "\n",
		`infergate_stream_response_gap_seconds_count{` + lv + `} 3`,
		`infergate_stream_responses_per_request{` + lv + `,quantile="0.5"} 4` + "\n",
		`infergate_stream_responses_per_request_sum{` + lv + `} 4` + "\n",
		`infergate_stream_dropped_total{reason="max_outstanding"} 1`,
		`infergate_stream_dropped_total{reason="unmatched"} 2`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("exposition lacks %q:\n%s", want, text)
		}
	}
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool not installed (CI installs Debian's prometheus package)")
	}
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = bytes.NewBufferString(exposition(t, reg))
	if out, err := cmd.CombinedOutput(); err != nil || len(out) > 0 {
		t.Fatalf("promtool check metrics: %v\n%s", err, out)
	}
}

func TestStreamQuantityNames(t *testing.T) {
	for q := range StreamQuantity(NumStreamQuantities) {
		if got, ok := ParseStreamQuantity(q.String()); !ok || got != q {
			t.Errorf("ParseStreamQuantity(%q) = %v, %v", q, got, ok)
		}
	}
	if _, ok := ParseStreamQuantity("ttfr"); ok || StreamQuantity(7).String() != "unknown" {
		t.Error("unknown names accepted")
	}
	if d := ResponsesValue(12); StreamResponses.Value(d) != 12 {
		t.Errorf("ResponsesValue(12) reads back %v", StreamResponses.Value(d))
	}
}

// BenchmarkRecordStream is one response's cost on the hot path.
func BenchmarkRecordStream(b *testing.B) {
	r, _ := newTestRegistry(b, Options{NoRequestHistogram: true})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			r.RecordStream(streamKey, StreamSample{Response: true, Wait: time.Millisecond})
		}
	})
}
