package h2relay

import (
	"bytes"
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

func codeOf(err error) codes.Code { return status.Code(err) }

func receive[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitFor):
		t.Fatalf("no %s", what)
		var zero T
		return zero
	}
}

// A client that cancels mid-call: the upstream sees the cancellation, Done
// hears ErrClientGone once, and the relay forgets the stream.
func TestClientCancelMidCall(t *testing.T) {
	e := newRelayEnv(t, Options{})
	cc := e.dial()
	for range 5 {
		ctx, cancel := context.WithCancel(testCtx(t))
		errc := make(chan error, 1)
		go func() {
			_, err := call(ctx, cc, "/t.S/Hang", []byte("x"))
			errc <- err
		}()
		upCtx := receive(t, e.up.hung, "call upstream")
		cancel()
		if err := receive(t, errc, "client's end"); codeOf(err) != codes.Canceled {
			t.Fatalf("client got %v", err)
		}
		receive(t, upCtx.Done(), "cancellation upstream")
		r := receive(t, e.h.done, "Done")
		if r.Err == nil || r.Err.Kind != ErrClientGone {
			t.Fatalf("Done heard %+v, want ErrClientGone", r)
		}
		e.settled()
	}
	select {
	case r := <-e.h.done:
		t.Fatalf("Done heard another end: %+v", r)
	default:
	}
}

// The upstream dies mid-call: the client gets UNAVAILABLE, and the next
// call, once the upstream is back on the same address, succeeds.
func TestUpstreamDiesMidCall(t *testing.T) {
	e := newRelayEnv(t, Options{})
	cc := e.dial()
	ctx := testCtx(t)
	errc := make(chan error, 1)
	go func() {
		_, err := call(ctx, cc, "/t.S/Hang", []byte("x"))
		errc <- err
	}()
	receive(t, e.up.hung, "call upstream")
	e.up.srv.Stop()
	if err := receive(t, errc, "client's end"); codeOf(err) != codes.Unavailable {
		t.Fatalf("client got %v, want UNAVAILABLE", err)
	}
	startUpstream(t, e.up.addr, "up2")
	var md metadata.MD
	if got, err := call(ctx, cc, "/t.S/Echo", []byte("again"), grpc.Header(&md)); err != nil || string(got) != "again" {
		t.Fatalf("call after the upstream came back: %v", err)
	}
	if w := md.Get("who"); len(w) != 1 || w[0] != "up2" {
		t.Fatalf("answered by %v", w)
	}
	e.settled()
}

// An upstream nobody listens on: UNAVAILABLE, not a wait for the
// client's deadline.
func TestUpstreamUnreachable(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	_ = lis.Close()
	e := newRelayEnvTo(t, addr, nil, Options{})
	cc := e.dial()
	for range 3 {
		_, err := call(testCtx(t), cc, "/t.S/Echo", []byte("x"))
		if codeOf(err) != codes.Unavailable {
			t.Fatalf("got %v, want UNAVAILABLE", err)
		}
		if r := receive(t, e.h.done, "Done"); r.Err == nil || r.Err.Kind != ErrUnavailable {
			t.Fatalf("Done heard %+v", r)
		}
	}
	e.settled()
}

// The upstream stops gracefully while a call is in flight: that call
// finishes, and new calls go to a new connection (a new server on the
// same address).
func TestUpstreamGracefulStop(t *testing.T) {
	e := newRelayEnv(t, Options{})
	cc := e.dial()
	ctx := testCtx(t)
	type result struct {
		resp []byte
		err  error
	}
	inflight := make(chan result, 1)
	go func() {
		resp, err := call(ctx, cc, "/t.S/Wait", []byte("in flight"))
		inflight <- result{resp, err}
	}()
	receive(t, e.up.hung, "call upstream")
	stopped := make(chan struct{})
	go func() {
		e.up.srv.GracefulStop()
		close(stopped)
	}()
	// GracefulStop closes the listener first: take the address over.
	var up2 *upstream
	deadline := time.Now().Add(waitFor)
	for up2 == nil {
		if lis, err := net.Listen("tcp", e.up.addr); err == nil {
			_ = lis.Close()
			up2 = startUpstream(t, e.up.addr, "up2")
		} else if time.Now().After(deadline) {
			t.Fatal("the old upstream kept its address")
		}
	}
	// Calls go on succeeding throughout, and end up on the new server.
	for {
		var md metadata.MD
		got, err := call(ctx, cc, "/t.S/Echo", []byte("new"), grpc.Header(&md))
		if err != nil || string(got) != "new" {
			t.Fatalf("call during the upstream's graceful stop: %v", err)
		}
		if w := md.Get("who"); len(w) == 1 && w[0] == "up2" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no call reached the new upstream")
		}
	}
	close(e.up.release)
	if r := receive(t, inflight, "in-flight call's end"); r.err != nil || string(r.resp) != "in flight" {
		t.Fatalf("in-flight call: %v", r.err)
	}
	receive(t, stopped, "GracefulStop's return")
	e.settled()
}

