package load_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/infergate/infergate/bench/load"
	"github.com/infergate/infergate/proto/kservepb"
)

func TestRunMixSendsTheScheduleAndReportsEachOutcome(t *testing.T) {
	srv := startStub(t, func(_ context.Context, _ int64, model string) error {
		if model == "junk" {
			return status.Error(codes.NotFound, "no such model")
		}
		return nil
	})
	calls := []load.Call{
		{Kind: "simple", Payload: payload(t, load.KServe, "simple")},
		{Kind: "half_plus_two", Payload: payload(t, load.TFServing, "half_plus_two")},
		{Kind: "junk", Payload: payload(t, load.KServe, "junk")},
		// The stub has no streaming method: the stream fails, and says so.
		{Kind: "stream", Payload: payload(t, load.KServe, "simple"), Messages: 2,
			StreamMethod: kservepb.GRPCInferenceService_ModelStreamInfer_FullMethodName},
	}
	var (
		mu  sync.Mutex
		got = map[string]map[codes.Code]int{}
	)
	// 2000/s for 100 ms on a fixed timeline is exactly 200 intended calls
	// (0, 0.5 ms, ..., 99.5 ms), however long each takes.
	stats, err := load.RunMix(t.Context(), load.MixConfig{
		Target: srv.Addr, Rate: 2000, Duration: 100 * time.Millisecond, Conns: 2,
		Next: func(seq int64) load.Call { return calls[seq%int64(len(calls))] },
		Done: func(o load.Outcome) {
			mu.Lock()
			defer mu.Unlock()
			if got[o.Kind] == nil {
				got[o.Kind] = map[codes.Code]int{}
			}
			got[o.Kind][o.Code]++
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if stats.Sent != 200 || stats.Dropped != 0 {
		t.Errorf("stats %+v, want 200 sent, none dropped", stats)
	}
	want := map[string]map[codes.Code]int{
		"simple": {codes.OK: 50}, "half_plus_two": {codes.OK: 50},
		"junk": {codes.NotFound: 50}, "stream": {codes.Unimplemented: 50},
	}
	for kind, byCode := range want {
		for c, n := range byCode {
			if got[kind][c] != n {
				t.Errorf("%s: %v, want %v", kind, got[kind], byCode)
			}
		}
	}
}

func TestRunMixValidates(t *testing.T) {
	_, err := load.RunMix(t.Context(), load.MixConfig{Target: "192.0.2.1:1"})
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"only loopback", "rate 0", "duration 0s", "Next and Done"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}
