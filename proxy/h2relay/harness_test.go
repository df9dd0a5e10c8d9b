package h2relay

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/infergate/infergate/proto/wire"
	"github.com/infergate/infergate/proxy/h2relay/h2codec"
)

// TestMain fails the package if a test leaves goroutines behind: readers,
// flushers, dialers or timers' functions.
func TestMain(m *testing.M) {
	h2codec.CheckInvariants = true
	goleak.VerifyTestMain(m)
}

// waitFor bounds every wait of these tests; reaching it is a failure.
const waitFor = 10 * time.Second

// rawCodec passes []byte through, so the tests see the exact bytes.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return *(v.(*[]byte)), nil }
func (rawCodec) Unmarshal(data []byte, v any) error {
	*(v.(*[]byte)) = bytes.Clone(data)
	return nil
}
func (rawCodec) Name() string { return "proto" }

// upstream is a real grpc-go server answering any method:
//
//   - .../Echo answers with the request.
//   - .../Hang waits for the call's end; it reports its context on hung.
//   - .../Size answers with as many bytes as the request's decimal text.
//   - .../Wait reports its context on hung and echoes once release closes.
type upstream struct {
	addr string
	srv  *grpc.Server
	name string // put in every response's "who" header
	hung chan context.Context
	// release lets .../Wait calls answer: they report their context on
	// hung, then echo once release is closed.
	release chan struct{}
	// calls counts the calls its handler began.
	calls atomic.Int64
}

func startUpstream(t testing.TB, addr, name string, opts ...grpc.ServerOption) *upstream {
	t.Helper()
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	u := &upstream{addr: lis.Addr().String(), name: name, hung: make(chan context.Context, 256), release: make(chan struct{})}
	opts = append([]grpc.ServerOption{grpc.ForceServerCodec(rawCodec{}), grpc.UnknownServiceHandler(u.handle),
		grpc.MaxRecvMsgSize(64 << 20)}, opts...)
	u.srv = grpc.NewServer(opts...)
	go func() { _ = u.srv.Serve(lis) }()
	t.Cleanup(u.srv.Stop)
	return u
}

func (u *upstream) handle(_ any, ss grpc.ServerStream) error {
	u.calls.Add(1)
	method, _ := grpc.MethodFromServerStream(ss)
	var req []byte
	if err := ss.RecvMsg(&req); err != nil {
		return err
	}
	_ = ss.SetHeader(metadata.Pairs("who", u.name))
	switch {
	case strings.HasSuffix(method, "/Echo"):
		return ss.SendMsg(&req)
	case strings.HasSuffix(method, "/Hang"):
		u.hung <- ss.Context()
		<-ss.Context().Done()
		return ss.Context().Err()
	case strings.HasSuffix(method, "/Wait"):
		u.hung <- ss.Context()
		select {
		case <-u.release:
		case <-ss.Context().Done():
			return ss.Context().Err()
		}
		return ss.SendMsg(&req)
	case strings.HasSuffix(method, "/Size"):
		n, err := strconv.Atoi(string(req))
		if err != nil {
			return status.Error(codes.InvalidArgument, err.Error())
		}
		resp := pattern(n, 7)
		return ss.SendMsg(&resp)
	}
	return status.Error(codes.Unimplemented, method)
}

// pattern is n bytes that differ with seed, so a misplaced byte shows.
func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*31+i>>8) ^ seed
	}
	return b
}

// fakeHandler routes unary methods (those not ending in "Stream") to
// pool, and those with "Local" in their name to Local.
type fakeHandler struct {
	pool    func() *Pool
	timeout time.Duration
	done    chan *Result
	served  chan error    // contexts' ends of served calls that waited
	waiting chan struct{} // a served call started to wait
	mu      sync.Mutex
	dones   map[*Call]int
	refused atomic.Int64
	early   []string // models RouteEarly routed
}

func (h *fakeHandler) Unary(method string) bool { return !strings.HasSuffix(method, "Stream") }

func (h *fakeHandler) Route(c *Call) (*Pool, bool) {
	if strings.Contains(c.Method, "Local") {
		return nil, false
	}
	if strings.Contains(c.Method, "Served") {
		return nil, true
	}
	if c.Deadline.IsZero() {
		c.Timeout = h.timeout
	}
	return h.pool(), false
}

