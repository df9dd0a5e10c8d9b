package proxy

import (
	"io"
	"sync"

	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/infergate/infergate/grpcwire"
	"github.com/infergate/infergate/proxy/h2relay"
)

// Unary calls the relay read that are not just forwarded (a batched
// model, a routed one, an upstream with a breaker, tracing on, a director
// that reads the call) are answered on the relay's side of the client
// connection: Serve runs them through the pipeline (serve) with a
// relaySide, so they cross one gRPC stack (the upstream call's) instead
// of two plus the relay's hop to the grpc.Server.

// Serve answers a call through the pipeline.
func (r relayHandler) Serve(c *h2relay.Call, resp *h2relay.Responder) {
	msg, _ := c.Message()
	s := &relaySide{resp: resp, req: msg}
	md, bad := relayMetadata(c)
	if ct := md["content-type"]; len(ct) > 0 {
		s.subtype = grpcwire.ContentSubtype(ct[0])
	}
	if bad != nil {
		// grpc-go's server refuses the call before any handler runs.
		s.writeStatus(status.Error(codes.Internal, bad.Error()))
		return
	}
	ctx := metadata.NewIncomingContext(resp.Context(), md)
	ctx = peer.NewContext(ctx, &peer.Peer{Addr: c.Peer})
	s.writeStatus(r.p.serveCall(ctx, c.Method, s, nil))
}

// relaySide is the pipeline's side for a call the relay read: its one
// request message in, one answer out through the relay's Responder, the
// status written by grpcwire as grpc-go's server writes it.
type relaySide struct {
	resp    *h2relay.Responder
	subtype string
	req     []byte
	read    bool

	mu              sync.Mutex
	header, trailer metadata.MD
	headerSent      bool
}

func (s *relaySide) RecvMsg(m any) error {
	if s.read {
		return io.EOF
	}
	s.read = true
	f := m.(*Frame)
	*f = Frame{}
	f.one[0] = mem.SliceBuffer(s.req)
	f.data = f.one[:]
	return nil
}

func (s *relaySide) SetHeader(md metadata.MD) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.headerSent {
		return status.Error(codes.Internal, "transport: the stream is done or WriteHeader was already called")
	}
	s.header = metadata.Join(s.header, md)
	return nil
}

func (s *relaySide) SetTrailer(md metadata.MD) {
	s.mu.Lock()
	s.trailer = metadata.Join(s.trailer, md)
	s.mu.Unlock()
}

func (s *relaySide) SendMsg(m any) error {
	s.writeHeader()
	if !s.resp.WriteMessage(m.(*Frame).Bytes()) {
		return status.Error(codes.Canceled, "client went away")
	}
	return nil
}

func (s *relaySide) writeHeader() {
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

// writeStatus ends the call with err's status, as grpc-go's server writes it.
func (s *relaySide) writeStatus(err error) {
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
