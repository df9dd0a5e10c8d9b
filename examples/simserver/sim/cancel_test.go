package sim

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
)

// TestCancelMidExecution cancels a real gRPC call while resnet50 executes;
// the server stops and counts it.
func TestCancelMidExecution(t *testing.T) {
	entered := make(chan struct{}, 1)
	sleep := func(ctx context.Context, _ time.Duration) error {
		entered <- struct{}{}
		<-ctx.Done()
		return ctx.Err()
	}
	h := start(t, Config{Sleep: sleep})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error)
	go func() {
		_, err := h.ks.ModelInfer(ctx, classifierKServe("resnet50", 2, seq(128, 0, 1)))
		errc <- err
	}()
	<-entered
	cancel()
	wantCode(t, <-errc, codes.Canceled, "")
	<-h.handled // the server side has returned
	if got := h.srv.Cancelled("resnet50"); got != 1 {
		t.Errorf("Cancelled(resnet50) = %d, want 1", got)
	}
	st := &h.srv.models["resnet50"].stats
	if st.execCount.Load() != 0 || st.fail.count.Load() != 1 {
		t.Errorf("exec %d fail %d", st.execCount.Load(), st.fail.count.Load())
	}
	if h.srv.Cancelled("nope") != 0 {
		t.Error("unknown model has cancellations")
	}
}