// Serve echoes the request's message with a header and a trailer, or,
// for a method naming "Wait", waits for the client to go away and reports
// the context's end on served.
func (h *fakeHandler) Serve(c *Call, r *Responder) {
	if strings.Contains(c.Method, "Wait") {
		h.waiting <- struct{}{}
		<-r.Context().Done()
		h.served <- r.Context().Err()
		r.Finish([]hpack.HeaderField{{Name: "grpc-status", Value: "1"}})
		return
	}
	msg, _ := c.Message()
	r.WriteHeader([]hpack.HeaderField{{Name: ":status", Value: "200"}, {Name: "content-type", Value: "application/grpc"}, {Name: "x-served", Value: "yes"}})
	r.WriteMessage(msg)
	r.Finish([]hpack.HeaderField{{Name: "grpc-status", Value: "0"}, {Name: "x-trailer", Value: "t"}})
}

func (h *fakeHandler) Refused(*Call, codes.Code, string) { h.refused.Add(1) }

// Scan reads KServe targets of methods naming "Cut".
func (h *fakeHandler) Scan(method string) func() Scanner {
	if strings.Contains(method, "Cut") {
		return func() Scanner { return &kserveScanner{wire.NewTargetScanner(wire.KServeTarget)} }
	}
	return nil
}

// kserveScanner is proto/wire's scanner as the relay's, as the proxy
// plugs it in.
type kserveScanner struct{ *wire.TargetScanner }

func (s *kserveScanner) Feed(chunk []byte) error {
	err := s.TargetScanner.Feed(chunk)
	if errors.Is(err, wire.ErrUnroutable) {
		return fmt.Errorf("%w: %w", ErrUnroutable, err)
	}
	return err
}

// RouteEarly relays as they arrive the calls of every model but "whole".
func (h *fakeHandler) RouteEarly(c *Call, model, _ string) *Pool {
	if model == "whole" {
		return nil
	}
	h.mu.Lock()
	h.early = append(h.early, model)
	h.mu.Unlock()
	if c.Deadline.IsZero() {
		c.Timeout = h.timeout
	}
	return h.pool()
}

func (h *fakeHandler) Done(c *Call, r *Result) (codes.Code, string) {
	h.mu.Lock()
	h.dones[c]++
	n := h.dones[c]
	h.mu.Unlock()
	if n != 1 {
		panic(fmt.Sprintf("Done called %d times for %s", n, c.Method))
	}
	select {
	case h.done <- r:
	default:
	}
	code, msg := r.Status, r.Message
	if r.Err != nil {
		code, msg = r.Err.Code, r.Err.Msg
	}
	// The proxy's verdict (its timedOut): DEADLINE_EXCEEDED once the
	// relay's own deadline passed is that deadline's.
	if code == codes.DeadlineExceeded && !r.TimeoutAt.IsZero() && !time.Now().Before(r.TimeoutAt) {
		msg = "the proxy's upstream timeout passed"
	}
	return code, msg
}

// relayEnv is a relay in front of an upstream, with a Local grpc.Server
// that answers like an upstream named "local".
type relayEnv struct {
	t     testing.TB
	up    *upstream
	h     *fakeHandler
	relay *Server
	addr  string
	local *upstream
}

func newRelayEnv(t testing.TB, o Options, upOpts ...grpc.ServerOption) *relayEnv {
	t.Helper()
	up := startUpstream(t, "127.0.0.1:0", "up", upOpts...)
	return newRelayEnvTo(t, up.addr, up, o)
}

func newRelayEnvTo(t testing.TB, upAddr string, up *upstream, o Options) *relayEnv {
	t.Helper()
	e := &relayEnv{t: t, up: up, h: &fakeHandler{done: make(chan *Result, 1024), served: make(chan error, 16), waiting: make(chan struct{}, 16), dones: map[*Call]int{}}}
	e.relay = NewServer(e.h, o)
	e.h.pool = func() *Pool { return e.relay.Pool(upAddr, 1) }
	e.local = &upstream{name: "local", hung: make(chan context.Context, 256), release: make(chan struct{})}
	e.local.srv = grpc.NewServer(grpc.ForceServerCodec(rawCodec{}), grpc.UnknownServiceHandler(e.local.handle), grpc.MaxRecvMsgSize(64<<20))
	go func() { _ = e.local.srv.Serve(e.relay.LocalListener()) }()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e.addr = lis.Addr().String()
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = e.relay.Serve(lis)
	}()
	t.Cleanup(func() {
		e.relay.Stop()
		e.local.srv.Stop()
		<-served
	})
	return e
}