// fakeUpstream is an HTTP/2 server written frame by frame: it refuses the
// first refuse streams (every stream when refuse < 0) with REFUSED_STREAM
// and answers the others with "ok".
type fakeUpstream struct {
	addr    string
	refuse  int
	mu      sync.Mutex
	streams int // HEADERS seen
}

func startFakeUpstream(t *testing.T, refuse int) *fakeUpstream {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &fakeUpstream{addr: lis.Addr().String(), refuse: refuse}
	var wg sync.WaitGroup
	var conns []net.Conn
	var mu sync.Mutex
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			nc, err := lis.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, nc)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				u.serve(nc)
			}()
		}
	}()
	t.Cleanup(func() {
		_ = lis.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return u
}

func (u *fakeUpstream) seen() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.streams
}

func (u *fakeUpstream) serve(nc net.Conn) {
	defer nc.Close()
	pre := make([]byte, len(http2.ClientPreface))
	if _, err := nc.Read(pre); err != nil {
		return
	}
	fr := http2.NewFramer(nc, nc)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	var hbuf bytes.Buffer
	enc := hpack.NewEncoder(&hbuf)
	_ = fr.WriteSettings()
	_ = fr.WriteWindowUpdate(0, 1<<30)
	headers := func(id uint32, end bool, fields ...hpack.HeaderField) {
		hbuf.Reset()
		for _, f := range fields {
			_ = enc.WriteField(f)
		}
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hbuf.Bytes(), EndHeaders: true, EndStream: end})
	}
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				_ = fr.WriteSettingsAck()
			}
		case *http2.MetaHeadersFrame:
			u.mu.Lock()
			u.streams++
			refuse := u.refuse < 0 || u.streams <= u.refuse
			u.mu.Unlock()
			if refuse {
				_ = fr.WriteRSTStream(f.StreamID, http2.ErrCodeRefusedStream)
				continue
			}
			headers(f.StreamID, false, hpack.HeaderField{Name: ":status", Value: "200"},
				hpack.HeaderField{Name: "content-type", Value: "application/grpc"})
			_ = fr.WriteData(f.StreamID, false, grpcFrame([]byte("ok")))
			headers(f.StreamID, true, hpack.HeaderField{Name: "grpc-status", Value: "0"})
		}
	}
}

// An upstream that refuses a stream (never processed it) gets the call
// again, once, as gRPC's client does; one that refuses every time ends
// the call with UNAVAILABLE instead of a retry loop.
func TestUpstreamRefusedStream(t *testing.T) {
	t.Run("once", func(t *testing.T) {
		u := startFakeUpstream(t, 1)
		e := newRelayEnvTo(t, u.addr, nil, Options{})
		got, err := call(testCtx(t), e.dial(), "/t.S/Echo", []byte("x"))
		if err != nil || string(got) != "ok" {
			t.Fatalf("got %q, %v", got, err)
		}
		if n := u.seen(); n != 2 {
			t.Fatalf("upstream saw %d streams, want 2", n)
		}
		e.settled()
	})
	t.Run("always", func(t *testing.T) {
		u := startFakeUpstream(t, -1)
		e := newRelayEnvTo(t, u.addr, nil, Options{})
		_, err := call(testCtx(t), e.dial(), "/t.S/Echo", []byte("x"))
		if codeOf(err) != codes.Unavailable || !strings.Contains(err.Error(), "REFUSED_STREAM") {
			t.Fatalf("got %v, want UNAVAILABLE for REFUSED_STREAM", err)
		}
		if n := u.seen(); n != 2 {
			t.Fatalf("upstream saw %d streams, want 2 (one retry)", n)
		}
		e.settled()
	})
}

