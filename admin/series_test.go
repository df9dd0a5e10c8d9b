package admin

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/infergate/infergate/monitor"
)

// TestSeriesJSONStreams: a series with stream samples shows them per
// window, durations in seconds and responses as a number; others do not.
func TestSeriesJSONStreams(t *testing.T) {
	r := monitor.NewRegistry(monitor.Options{NoRequestHistogram: true})
	key := monitor.SeriesKey{Model: "llm", Version: "1", Method: "/inference.GRPCInferenceService/ModelStreamInfer",
		Upstream: "triton", CodeClass: monitor.CodeClassOK, Route: monitor.RoutePrimary}
	r.RecordStream(key, monitor.StreamSample{Response: true, First: true, Wait: 250 * time.Millisecond})
	r.RecordStream(key, monitor.StreamSample{Response: true, Wait: 20 * time.Millisecond, Done: true, Responses: 2})
	unary := key
	unary.Method = "/inference.GRPCInferenceService/ModelInfer"
	r.Record(unary, monitor.Sample{Total: time.Millisecond, Code: "OK"})
	r.Rotate()
	b, err := json.Marshal(seriesJSON(r.Snapshot()))
	if err != nil {
		t.Fatal(err)
	}
	var docs []map[string]any
	if err := json.Unmarshal(b, &docs); err != nil {
		t.Fatal(err)
	}
	if len(docs) != 2 || docs[0]["stream"] != nil {
		t.Fatalf("want the unary series without a stream section first: %s", b)
	}
	w := docs[1]["stream"].(map[string]any)["1m"].(map[string]any)
	ttfr := w["first_response"].(map[string]any)
	gap := w["response_gap"].(map[string]any)
	n := w["responses_per_request"].(map[string]any)
	if ttfr["p99_seconds"] != 0.25 || gap["max_seconds"] != 0.02 || n["p50"] != 2.0 || n["mean"] != 2.0 || n["count"] != 1.0 {
		t.Errorf("stream section: %v", w)
	}
	if strings.Contains(string(b), `"p50_seconds":2`) {
		t.Errorf("responses reported in seconds: %s", b)
	}
}
