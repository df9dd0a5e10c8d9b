package admin

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/infergate/infergate/monitor"
)

// GET /api/v1/slow lists a model's slowest calls with what they carried,
// and refuses bad input naming the parameter.
func TestSlowAPI(t *testing.T) {
	mon := monitor.NewRegistry(monitor.Options{SlowCalls: 2})
	key := monitor.SeriesKey{Model: "resnet", Version: "1", Method: "/inference.GRPCInferenceService/ModelInfer",
		Upstream: "triton", CodeClass: monitor.CodeClassOK, Route: monitor.RoutePrimary}
	for i, ms := range []int{3, 40, 5, 50} {
		rows := int64(1)
		if ms > 10 {
			rows = 8
		}
		in := []monitor.InputShape{{Name: "INPUT0", Datatype: "FP32", Shape: []int64{rows, 3, 224, 224}, Dims: 4}}
		mon.Record(key, monitor.Sample{Total: time.Duration(ms) * time.Millisecond, Code: "OK", BytesIn: rows << 20,
			Attempts: 1, BatchID: uint64(i + 1), TraceID: [16]byte{15: byte(i + 1)},
			Features: monitor.CallFeatures{BytesIn: rows << 20, Rows: rows, Inputs: in, NumInputs: 1, ShapeKey: uint64(rows)}})
	}
	a := &Server{Gatherer: prometheus.NewRegistry(), Monitor: mon}
	h := a.Handler()
	get := func(path string) (int, string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		return rec.Code, rec.Body.String()
	}
	code, body := get("/api/v1/slow?model=resnet&window=1m")
	if code != 200 {
		t.Fatalf("GET = %d: %s", code, body)
	}
	var docs []slowDoc
	if err := json.Unmarshal([]byte(body), &docs); err != nil {
		t.Fatal(err)
	}
	if len(docs) != 1 || docs[0].Version != "1" || len(docs[0].Windows) != 1 || docs[0].Windows[0].Window != "1m" {
		t.Fatalf("docs = %s", body)
	}
	calls := docs[0].Windows[0].Calls
	if len(calls) != 2 || calls[0].Latency != 0.05 || calls[1].Latency != 0.04 {
		t.Fatalf("calls = %+v, want the 50 ms and 40 ms ones", calls)
	}
	if c := calls[0]; c.Inputs != "INPUT0:FP32[8,3,224,224]" || c.BatchID != 4 || c.TraceID != strings.Repeat("0", 30)+"04" ||
		c.Target != "triton" || c.Route != "primary" || c.Code != "OK" || c.Rows != 8 || c.Attempts != 1 {
		t.Errorf("slowest call = %+v", c)
	}
	if code, body := get("/api/v1/slow?model=resnet"); code != 200 || strings.Count(body, `"window"`) != 3 ||
		strings.Index(body, `"1m"`) > strings.Index(body, `"15m"`) {
		t.Errorf("all windows = %d, want 1m, 5m, 15m in that order:\n%.400s", code, body)
	}
	for _, tc := range []struct {
		path string
		code int
		want string
	}{
		{"/api/v1/slow", 400, "model: required"},
		{"/api/v1/slow?model=resnet&window=2m", 400, `window: must be 1m, 5m or 15m, got \"2m\"`},
		{"/api/v1/slow?model=bert", 404, `model \"bert\" has no recorded calls (models with calls: resnet)`},
		{"/api/v1/slow?model=resnet&version=9", 404, `version \"9\"`},
	} {
		if code, body := get(tc.path); code != tc.code || !strings.Contains(body, tc.want) {
			t.Errorf("GET %s = %d %s, want %d with %s", tc.path, code, body, tc.code, tc.want)
		}
	}
}
