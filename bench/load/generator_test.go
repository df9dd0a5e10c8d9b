package load_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/infergate/infergate/bench/load"
	"github.com/infergate/infergate/internal/stubserver"
)

func startStub(t *testing.T, hook stubserver.Hook) *stubserver.Server {
	t.Helper()
	srv, err := stubserver.Start(hook)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	return srv
}

func payload(t *testing.T, p load.Protocol, model string) *load.Payload {
	t.Helper()
	in, ok := load.ModelDefaults(model)
	if !ok {
		in = []load.Tensor{{Name: "INPUT0", Datatype: "FP32", Shape: []int64{1, 1024}}}
	}
	pl, err := load.NewPayload(p, model, in)
	if err != nil {
		t.Fatal(err)
	}
	return pl
}

func TestClosedLoopCompletesRequests(t *testing.T) {
	cases := []struct {
		name  string
		proto load.Protocol
		model string
	}{
		{"kserve simple", load.KServe, "simple"},
		{"tf half_plus_two", load.TFServing, "half_plus_two"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := startStub(t, nil)
			res, err := load.Run(t.Context(), load.Config{
				Target: srv.Addr, Payload: payload(t, tc.proto, tc.model),
				Concurrency: 4, Requests: 200, Conns: 2,
			})
			if err != nil {
				t.Fatal(err)
			}
			if res.Completed != 200 || res.Failed != 0 {
				t.Errorf("completed=%d failed=%d, want 200 and 0 (errors %v)", res.Completed, res.Failed, res.Errors)
			}
			if got := srv.Calls(); got != 200 {
				t.Errorf("server saw %d calls, want 200", got)
			}
			if got := srv.LastModel(); got != tc.model {
				t.Errorf("server saw model %q, want %q", got, tc.model)
			}
			if res.Mode != load.Closed || res.Concurrency != 4 || res.Latency.Max <= 0 || res.ResponseBytes == 0 {
				t.Errorf("unexpected result %+v", res)
			}
			if res.Latency.P50 > res.Latency.P99 || res.Latency.P99 > res.Latency.Max {
				t.Errorf("quantiles out of order: %+v", res.Latency)
			}
		})
	}
}

