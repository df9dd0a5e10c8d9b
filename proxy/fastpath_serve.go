package proxy

import (
	"context"
	"io"
	"sync"

	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/infergate/infergate/grpcwire"
	"github.com/infergate/infergate/proxy/h2relay"
)

// Unary calls the fast path cannot forward as they are (a batched model, a
// routed one, an upstream with a breaker, tracing on, a director that
// reads the call) are still answered on the relay's side of the client
// connection: Serve runs the proxy's handler, the same handle the
// grpc.Server would run, on a relayStream, which plays the part of
// grpc-go's server stream. So they cross one gRPC stack (the upstream
// call's) instead of two plus the relay's hop to the grpc.Server.

// Serve answers a call with the proxy's handler.
func (r relayHandler) Serve(c *h2relay.Call, resp *h2relay.Responder) {
	msg, _ := c.Message()
	st := &relayStream{resp: resp, method: c.Method, req: msg}
	md, bad := relayMetadata(c)
	if ct := md["content-type"]; len(ct) > 0 {
		st.subtype = grpcwire.ContentSubtype(ct[0])
	}
	if bad != nil {
		// grpc-go's server refuses the call before any handler runs.
		st.ctx = resp.Context()
		st.finish(status.Error(codes.Internal, bad.Error()))
		return
	}
	ctx := metadata.NewIncomingContext(resp.Context(), md)
	ctx = peer.NewContext(ctx, &peer.Peer{Addr: c.Peer})
	st.ctx = grpc.NewContextWithServerTransportStream(ctx, relayTransport{st})
	st.finish(r.p.handle(nil, st))
}

// relayStream is grpc.ServerStream and grpc.ServerTransportStream for a
// served call: one request message in, one response message out.
type relayStream struct {
	ctx     context.Context
	resp    *h2relay.Responder
	method  string
	subtype string
	req     []byte
	read    bool

	mu              sync.Mutex
	header, trailer metadata.MD
	headerSent      bool
}

var (
	_ grpc.ServerStream          = (*relayStream)(nil)
	_ grpc.ServerTransportStream = relayTransport{}
)

func (s *relayStream) Context() context.Context { return s.ctx }

// relayTransport is the grpc.ServerTransportStream in a served call's
// context (grpc.Method, grpc.SetHeader and friends read it).
type relayTransport struct{ s *relayStream }

func (t relayTransport) Method() string                  { return t.s.method }
func (t relayTransport) SetHeader(md metadata.MD) error  { return t.s.SetHeader(md) }
func (t relayTransport) SendHeader(md metadata.MD) error { return t.s.SendHeader(md) }
func (t relayTransport) SetTrailer(md metadata.MD) error { t.s.SetTrailer(md); return nil }

func (s *relayStream) SetHeader(md metadata.MD) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.headerSent {
		return status.Error(codes.Internal, "transport: the stream is done or WriteHeader was already called")
	}
	s.header = metadata.Join(s.header, md)
	return nil
}

func (s *relayStream) SendHeader(md metadata.MD) error {
	if err := s.SetHeader(md); err != nil {
		return err
	}
	s.writeHeader()
	return nil
}

func (s *relayStream) SetTrailer(md metadata.MD) {
	s.mu.Lock()
	s.trailer = metadata.Join(s.trailer, md)
	s.mu.Unlock()
}

func (s *relayStream) writeHeader() {
	s.mu.Lock()
	if s.headerSent {
		s.mu.Unlock()
		return
	}
	s.headerSent = true
	fields := grpcwire.AppendResponseHeader(make([]hpack.HeaderField, 0, 2+len(s.header)), s.subtype)
	fields = grpcwire.AppendMetadata(fields, s.header)
	s.mu.Unlock()
	s.resp.WriteHeader(fields)
}

func (s *relayStream) SendMsg(m any) error {
	f, ok := m.(*Frame)
	if !ok {
		b, err := proto.Marshal(m.(proto.Message))
		if err != nil {
			return err
		}
		f = NewFrame(b)
	}
	s.writeHeader()
	if !s.resp.WriteMessage(f.Bytes()) {
		return status.Error(codes.Canceled, "client went away")
	}
	return nil
}

func (s *relayStream) RecvMsg(m any) error {
	if s.read {
		return io.EOF
	}
	s.read = true
	switch v := m.(type) {
	case *Frame:
		*v = Frame{}
		v.one[0] = mem.SliceBuffer(s.req)
		v.data = v.one[:]
	case proto.Message:
		return proto.Unmarshal(s.req, v)
	}
	return nil
}

// finish ends the call with err's status, as grpc-go's server writes it.
func (s *relayStream) finish(err error) {
	st := status.Convert(err)
	s.mu.Lock()
	if !s.headerSent && len(s.header) > 0 {
		// Headers set but not sent go in a header frame of their own
		// before the trailers, as grpc-go's server sends them.
		s.mu.Unlock()
		s.writeHeader()
		s.mu.Lock()
	}
	trailersOnly := !s.headerSent
	s.headerSent = true
	ws := grpcwire.Status{Code: st.Code(), Message: st.Message()}
	if p := st.Proto(); p != nil && len(p.Details) > 0 {
		ws.Details, _ = proto.Marshal(p)
	}
	fields := grpcwire.AppendStatus(make([]hpack.HeaderField, 0, 5+len(s.trailer)), trailersOnly, s.subtype, ws)
	fields = grpcwire.AppendMetadata(fields, s.trailer)
	s.mu.Unlock()
	s.resp.Finish(fields)
}
