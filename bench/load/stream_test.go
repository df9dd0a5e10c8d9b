package load_test

import (
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/infergate/infergate/bench/load"
	"github.com/infergate/infergate/examples/simserver/sim"
)

// startSim serves simserver's default models, llm_stream among them, in
// process on 127.0.0.1 with real timers.
func startSim(t *testing.T) (*sim.Server, string) {
	t.Helper()
	srv, err := sim.New(sim.Config{SampleInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(sim.ServerOptions()...)
	srv.RegisterGRPC(gs)
	go gs.Serve(srv.WrapListener(lis))
	t.Cleanup(func() { srv.Close(); gs.Stop() })
	return srv, lis.Addr().String()
}

// TestStreamRun drives llm_stream (20 ms to the first of 16 responses,
// then one every 5 ms) closed and open loop: every request counted once,
// its responses, TTFR and gaps measured; timers never fire early, so the
// quantiles are at least the model's pace.
func TestStreamRun(t *testing.T) {
	srv, addr := startSim(t)
	cases := []struct {
		name string
		cfg  load.Config
		want int64
	}{
		{"closed", load.Config{Concurrency: 3, Requests: 12}, 12},
		{"open", load.Config{Rate: 40, Requests: 8}, 8},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.Target, cfg.Payload, cfg.Stream = addr, payload(t, load.KServe, "llm_stream"), true
			res, err := load.Run(t.Context(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			st := res.Stream
			if res.Completed != tc.want || res.Failed != 0 || st == nil || res.Method != load.StreamMethod {
				t.Fatalf("completed %d failed %d (%v), stream %+v", res.Completed, res.Failed, res.Errors, st)
			}
			if st.Responses.P50 != 16 || st.Responses.Max != 16 {
				t.Errorf("responses per request %+v, want 16", st.Responses)
			}
			if n := st.Histogram("response_gap").TotalCount(); n != 15*tc.want {
				t.Errorf("%d gaps, want %d", n, 15*tc.want)
			}
			if st.FirstResponse.P50 < 20 || st.ResponseGap.P50 < 5 || res.Latency.P50 < 20+15*5 {
				t.Errorf("TTFR %+v gap %+v total %+v: below the model's pace", st.FirstResponse, st.ResponseGap, res.Latency)
			}
		})
	}
	// A request that fails is counted by its error_message.
	if _, err := srv.SetFault(sim.Fault{Model: "llm_stream", ErrorRate: 1}); err != nil {
		t.Fatal(err)
	}
	res, err := load.Run(t.Context(), load.Config{Target: addr, Payload: payload(t, load.KServe, "llm_stream"), Stream: true,
		Concurrency: 1, Requests: 3, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if res.Errors[load.ErrorMessage] != 3 || res.Completed != 0 {
		t.Errorf("errors %v completed %d, want 3 error_message failures", res.Errors, res.Completed)
	}
}

func TestStreamNeedsKServe(t *testing.T) {
	cfg := load.Config{Target: "127.0.0.1:1", Payload: payload(t, load.TFServing, "half_plus_two"), Stream: true, Requests: 1}
	if err := cfg.Validate(); err == nil || err.Error() != "load: stream: needs a KServe payload (ModelInferRequest)" {
		t.Errorf("Validate: %v", err)
	}
}