func TestErrorsCountedByCodeName(t *testing.T) {
	srv := startStub(t, func(_ context.Context, n int64, _ string) error {
		switch n % 4 {
		case 0:
			return status.Error(codes.Unavailable, "down")
		case 1:
			return status.Error(codes.ResourceExhausted, "full")
		}
		return nil
	})
	res, err := load.Run(t.Context(), load.Config{
		Target: srv.Addr, Payload: payload(t, load.KServe, "simple"), Concurrency: 3, Requests: 100,
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{"Unavailable": 25, "ResourceExhausted": 25}
	if len(res.Errors) != len(want) || res.Errors["Unavailable"] != 25 || res.Errors["ResourceExhausted"] != 25 {
		t.Errorf("errors = %v, want %v", res.Errors, want)
	}
	if res.Completed != 50 || res.Failed != 50 {
		t.Errorf("completed=%d failed=%d, want 50 and 50", res.Completed, res.Failed)
	}
	if res.Histogram().TotalCount() != 50 {
		t.Errorf("histogram holds %d values, want only the 50 successes", res.Histogram().TotalCount())
	}
}

func TestOpenLoopSendsRequests(t *testing.T) {
	srv := startStub(t, nil)
	res, err := load.Run(t.Context(), load.Config{
		Target: srv.Addr, Payload: payload(t, load.TFServing, "half_plus_two"),
		Rate: 2000, Arrival: load.Poisson, Requests: 100,
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Mode != load.Open || res.Completed != 100 || res.Dropped != 0 || res.Arrival != "poisson" {
		t.Errorf("unexpected result %+v", res)
	}
}

// TestOpenLoopCorrectsCoordinatedOmission stalls the first request while
// only one request may be in flight, and jumps the generator's clock forward
// during the stall instead of sleeping. The request scheduled during the
// stall cannot be sent until the stall ends; measured from its intended
// time, it must still carry the wait, while measured from its actual send it
// would look fast. Stalling the first call makes the first late request
// certainly the one queued behind the stall.
func TestOpenLoopCorrectsCoordinatedOmission(t *testing.T) {
	stalled := make(chan struct{})
	release := make(chan struct{})
	srv := startStub(t, func(_ context.Context, n int64, _ string) error {
		if n == 1 {
			close(stalled)
			<-release
		}
		return nil
	})
	clock := &jumpClock{}
	lateAt := make(chan time.Time, 1)
	type outcome struct {
		res *load.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := load.RunWithClock(t.Context(), load.Config{
			Target: srv.Addr, Payload: payload(t, load.KServe, "simple"),
			Rate: 1000, MaxInFlight: 1, Requests: 5, Timeout: time.Minute,
			OnLate: func(intended time.Time) {
				select {
				case lateAt <- intended:
				default:
				}
			},
		}, clock.now)
		done <- outcome{res, err}
	}()

	<-stalled
	stallStart := clock.now()
	firstLate := <-lateAt
	clock.jump(10 * time.Minute)
	releasedAt := clock.now()
	close(release)
	out := <-done
	if out.err != nil {
		t.Fatal(out.err)
	}
	res := out.res
	if res.Late == 0 || res.Completed != 5 {
		t.Fatalf("want 5 completed with late requests, got %+v", res)
	}
	stall := releasedAt.Sub(stallStart)
	if got := time.Duration(res.Latency.Max * float64(time.Millisecond)); got < stall.Truncate(time.Microsecond) {
		t.Errorf("max latency %v < stall %v", got, stall)
	}
	// The stalled request and the first late one both waited at least from
	// the late one's intended time to the release.
	waited := releasedAt.Sub(firstLate)
	if n := res.CountAtLeast(waited); n < 2 {
		t.Errorf("%d requests took >= %v, want >= 2: late requests were measured from their actual send", n, waited)
	}
}

// jumpClock is the real clock plus an offset the test can advance.
type jumpClock struct{ offset atomic.Int64 }

func (c *jumpClock) now() time.Time       { return time.Now().Add(time.Duration(c.offset.Load())) }
func (c *jumpClock) jump(d time.Duration) { c.offset.Add(int64(d)) }

func TestConfigValidate(t *testing.T) {
	pl := &load.Payload{Method: "/x/y", Body: []byte{1}}
	cases := []struct {
		name    string
		cfg     load.Config
		wantErr bool
	}{
		{"ok closed", load.Config{Target: "127.0.0.1:1", Payload: pl, Duration: time.Second}, false},
		{"ok localhost open", load.Config{Target: "localhost:1", Payload: pl, Rate: 5, Requests: 3}, false},
		{"ok ipv6", load.Config{Target: "[::1]:1", Payload: pl, Duration: time.Second}, false},
		{"remote host", load.Config{Target: "10.0.0.1:1", Payload: pl, Duration: time.Second}, true},
		{"hostname", load.Config{Target: "example.com:1", Payload: pl, Duration: time.Second}, true},
		{"no port", load.Config{Target: "127.0.0.1", Payload: pl, Duration: time.Second}, true},
		{"unbounded", load.Config{Target: "127.0.0.1:1", Payload: pl}, true},
		{"no payload", load.Config{Target: "127.0.0.1:1", Duration: time.Second}, true},
		{"negative rate", load.Config{Target: "127.0.0.1:1", Payload: pl, Rate: -1, Duration: time.Second}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if (err != nil) != tc.wantErr {
				t.Errorf("Validate() = %v, wantErr %v", err, tc.wantErr)
			}
		})
	}
}

func TestRunRejectsUnreachableTarget(t *testing.T) {
	_, err := load.Run(t.Context(), load.Config{
		Target: "10.1.2.3:8001", Payload: &load.Payload{Method: "/x/y"}, Duration: time.Second,
	})
	if err == nil {
		t.Fatal("Run accepted a non-loopback target")
	}
}
