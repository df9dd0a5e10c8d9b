package proxy

import (
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/infergate/infergate/proto/kservepb"
)

// countingListener counts the connections accepted and still open.
type countingListener struct {
	net.Listener
	open atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.open.Add(1)
	return &countedConn{Conn: c, l: l}, nil
}

type countedConn struct {
	net.Conn
	l    *countingListener
	once sync.Once
}

func (c *countedConn) Close() error {
	c.once.Do(func() { c.l.open.Add(-1) })
	return c.Conn.Close()
}

// startCountedBackend is startBackend whose open connections the test
// can count.
func startCountedBackend(t *testing.T) (*backend, *countingListener) {
	t.Helper()
	b, srv := newBackend()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cl := &countingListener{Listener: lis}
	go func() { _ = srv.Serve(cl) }()
	t.Cleanup(srv.Stop)
	b.addr = lis.Addr().String()
	return b, cl
}

func (b *backend) lastModel() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.last == nil {
		return ""
	}
	return b.last.ModelName
}

// TestUpstreamMove: moving the director's upstream (a reload of
// upstream:) sends new calls to the new server, on both paths and under
// the new name, while a call in flight on the old one finishes there;
// then nothing of the proxy stays connected to the old server.
func TestUpstreamMove(t *testing.T) {
	b1, l1 := startCountedBackend(t)
	b2 := startBackend(t)
	up, err := DialUpstream(b1.addr, UpstreamOptions{Movable: true, Conns: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = up.Close() })
	if !up.Movable() {
		t.Fatal("an upstream dialled Movable at host:port cannot move")
	}
	rec := newFakeRecorder()
	p, err := New(UpstreamDirector(up), WithRecorder(rec))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	ks := kservepb.NewGRPCInferenceServiceClient(dial(t, serveFront(t, p, p.NewServer())))

	if _, err := ks.ModelInfer(ctxT(t), simpleRequest("before", 16)); err != nil {
		t.Fatal(err)
	}
	if r := rec.next(t); r.key.Upstream != b1.addr || b1.lastModel() != "before" {
		t.Fatalf("first call recorded on %q, reached %q: want it on %s", r.key.Upstream, b1.lastModel(), b1.addr)
	}
	// A call in flight on the old server when the upstream moves.
	slow := make(chan error, 1)
	go func() {
		_, err := ks.ModelInfer(ctxT(t), simpleRequest(modelSlow, 16))
		slow <- err
	}()
	select {
	case <-b1.entered:
	case <-time.After(testTimeout):
		t.Fatal("the slow call never reached the first server")
	}

	if err := up.Move(b2.addr, "second"); err != nil {
		t.Fatal(err)
	}
	if up.Name() != "second" || up.Address() != b2.addr {
		t.Fatalf("after Move: name %q address %q", up.Name(), up.Address())
	}
	for i := range 5 {
		if _, err := ks.ModelInfer(ctxT(t), simpleRequest("after", 16)); err != nil {
			t.Fatalf("call %d after the move: %v", i, err)
		}
		if r := rec.next(t); r.key.Upstream != "second" {
			t.Fatalf("call %d after the move recorded on %q, want second", i, r.key.Upstream)
		}
	}
	if b2.lastModel() != "after" || b1.lastModel() != modelSlow {
		t.Fatalf("after the move the second server saw %q, the first %q: want new calls on the second", b2.lastModel(), b1.lastModel())
	}
	// The gRPC connections themselves moved (readiness and batching
	// discovery use them).
	if _, err := kservepb.NewGRPCInferenceServiceClient(up.Conn()).ModelInfer(ctxT(t), simpleRequest("direct", 16)); err != nil {
		t.Fatal(err)
	}
	if b2.lastModel() != "direct" {
		t.Fatalf("a call on the upstream's connection reached %q's server, want the second", b2.lastModel())
	}

	close(b1.release)
	select {
	case err := <-slow:
		if err != nil {
			t.Fatalf("the call in flight on the old server: %v, want it finished", err)
		}
	case <-time.After(testTimeout):
		t.Fatal("the call in flight on the old server never finished")
	}
	if r := rec.next(t); r.key.Model != modelSlow || r.key.Upstream != b1.addr {
		t.Errorf("the call in flight recorded as %s on %q, want %s on %s, where it went", r.key.Model, r.key.Upstream, modelSlow, b1.addr)
	}
	if g := rec.InFlight(b1.addr).Value(); g != 0 {
		t.Errorf("in flight on the old name: %v, want 0", g)
	}
	deadline := time.Now().Add(testTimeout)
	for l1.open.Load() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections to the old server still open: the old pools were not drained", l1.open.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}

	if err := up.Move("not an address", "x"); err == nil {
		t.Error("Move to a bad address: no error")
	}
	fixed, err := DialUpstream("passthrough:///"+b1.addr, UpstreamOptions{Movable: true})
	if err != nil {
		t.Fatal(err)
	}
	defer fixed.Close()
	if fixed.Movable() || fixed.Move(b2.addr, "") == nil {
		t.Error("an upstream dialled with a scheme moved; want an error asking for a restart")
	}
}
