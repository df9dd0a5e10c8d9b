package route

import (
	"testing"
	"time"

	"github.com/infergate/infergate/monitor"
)

// The router learns only from the primary's successful calls, and only
// once there are enough of them for a tail quantile.
func TestPrimaryLatency(t *testing.T) {
	now := time.Unix(1000, 0)
	reg := monitor.NewRegistry(monitor.Options{Now: func() time.Time { return now }})
	latency := PrimaryLatency(reg)
	key := monitor.SeriesKey{Model: "big", Method: "/inference.GRPCInferenceService/ModelInfer", Upstream: "pri",
		CodeClass: monitor.CodeClassOK, Route: monitor.RoutePrimary}
	record := func(k monitor.SeriesKey, n int, d time.Duration) {
		for range n {
			reg.Record(k, monitor.Sample{Total: d, Upstream: d, Code: "OK"})
		}
	}
	record(key, minLatencyCalls-1, 5*time.Millisecond)
	fb := key
	fb.Route = monitor.RouteFallback
	record(fb, 100, time.Second) // the fallback's calls say nothing of the primary
	failed := key
	failed.CodeClass = monitor.CodeClassServerError
	record(failed, 100, time.Second)
	now = now.Add(time.Second)
	reg.Rotate()
	if st, ok := latency("big"); ok {
		t.Fatalf("%d primary calls: known (%+v), want unknown", minLatencyCalls-1, st)
	}
	record(key, 1, 5*time.Millisecond)
	now = now.Add(time.Second)
	reg.Rotate() // the slice is complete
	st, ok := latency("big")
	if !ok || st.Count != minLatencyCalls || st.P99 > 10*time.Millisecond {
		t.Fatalf("%d primary calls: %+v, %v; want their 5ms, counted alone", minLatencyCalls, st, ok)
	}
	if _, ok := latency("other"); ok {
		t.Error("a model without calls: known")
	}
}