// dial is a grpc-go client of the relay.
func (e *relayEnv) dial(opts ...grpc.DialOption) *grpc.ClientConn {
	e.t.Helper()
	cc, err := grpc.NewClient(e.addr, append([]grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodec(rawCodec{}), grpc.MaxCallRecvMsgSize(64<<20), grpc.MaxCallSendMsgSize(64<<20)),
	}, opts...)...)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = cc.Close() })
	return cc
}

func call(ctx context.Context, cc *grpc.ClientConn, method string, req []byte, opts ...grpc.CallOption) ([]byte, error) {
	var resp []byte
	err := cc.Invoke(ctx, method, &req, &resp, opts...)
	return resp, err
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	t.Cleanup(cancel)
	return ctx
}

// settled waits until the relay holds no stream on any connection, client
// or upstream, and fails the test if it keeps some.
func (e *relayEnv) settled() {
	e.t.Helper()
	deadline := time.Now().Add(waitFor)
	for {
		n := e.relay.openHalves()
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("relay still holds %d streams", n)
		}
		time.Sleep(time.Millisecond)
	}
}

// rawClient is an HTTP/2 client written frame by frame, to do what
// grpc-go's client never does.
type rawClient struct {
	t      testing.TB
	nc     net.Conn
	fr     *http2.Framer
	enc    *hpack.Encoder
	hbuf   bytes.Buffer
	frames chan http2.Frame // what the relay sent, copied; closed at EOF
}

// dialRaw connects and sends the preface and settings, and reads
// what comes back unless manualRead.
func (e *relayEnv) dialRaw(settings ...http2.Setting) *rawClient {
	e.t.Helper()
	return dialRawTo(e.t, e.addr, settings...)
}

// dialRawTo is dialRaw to any HTTP/2 server at addr.
func dialRawTo(t testing.TB, addr string, settings ...http2.Setting) *rawClient {
	t.Helper()
	e := struct{ t testing.TB }{t}
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = nc.Close() })
	c := &rawClient{t: e.t, nc: nc, frames: make(chan http2.Frame, 4096)}
	c.fr = http2.NewFramer(nc, nc)
	c.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	c.fr.MaxHeaderListSize = 64 << 20
	c.enc = hpack.NewEncoder(&c.hbuf)
	if _, err := io.WriteString(nc, http2.ClientPreface); err != nil {
		e.t.Fatal(err)
	}
	if err := c.fr.WriteSettings(settings...); err != nil {
		e.t.Fatal(err)
	}
	return c
}

// readLoop copies frames to c.frames until the connection ends.
func (c *rawClient) readLoop() {
	go func() {
		defer close(c.frames)
		for {
			f, err := c.fr.ReadFrame()
			if err != nil {
				return
			}
			c.frames <- copyFrame(f)
		}
	}()
}

// copyFrame keeps what the tests look at of a frame past the next read.
func copyFrame(f http2.Frame) http2.Frame {
	switch f := f.(type) {
	case *http2.DataFrame:
		return &dataFrame{id: f.StreamID, data: bytes.Clone(f.Data()), end: f.StreamEnded()}
	case *http2.MetaHeadersFrame:
		return &headersFrame{id: f.StreamID, fields: f.Fields, end: f.StreamEnded()}
	case *http2.GoAwayFrame:
		return &goAwayFrame{last: f.LastStreamID, code: f.ErrCode}
	case *http2.RSTStreamFrame:
		return &rstFrame{id: f.StreamID, code: f.ErrCode}
	case *http2.PingFrame:
		return &pingFrame{ack: f.IsAck()}
	case *http2.SettingsFrame:
		return &settingsFrame{ack: f.IsAck()}
	case *http2.WindowUpdateFrame:
		return &windowFrame{id: f.StreamID, inc: f.Increment}
	}
	return &otherFrame{}
}

type (
	dataFrame struct {
		http2.Frame
		id   uint32
		data []byte
		end  bool
	}
	headersFrame struct {
		http2.Frame
		id     uint32
		fields []hpack.HeaderField
		end    bool
	}
	goAwayFrame struct {
		http2.Frame
		last uint32
		code http2.ErrCode
	}
	rstFrame struct {
		http2.Frame
		id   uint32
		code http2.ErrCode
	}
	pingFrame struct {
		http2.Frame
		ack bool
	}
	settingsFrame struct {
		http2.Frame
		ack bool
	}
	windowFrame struct {
		http2.Frame
		id  uint32
		inc uint32
	}
	otherFrame struct{ http2.Frame }
)