// An upstream that takes two streams at a time still answers a hundred
// concurrent calls from several client connections, from the first: the
// relay learns the limit before it opens streams, queues calls for a slot
// instead of overrunning it, and keeps to one connection (the pool's size).
func TestUpstreamStreamLimit(t *testing.T) {
	e := newRelayEnv(t, Options{}, grpc.MaxConcurrentStreams(2))
	ctx := testCtx(t)
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for i := range 4 {
		cc := e.dial()
		for j := range 25 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				want := pattern(1000+i*25+j, byte(j))
				got, err := call(ctx, cc, "/t.S/Echo", want)
				if err == nil && !bytes.Equal(got, want) {
					err = errors.New("different bytes came back")
				}
				if err != nil {
					errs <- err
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := e.relay.poolConns(e.up.addr); n != 1 {
		t.Errorf("the pool of size 1 has %d connections", n)
	}
	e.settled()
}

// The proxy's own timeout on a call without a deadline: the client gets
// DEADLINE_EXCEEDED naming it, the upstream saw it as grpc-timeout and
// sees the cancellation.
func TestProxyTimeout(t *testing.T) {
	e := newRelayEnv(t, Options{})
	e.h.timeout = 300 * time.Millisecond
	cc := e.dial()
	// No deadline of its own: the proxy's applies.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		_, err := call(ctx, cc, "/t.S/Hang", []byte("x"))
		errc <- err
	}()
	upCtx := receive(t, e.up.hung, "call upstream")
	if _, ok := upCtx.Deadline(); !ok {
		t.Error("the upstream got no deadline (grpc-timeout)")
	}
	err := receive(t, errc, "client's end")
	if codeOf(err) != codes.DeadlineExceeded || !strings.Contains(err.Error(), "proxy's upstream timeout") {
		t.Fatalf("got %v", err)
	}
	receive(t, upCtx.Done(), "cancellation upstream")
	// The relay's timer, or the upstream at the grpc-timeout it was
	// sent (a reset with CANCEL, or its own DEADLINE_EXCEEDED answer),
	// whichever came first: each is the deadline, and the Handler hears
	// when the relay's own passed to judge it.
	r := receive(t, e.h.done, "Done")
	code := r.Status
	if r.Err != nil {
		code = r.Err.Code
	}
	if code != codes.DeadlineExceeded || r.TimeoutAt.IsZero() ||
		r.Err != nil && r.Err.Kind != ErrTimeout && r.Err.Kind != ErrReset {
		t.Fatalf("Done heard %+v", r)
	}
	e.settled()
}

// A client's deadline reaches the upstream as grpc-timeout.
func TestClientDeadlinePassesThrough(t *testing.T) {
	e := newRelayEnv(t, Options{})
	cc := e.dial()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	want, _ := ctx.Deadline()
	errc := make(chan error, 1)
	go func() {
		_, err := call(ctx, cc, "/t.S/Wait", []byte("x"))
		errc <- err
	}()
	upCtx := receive(t, e.up.hung, "call upstream")
	got, ok := upCtx.Deadline()
	if !ok {
		t.Fatal("the upstream got no deadline")
	}
	// Each hop takes the time it took off; a second is far more than
	// loopback costs and far less than the deadline.
	// (It may be a little later: the relay counts the time left from
	// when it read the headers.)
	if d := want.Sub(got).Abs(); d > time.Second {
		t.Fatalf("upstream deadline %v off the client's", d)
	}
	close(e.up.release)
	if err := receive(t, errc, "answer"); err != nil {
		t.Fatal(err)
	}
	e.settled()
}

// The relay's GracefulStop: the call in flight completes, new
// connections are refused, and GracefulStop returns.
func TestRelayGracefulStop(t *testing.T) {
	e := newRelayEnv(t, Options{})
	cc := e.dial()
	ctx := testCtx(t)
	type result struct {
		resp []byte
		err  error
	}
	inflight := make(chan result, 1)
	big := pattern(3<<20, 5)
	go func() {
		resp, err := call(ctx, cc, "/t.S/Wait", big)
		inflight <- result{resp, err}
	}()
	receive(t, e.up.hung, "call upstream")
	stopped := make(chan struct{})
	go func() {
		e.relay.GracefulStop()
		close(stopped)
	}()
	// New connections are refused once the listener closed.
	deadline := time.Now().Add(waitFor)
	for {
		nc, err := net.Dial("tcp", e.addr)
		if err != nil {
			break
		}
		_ = nc.Close()
		if time.Now().After(deadline) {
			t.Fatal("the relay still accepts connections")
		}
	}
	select {
	case <-stopped:
		t.Fatal("GracefulStop returned with a call in flight")
	default:
	}
	close(e.up.release)
	if r := receive(t, inflight, "in-flight call's end"); r.err != nil || !bytes.Equal(r.resp, big) {
		t.Fatalf("in-flight call: %v", r.err)
	}
	receive(t, stopped, "GracefulStop's return")
}
