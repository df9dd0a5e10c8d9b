package h2relay

import (
	"net"
	"time"

	"golang.org/x/net/http2/hpack"
)

// Handler routes the unary calls the relay reads whole and hears how each
// ended. Its methods run on connection reader goroutines: they must not
// block.
type Handler interface {
	// Unary says whether method carries exactly one message each way, so
	// that its request may be read whole and routed. Streams of any other
	// method go to Local as they arrive.
	Unary(method string) bool
	// Route decides where a unary call goes once its whole request has
	// arrived: a Pool; or serve, and the relay calls Serve on a goroutine
	// of its own to answer it; or neither, and the call goes to Local (the
	// proxy's own server, which then does everything it would have done
	// without the relay). It may set c.Timeout and c.Data.
	Route(c *Call) (p *Pool, serve bool)
	// Serve answers a call Route chose to serve, through r. It may block.
	Serve(c *Call, r *Responder)
	// Done is called once for every call Route sent to a Pool, when it
	// ended. When r.Err is set the relay ends the call itself and sends
	// the client the status Done returns (unless the client is gone).
	Done(c *Call, r *Result) (code uint32, msg string)
}

// Call is one unary call the relay read whole.
type Call struct {
	// Method is the call's :path, "/package.Service/Method".
	Method string
	// Start is when its headers arrived.
	Start time.Time
	// Deadline is the one the client sent (grpc-timeout); zero if none.
	Deadline time.Time
	// Header holds the client's header fields (no pseudo-headers), as
	// received; read only.
	Header []hpack.HeaderField
	// Body is the request as it travelled: length-prefixed gRPC messages.
	Body []byte
	// Peer is the client's address.
	Peer net.Addr

	// Timeout, set by Route, is the proxy's own deadline for a call that
	// came without one: sent upstream as grpc-timeout, and the call fails
	// with ErrTimeout when it passes.
	Timeout time.Duration
	// Data is the Handler's, set by Route.
	Data any
}

// Message returns the request's one message, and false when the body is
// not exactly one uncompressed message.
func (c *Call) Message() ([]byte, bool) {
	b := c.Body
	if len(b) < 5 || b[0] != 0 {
		return nil, false
	}
	n := int(b[1])<<24 | int(b[2])<<16 | int(b[3])<<8 | int(b[4])
	if n != len(b)-5 {
		return nil, false
	}
	return b[5:], true
}

// Result is how a routed call ended.
type Result struct {
	// Status and Message are the grpc-status and grpc-message the
	// upstream sent, when Err is nil.
	Status  uint32
	Message string
	// Err is set when the call did not end with the upstream's status:
	// the relay ends it (see Handler.Done).
	Err *Error
	// Answered says that the upstream sent response headers.
	Answered bool
	// Upstream is the time from sending the request upstream to the end.
	Upstream time.Duration
	// BytesOut counts the response's DATA bytes.
	BytesOut int64
}

// ErrKind says why the relay ended a call.
type ErrKind int

const (
	// ErrUnavailable: no connection to the upstream could be made, or it
	// was lost (Code is UNAVAILABLE), or the upstream reset the stream
	// (Code from the reset's error code, as gRPC maps it).
	ErrUnavailable ErrKind = iota + 1
	// ErrReset: the upstream reset the stream.
	ErrReset
	// ErrTimeout: Call.Timeout passed.
	ErrTimeout
	// ErrClientGone: the client reset the stream or its connection
	// closed. Nothing is sent to it.
	ErrClientGone
)

// Error is a call the relay ended.
type Error struct {
	Kind ErrKind
	// Code is the gRPC code gRPC's own client would have reported.
	Code uint32
	Msg  string
}

func (e *Error) Error() string { return e.Msg }

// Options size the relay.
type Options struct {
	// MaxBody is the largest unary request read whole, in bytes; a larger
	// one goes to Local, which applies the message size limit.
	MaxBody int
	// StreamWindow and ConnWindow are the receive windows granted to
	// peers; BufferSize the read buffer of each connection.
	StreamWindow, ConnWindow, BufferSize int
	// MaxStreams is the concurrent streams a client may open.
	MaxStreams uint32
	// MaxHeaderList is the largest header list accepted, in bytes.
	MaxHeaderList uint32
	// DialTimeout bounds a connection attempt to an upstream.
	DialTimeout time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// config is Options with defaults.
type config struct {
	maxBody                  int
	streamWindow, connWindow int64
	bufSize                  int
	maxStreams               uint32
	maxHeaderList            uint32
	maxReadFrame             uint32
	outCap                   int
	dialTimeout              time.Duration
	now                      func() time.Time
}

func (o Options) config() *config {
	c := &config{
		maxBody: o.MaxBody, streamWindow: int64(o.StreamWindow), connWindow: int64(o.ConnWindow),
		bufSize: o.BufferSize, maxStreams: o.MaxStreams, maxHeaderList: o.MaxHeaderList,
		maxReadFrame: 1 << 20, dialTimeout: o.DialTimeout, now: o.Now,
	}
	if c.maxBody <= 0 {
		c.maxBody = 4 << 20
	}
	if c.streamWindow <= 0 {
		c.streamWindow = 4 << 20
	}
	if c.connWindow < c.streamWindow {
		c.connWindow = max(c.streamWindow, 16<<20)
	}
	if c.bufSize <= 0 {
		c.bufSize = 64 << 10
	}
	if c.maxStreams == 0 {
		c.maxStreams = 1 << 20
	}
	if c.maxHeaderList == 0 {
		c.maxHeaderList = 16 << 20
	}
	if c.dialTimeout <= 0 {
		c.dialTimeout = 5 * time.Second
	}
	if c.now == nil {
		c.now = time.Now
	}
	// Frames wait in the output buffer up to this much before data waits
	// in its stream's queue instead (and its source gets no window).
	c.outCap = 4 << 20
	return c
}
