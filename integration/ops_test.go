package integration

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/infergate/infergate/proto/kservepb"
)

// TestDeadlineReachesUpstream: the client's deadline travels through the
// proxy, so when it expires the model server sees its call cancelled
// instead of computing for nobody.
func TestDeadlineReachesUpstream(t *testing.T) {
	e := newEnv(t)
	if code, body := httpDo(t, http.MethodPost, "http://"+e.sim.admin+"/api/v1/faults", `{"model":"resnet50","hang":true}`); code != http.StatusOK {
		t.Fatalf("inject hang: %d %s", code, body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := kservepb.NewGRPCInferenceServiceClient(dial(t, e.gate.grpc)).ModelInfer(ctx, resnetRequest("resnet50", 1))
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("got %v, want DeadlineExceeded", err)
	}
	eventually(t, "simserver to count the cancelled call", func() bool {
		fams := scrape(t, e.sim.admin)
		return counterSum(fams, "simserver_cancelled_total", map[string]string{"model": "resnet50"}) >= 1
	})
}

// TestClientCancelReachesUpstream: cancelling the call (not a deadline)
// also cancels the upstream call.
func TestClientCancelReachesUpstream(t *testing.T) {
	e := newEnv(t)
	httpDo(t, http.MethodPost, "http://"+e.sim.admin+"/api/v1/faults", `{"model":"mobilenet_v3","hang":true}`)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := kservepb.NewGRPCInferenceServiceClient(dial(t, e.gate.grpc)).ModelInfer(ctx, resnetRequest("mobilenet_v3", 1))
		errc <- err
	}()
	eventually(t, "the call to reach simserver", func() bool {
		return counterSum(scrape(t, e.sim.admin), "nv_inference_pending_request_count", map[string]string{"model": "mobilenet_v3"}) >= 1 ||
			counterSum(scrape(t, e.gate.admin), "infergate_requests_in_flight", nil) >= 1
	})
	cancel()
	if err := <-errc; status.Code(err) != codes.Canceled {
		t.Fatalf("got %v, want Canceled", err)
	}
	eventually(t, "simserver to count the cancelled call", func() bool {
		return counterSum(scrape(t, e.sim.admin), "simserver_cancelled_total", map[string]string{"model": "mobilenet_v3"}) >= 1
	})
}

// TestBadInputKeepsServing: garbage bytes and an oversized message each get
// a clear status, and the next good call still succeeds.
func TestBadInputKeepsServing(t *testing.T) {
	e := newEnv(t, "--max-message-bytes", "1048576")
	cc := dial(t, e.gate.grpc)
	ctx := testCtx(t)

	_, err := invokeRaw(ctx, cc, "/inference.GRPCInferenceService/ModelInfer", []byte{0xff, 0xff, 0xff, 0xff, 0x0f, 0x01})
	if st := status.Convert(err); st.Code() == codes.OK || st.Code() == codes.Unavailable || st.Message() == "" {
		t.Errorf("garbage bytes: got %v, want a clear error status", err)
	}
	big := mustMarshal(t, identityRequest(512<<10)) // 2 MiB of floats
	_, err = invokeRaw(ctx, cc, "/inference.GRPCInferenceService/ModelInfer", big)
	if status.Code(err) != codes.ResourceExhausted {
		t.Errorf("2 MiB message over a 1 MiB limit: got %v, want ResourceExhausted", err)
	}
	if _, err := kservepb.NewGRPCInferenceServiceClient(cc).ModelInfer(ctx, simpleRequest("after")); err != nil {
		t.Fatalf("good call after bad ones: %v", err)
	}
}

// TestUnreachableUpstream: a closed upstream port gives UNAVAILABLE
// quickly (well inside a generous deadline) and /readyz says why.
func TestUnreachableUpstream(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	gate := startProxy(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, err = kservepb.NewGRPCInferenceServiceClient(dial(t, gate.grpc)).ModelInfer(ctx, simpleRequest("x"))
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("got %v, want Unavailable", err)
	}
	if ctx.Err() != nil {
		t.Fatal("the call hung until its deadline")
	}
	if code, body := httpGet(t, "http://"+gate.admin+"/readyz"); code != http.StatusServiceUnavailable {
		t.Fatalf("/readyz = %d %q, want 503", code, body)
	}
	if code, _ := httpGet(t, "http://"+gate.admin+"/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz = %d, want 200", code)
	}
}

// TestSIGTERMDrains: a call in flight when SIGTERM arrives completes with
// OK, and the process exits 0.
func TestSIGTERMDrains(t *testing.T) {
	e := newEnv(t)
	httpDo(t, http.MethodPost, "http://"+e.sim.admin+"/api/v1/faults", `{"model":"simple","delay_ms":1500}`)
	if code, _ := httpGet(t, "http://"+e.gate.admin+"/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz before drain = %d", code)
	}
	cc := dial(t, e.gate.grpc)
	errc := make(chan error, 1)
	go func() {
		_, err := kservepb.NewGRPCInferenceServiceClient(cc).ModelInfer(testCtx(t), simpleRequest("drain"))
		errc <- err
	}()
	eventually(t, "the call to be in flight", func() bool {
		return counterSum(scrape(t, e.gate.admin), "infergate_requests_in_flight", nil) >= 1
	})
	exitErr := e.gate.sigterm(t)
	if err := <-errc; err != nil {
		t.Fatalf("in-flight call during drain: %v", err)
	}
	var ee *exec.ExitError
	if exitErr != nil && !errors.As(exitErr, &ee) {
		t.Fatal(exitErr)
	}
	if exitErr != nil {
		t.Fatalf("exit after SIGTERM: %v\n%s", exitErr, e.gate.log)
	}
}

// TestBadConfigExitsNonZero: a bad value names its field and nothing is
// served.
func TestBadConfigExitsNonZero(t *testing.T) {
	cmd := exec.Command(binDir+"/infergate", "--upstream", "127.0.0.1:1", "--max-series", "-5")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 {
		t.Fatalf("exit: %v, want status 2\n%s", err, out)
	}
	if want := "monitor.max_series: must be positive, got -5"; !strings.Contains(string(out), want) {
		t.Fatalf("output %q does not name the field (%q)", out, want)
	}
}
