package integration

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestSlowCalls: simserver's resnet50 takes longer with more rows. A
// client sends four 1-row calls for each 32-row one, one at a time (no
// call waits behind another); infergate's /api/v1/slow then lists the
// last minute's slowest calls with the 32-row shape, and its differs
// sentence names how many times the median request bytes they carried.
func TestSlowCalls(t *testing.T) {
	sim := startSim(t)
	gate := startProxy(t, sim.grpc)
	cc := dial(t, gate.grpc)
	small, big := mustMarshal(t, resnetRequest("resnet50", 1)), mustMarshal(t, resnetRequest("resnet50", 32))
	const bigShape = "input:FP32[32,64]"
	type doc struct {
		Windows []struct {
			Window string
			Calls  []struct {
				Latency  float64 `json:"latency_seconds"`
				Inputs   string
				Rows     int64
				Bytes    int64 `json:"request_bytes"`
				Upstream string
				Route    string
				Code     string
			}
			Differs struct {
				Calls      int64
				SlowCalls  int     `json:"slow_calls"`
				BytesRatio float64 `json:"request_bytes_ratio"`
				Shape      string
				Summary    string
			}
		}
	}
	ctx := testCtx(t)
	var last string
	for deadline := time.Now().Add(90 * time.Second); time.Now().Before(deadline); {
		for i := range 50 {
			req := small
			if i%5 == 4 {
				req = big
			}
			if _, err := invokeRaw(ctx, cc, "/inference.GRPCInferenceService/ModelInfer", req); err != nil {
				t.Fatalf("call: %v", err)
			}
		}
		code, body := httpGet(t, "http://"+gate.admin+"/api/v1/slow?model=resnet50&window=1m")
		last = body
		if code != 200 {
			continue // no series yet
		}
		var docs []doc
		if err := json.Unmarshal([]byte(body), &docs); err != nil {
			t.Fatalf("decode: %v\n%s", err, body)
		}
		if len(docs) != 1 || len(docs[0].Windows) != 1 {
			t.Fatalf("want one version with the 1m window:\n%s", body)
		}
		w := docs[0].Windows[0]
		// The baseline counts a slice's calls once it ends: wait for
		// ten slow calls and a baseline of at least 100 calls.
		if len(w.Calls) < 10 || w.Differs.Calls < 100 {
			continue
		}
		// simserver's long tail (1% of executions 4 to 8 times slower)
		// may put a 1-row call among them: most, not all, are 32-row.
		bigOnes := 0
		for i, c := range w.Calls {
			if c.Inputs == bigShape && c.Rows == 32 {
				bigOnes++
			}
			if c.Code != "OK" || c.Route != "primary" || c.Upstream == "" || c.Inputs == "" {
				t.Errorf("slow call %d: %+v, want an OK primary call with its inputs", i, c)
			}
			if i > 0 && c.Latency > w.Calls[i-1].Latency {
				t.Errorf("calls not slowest first: %v after %v", c.Latency, w.Calls[i-1].Latency)
			}
		}
		if bigOnes*10 < len(w.Calls)*8 {
			t.Errorf("%d of %d slow calls had %s, want at least 80%%:\n%s", bigOnes, len(w.Calls), bigShape, body)
		}
		d := w.Differs
		// 32 rows of 64 floats against 1: the request bytes differ about
		// 30 times; the all-calls median is read from a histogram.
		if d.Shape != bigShape || d.BytesRatio < 10 || !strings.Contains(d.Summary, "× the median request bytes") ||
			!strings.Contains(d.Summary, "had "+bigShape) {
			t.Errorf("differs = %+v, want the 32-row shape and a bytes ratio above 10 named in the summary", d)
		}
		t.Logf("differs: %s", d.Summary)
		return
	}
	t.Fatalf("no 10 slow calls over a baseline of 100 within 90s; last answer:\n%s", last)
}