// headers sends a HEADERS frame for a call of method on id.
func (c *rawClient) headers(id uint32, method string, end bool, extra ...hpack.HeaderField) {
	c.t.Helper()
	c.hbuf.Reset()
	fields := append([]hpack.HeaderField{
		{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: "http"},
		{Name: ":path", Value: method}, {Name: ":authority", Value: "relay"},
		{Name: "content-type", Value: "application/grpc"}, {Name: "te", Value: "trailers"},
	}, extra...)
	for _, f := range fields {
		_ = c.enc.WriteField(f)
	}
	if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: c.hbuf.Bytes(), EndHeaders: true, EndStream: end}); err != nil {
		c.t.Fatal(err)
	}
}

// message sends msg as one length-prefixed gRPC message, ending the
// stream.
func (c *rawClient) message(id uint32, msg []byte) {
	c.t.Helper()
	b := grpcFrame(msg)
	for len(b) > 0 {
		n := min(len(b), 16384)
		if err := c.fr.WriteData(id, n == len(b), b[:n]); err != nil {
			c.t.Fatal(err)
		}
		b = b[n:]
	}
}

func grpcFrame(msg []byte) []byte {
	b := make([]byte, 5+len(msg))
	b[1], b[2], b[3], b[4] = byte(len(msg)>>24), byte(len(msg)>>16), byte(len(msg)>>8), byte(len(msg))
	copy(b[5:], msg)
	return b
}

// response collects stream id's response from c.frames: its data and its
// trailers' grpc-status; it fails the test on a reset or the end of the
// connection.
func (c *rawClient) response(id uint32) (data []byte, grpcStatus string) {
	c.t.Helper()
	timeout := time.After(waitFor)
	for {
		select {
		case f, ok := <-c.frames:
			if !ok {
				c.t.Fatalf("stream %d: connection ended before the response did", id)
			}
			switch f := f.(type) {
			case *dataFrame:
				if f.id == id {
					data = append(data, f.data...)
				}
			case *headersFrame:
				if f.id != id {
					continue
				}
				for _, hf := range f.fields {
					if hf.Name == "grpc-status" {
						grpcStatus = hf.Value
					}
				}
				if f.end {
					return data, grpcStatus
				}
			case *rstFrame:
				if f.id == id {
					c.t.Fatalf("stream %d reset: %v", id, f.code)
				}
			}
		case <-timeout:
			c.t.Fatalf("stream %d: no response", id)
		}
	}
}

// expect waits for a frame that match accepts, or for the end of the
// connection (nil).
func (c *rawClient) expect(what string, match func(http2.Frame) bool) http2.Frame {
	c.t.Helper()
	timeout := time.After(waitFor)
	for {
		select {
		case f, ok := <-c.frames:
			if !ok {
				return nil
			}
			if match(f) {
				return f
			}
		case <-timeout:
			c.t.Fatalf("no %s", what)
			return nil
		}
	}
}

// closedWith waits for the relay to end the connection, and returns the
// GOAWAY's code if one came first.
func (c *rawClient) closedWith() (http2.ErrCode, bool) {
	c.t.Helper()
	var code http2.ErrCode
	var sawGoAway bool
	for {
		f := c.expect("end of the connection", func(f http2.Frame) bool {
			_, ok := f.(*goAwayFrame)
			return ok
		})
		if f == nil {
			return code, sawGoAway
		}
		code, sawGoAway = f.(*goAwayFrame).code, true
	}
}

// stillServes checks that the relay answers a fresh grpc-go client.
func (e *relayEnv) stillServes(ctx context.Context) {
	e.t.Helper()
	cc := e.dial()
	want := pattern(1000, 3)
	got, err := call(ctx, cc, "/t.S/Echo", want)
	if err != nil || !bytes.Equal(got, want) {
		e.t.Fatalf("the relay stopped serving others: %v", err)
	}
	_ = cc.Close()
}

func rawConnTo(t testing.TB, addr string) net.Conn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nc.Close() })
	_ = nc.SetDeadline(time.Now().Add(waitFor))
	return nc
}
