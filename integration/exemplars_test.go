package integration

import (
	"encoding/hex"
	"fmt"
	"math"
	"net/url"
	"slices"
	"strconv"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"

	"github.com/infergate/infergate/proto/kservepb"
)

// promExemplar is one exemplar of /api/v1/query_exemplars with the labels
// of the series it belongs to.
type promExemplar struct {
	Series  map[string]string
	TraceID string
	Value   float64
}

// promExemplars runs a query_exemplars over the last ten minutes.
func promExemplars(addr, query string) ([]promExemplar, error) {
	now := time.Now()
	v := url.Values{"query": {query},
		"start": {strconv.FormatInt(now.Add(-10*time.Minute).Unix(), 10)},
		"end":   {strconv.FormatInt(now.Add(time.Minute).Unix(), 10)}}
	var data []struct {
		SeriesLabels map[string]string `json:"seriesLabels"`
		Exemplars    []struct {
			Labels map[string]string `json:"labels"`
			Value  string            `json:"value"`
		} `json:"exemplars"`
	}
	if err := promGet(addr, "/api/v1/query_exemplars", query, v, &data); err != nil {
		return nil, err
	}
	var out []promExemplar
	for _, d := range data {
		for _, e := range d.Exemplars {
			f, err := strconv.ParseFloat(e.Value, 64)
			if err != nil {
				return nil, fmt.Errorf("%s: exemplar value %q: %w", query, e.Value, err)
			}
			out = append(out, promExemplar{Series: d.SeriesLabels, TraceID: e.Labels["trace_id"], Value: f})
		}
	}
	return out, nil
}

// classicBounds are the upper bounds of infergate_request_duration_seconds'
// classic buckets (monitor's durationBuckets), +Inf last.
var classicBounds = []float64{
	0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1,
	0.15, 0.2, 0.3, 0.5, 1, 2.5, 10, 60, math.Inf(1),
}

// leOf is the le label of the classic bucket that counts v.
func leOf(v float64) string {
	i, _ := slices.BinarySearch(classicBounds, v)
	return strconv.FormatFloat(classicBounds[i], 'g', -1, 64)
}

// TestExemplars: simserver with one model made slow, infergate tracing to
// an OTLP receiver in the test, and Prometheus with exemplar storage
// scraping infergate's /metrics in OpenMetrics. The slow call's trace id
// is the exemplar of the classic bucket its latency fell in, and the
// receiver has that trace; fast traced calls leave theirs in lower
// buckets. A second Prometheus with native histograms on stores an
// exemplar of a traced call on the native series.
func TestExemplars(t *testing.T) {
	rcv := startOTLPReceiver(t)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "50") // export within 50ms, not 5s
	sim := startSim(t)
	gate := startProxy(t, sim.grpc, "--tracing", "--trace-protocol", "grpc", "--trace-endpoint", "http://"+rcv.addr)
	kc := kservepb.NewGRPCInferenceServiceClient(dial(t, gate.grpc))
	prom := startPrometheusFeatures(t, "1s", "", "exemplar-storage",
		[]any{map[string]any{"targets": []string{gate.admin}}})
	nativeProm := startPrometheusFeatures(t, "1s", "", "exemplar-storage,native-histograms",
		[]any{map[string]any{"targets": []string{gate.admin}}})

	ctx := testCtx(t)
	call := func(n int) time.Duration {
		t.Helper()
		tp, _, _ := traceparent(n)
		start := time.Now()
		if _, err := kc.ModelInfer(metadata.AppendToOutgoingContext(ctx, "traceparent", tp), resnetRequest("resnet50", 1)); err != nil {
			t.Fatalf("call %d: %v", n, err)
		}
		return time.Since(start)
	}
	for n := range 5 {
		call(100 + n)
	}
	const delay = 300 * time.Millisecond
	fault(t, sim.admin, fmt.Sprintf(`{"model":"resnet50","delay_ms":%d}`, delay.Milliseconds()))
	slowTook := call(200)
	_, slowID, _ := traceparent(200)
	slowHex := hex.EncodeToString(slowID)

	var got promExemplar
	var all []promExemplar
	waitFor(t, 60*time.Second, "the slow call's exemplar in Prometheus", func() bool {
		var err error
		all, err = promExemplars(prom, `infergate_request_duration_seconds_bucket{model="resnet50"}`)
		if err != nil {
			t.Log(err)
			return false
		}
		for _, e := range all {
			if e.TraceID == slowHex {
				got = e
				return true
			}
		}
		return false
	})
	if got.Value < delay.Seconds() || got.Value > slowTook.Seconds() {
		t.Errorf("slow call's exemplar value %gs, want its latency: at least the %v delay, at most the %v the client saw",
			got.Value, delay, slowTook)
	}
	if le := got.Series["le"]; le != leOf(got.Value) {
		t.Errorf("slow call's exemplar is on bucket le=%q, want le=%q (the bucket of %gs)", le, leOf(got.Value), got.Value)
	}
	fast := 0
	for _, e := range all {
		if e.TraceID != slowHex && e.Value < delay.Seconds() {
			fast++
			if e.Series["le"] != leOf(e.Value) {
				t.Errorf("exemplar %s of %gs is on bucket le=%q, want le=%q", e.TraceID, e.Value, e.Series["le"], leOf(e.Value))
			}
		}
	}
	if fast == 0 {
		t.Errorf("no exemplar of the fast traced calls: %+v", all)
	}

	t.Logf("slow call took %v; its exemplar: %+v", slowTook, got)
	waitFor(t, 30*time.Second, "the slow call's trace at the OTLP receiver", func() bool {
		return len(rcv.inTrace(slowID)) > 0
	})

	// The native histogram carries them too. Prometheus 2.42 reads a
	// native series' exemplars from the classic buckets and keeps one per
	// scrape (the lowest bucket's), so only "one of the traced calls" can
	// be asked of it; newer versions read the native exemplars.
	var nat promExemplar
	waitFor(t, 60*time.Second, "an exemplar on the native histogram", func() bool {
		exs, err := promExemplars(nativeProm, `infergate_request_duration_seconds{model="resnet50"}`)
		if err != nil {
			t.Log(err)
		}
		for _, e := range exs {
			if _, le := e.Series["le"]; !le && e.TraceID != "" {
				nat = e
				return true
			}
		}
		return false
	})
	id, err := hex.DecodeString(nat.TraceID)
	if err != nil {
		t.Fatalf("native exemplar's trace id %q: %v", nat.TraceID, err)
	}
	waitFor(t, 30*time.Second, "the native exemplar's trace at the OTLP receiver", func() bool {
		return len(rcv.inTrace(id)) > 0
	})
}
