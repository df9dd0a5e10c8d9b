package proxy

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/infergate/infergate/proto/kservepb"
)

// grpcPathEnv serves p's clients with its grpc.Server alone (the fast
// path off), whatever INFERGATE_TEST_GRPC_PATH says: the calls it serves
// are the ones the relay cannot hold back by window.
func grpcPathEnv(t *testing.T, opts ...Option) (*backend, *Proxy, kservepb.GRPCInferenceServiceClient) {
	t.Helper()
	b := startBackend(t)
	up, err := DialUpstream(b.addr, UpstreamOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(StaticDirector(up), append([]Option{WithRecorder(newFakeRecorder())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	srv := p.NewServer()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return b, p, kservepb.NewGRPCInferenceServiceClient(dial(t, lis.Addr().String()))
}

// TestGRPCPathWaitsForTheBudget: on the gRPC path a call whose bytes the
// spent budget cannot take waits before grpc-go reads it, and is served
// when room comes: nothing fails, and what the calls hold never passes
// the budget by more than one message.
func TestGRPCPathWaitsForTheBudget(t *testing.T) {
	const budget = 1 << 20
	b, p, kc := grpcPathEnv(t, WithFrontDoor(FrontDoor{MaxBufferedBytes: budget}))
	req := simpleRequest(modelSlow, 300<<10) // 600 KiB of tensors

	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			if _, err := kc.ModelInfer(ctxT(t), req); err != nil {
				t.Errorf("call: %v", err)
			}
		})
	}
	<-b.entered // one call is upstream, holding its request
	deadline := time.Now().Add(testTimeout)
	for p.Stats().Buffer.Waits < 1 {
		if time.Now().After(deadline) {
			t.Fatalf("the second call never waited for the budget: %+v", p.Stats().Buffer)
		}
		time.Sleep(time.Millisecond)
	}
	if held := p.Stats().Buffer.Held; held < 600<<10 || held > budget {
		t.Errorf("held %d bytes with one 600 KiB call in, want its request counted within the budget %d", held, budget)
	}
	select {
	case <-b.entered:
		t.Fatal("the second call reached the upstream while the budget was spent")
	default:
	}
	close(b.release)
	wg.Wait()
	if st := p.Stats().Buffer; st.Held != 0 || st.Refusals != 0 {
		t.Errorf("after the calls: %+v, want nothing held and nothing refused", st)
	}
}

// TestGRPCPathRefusedAtItsDeadline: a call still waiting for room when its
// deadline comes gets RESOURCE_EXHAUSTED naming the budget, and the call
// holding the budget is unharmed.
func TestGRPCPathRefusedAtItsDeadline(t *testing.T) {
	b, p, kc := grpcPathEnv(t, WithFrontDoor(FrontDoor{MaxBufferedBytes: 1 << 20}))
	req := simpleRequest(modelSlow, 300<<10)
	done := make(chan error, 1)
	go func() {
		_, err := kc.ModelInfer(ctxT(t), req)
		done <- err
	}()
	<-b.entered
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	_, err := kc.ModelInfer(ctx, req)
	switch s := status.Convert(err); {
	case s.Code() == codes.ResourceExhausted && strings.Contains(s.Message(), "--max-buffered-bytes"):
		if st := p.Stats().Buffer; st.Refusals != 1 {
			t.Errorf("refusals %d, want 1", st.Refusals)
		}
	case s.Code() == codes.DeadlineExceeded:
		// A loaded machine may run the client's own timer first.
	default:
		t.Fatalf("waiting call: %v, want RESOURCE_EXHAUSTED naming the budget", err)
	}
	select {
	case <-b.entered:
		t.Fatal("the refused call reached the upstream")
	default:
	}
	close(b.release)
	if err := <-done; err != nil {
		t.Fatalf("the call holding the budget: %v", err)
	}
}
