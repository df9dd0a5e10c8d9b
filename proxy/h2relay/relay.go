package h2relay

import (
	"errors"
	"net"
	"time"

	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/codes"

	"github.com/infergate/infergate/budget"
	"github.com/infergate/infergate/grpcwire"
	"github.com/infergate/infergate/proxy/h2relay/h2codec"
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
	// ended, and returns the call's status. The relay sends the client
	// that status itself (unless the client is gone) when r.Err is set,
	// or when it is not the upstream's (the Handler judged the call
	// otherwise, say as ended by the proxy's own timeout); otherwise the
	// upstream's trailers pass unchanged.
	Done(c *Call, r *Result) (code codes.Code, msg string)
	// Scan says how to read the target of method's request from a big
	// request's first bytes (RouteEarly): a maker of Scanners, or nil
	// when method names none, and big requests are read whole.
	Scan(method string) func() Scanner
	// RouteEarly is Route for a big request still arriving, once its
	// first bytes named model and version: the pool to relay it to as it
	// arrives (cut-through), or nil to read it whole and Route it at its
	// end. It may set c.Timeout and c.Data; Done is called for a call it
	// routed. c.Body holds only the request's first bytes.
	RouteEarly(c *Call, model, version string) *Pool
	// Refused is called for a unary call the relay answered itself
	// before routing it (no request message or two, a message over
	// MaxMessage, no room in the budget before its deadline), with the
	// status it sent, so that the call is counted like any other.
	Refused(c *Call, code codes.Code, msg string)
}

// Scanner reads a request's target as its bytes pass: the hook by which
// the relay routes a big request from its first bytes and keeps reading
// the rest, without knowing any message format.
type Scanner interface {
	// Feed scans the next chunk; it keeps no reference to it, and
	// returns the first error met so far. An error wrapping
	// ErrUnroutable is bytes that may be a valid message but that the
	// scanner will not route by (the relay never guesses); any other
	// error is a malformed message, left to the upstream to refuse.
	Feed(chunk []byte) error
	// Known says the first message named its target; Target is it.
	Known() bool
	Target() (model, version string)
	// Changed says a later occurrence named another target.
	Changed() bool
	// Done says nothing more it reads can name a target.
	Done() bool
}

// ErrUnroutable is what a Scanner's errors wrap for bytes it will not
// route by.
var ErrUnroutable = errors.New("h2relay: unroutable request")

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
	return grpcwire.OneMessage(c.Body)
}

// Result is how a routed call ended.
type Result struct {
	// Status and Message are the grpc-status and grpc-message the
	// upstream sent, when Err is nil.
	Status  codes.Code
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
	// TimeoutAt is when Call.Timeout passed, or passes (real time); zero
	// when the relay kept none. The Handler judges whether the call ended
	// by it.
	TimeoutAt time.Time
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
	// ErrTimeout: Call.Timeout passed; the relay cancelled the upstream
	// stream (Code is DEADLINE_EXCEEDED).
	ErrTimeout
	// ErrClientGone: the client reset the stream or its connection
	// closed. Nothing is sent to it.
	ErrClientGone
	// ErrRefused: the upstream refused a call relayed as it arrived (or
	// went away before processing it); what was sent cannot be sent
	// again, so the client gets REFUSED_STREAM and retries it itself.
	ErrRefused
	// ErrTargetChanged: a request relayed as it arrived named another
	// model or version further on than its first bytes; it is reset on
	// both sides, so that no client can dodge a route.
	ErrTargetChanged
)

// Error is a call the relay ended.
type Error struct {
	Kind ErrKind
	// Code is the gRPC code gRPC's own client would have reported.
	Code codes.Code
	Msg  string
}

func (e *Error) Error() string { return e.Msg }

// Options size the relay.
type Options struct {
	// MaxBody is the largest unary request read whole, in bytes; a larger
	// one goes to Local, which applies the message size limit.
	MaxBody int
	// MaxMessage is the largest request message accepted: a unary call
	// whose length prefix says more is answered RESOURCE_EXHAUSTED at
	// once and reset. Zero leaves the check to Local.
	MaxMessage int
	// MaxConns caps client connections (0: none); IdleTimeout closes a
	// connection with no stream open for that long (0: never).
	MaxConns    int
	IdleTimeout time.Duration
	// MaxBuffered is the budget of bytes held for requests read whole;
	// zero means budget.DefaultLimit. Budget, when set, is used instead:
	// the one the proxy's gRPC path shares.
	MaxBuffered int64
	Budget      *budget.Budget
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
	maxBody, maxMessage      int
	maxBuffered              int64
	budget                   *budget.Budget // the Server's
	initWindow, clientWindow int64
	maxConns                 int
	idleTimeout              time.Duration
	streamWindow, connWindow int64
	bufSize                  int
	maxStreams               uint32
	maxHeaderList            uint32
	maxReadFrame             uint32
	outCap                   int
	dialTimeout              time.Duration
	now                      func() time.Time
	// client and dest are what the codec's connections to clients and
	// to destinations (upstreams, Local) are told.
	client, dest h2codec.Config
}

func (o Options) config() *config {
	c := &config{
		maxBody: o.MaxBody, maxMessage: o.MaxMessage, maxConns: o.MaxConns, idleTimeout: o.IdleTimeout,
		maxBuffered:  o.MaxBuffered,
		streamWindow: int64(o.StreamWindow), connWindow: int64(o.ConnWindow),
		bufSize: o.BufferSize, maxStreams: o.MaxStreams, maxHeaderList: o.MaxHeaderList,
		maxReadFrame: 1 << 20, dialTimeout: o.DialTimeout, now: o.Now,
	}
	if c.maxBody <= 0 {
		c.maxBody = 4 << 20
	}
	if c.streamWindow <= 0 {
		c.streamWindow = 4 << 20
	}
	if o.Budget != nil {
		c.maxBuffered = o.Budget.Limit()
	}
	if c.maxBuffered <= 0 {
		c.maxBuffered = budget.DefaultLimit
	}
	c.budget = o.Budget
	if c.budget == nil {
		c.budget = budget.New(c.maxBuffered)
	}
	// No request larger than half the budget is read whole: it could
	// never share it. (Larger ones go to Local, relayed as they come.)
	c.maxBody = int(min(int64(c.maxBody), c.maxBuffered/2))
	// Every stream may send this much before the relay grants more: what
	// a stream can make the relay hold unasked. Windows widen from here
	// while data flows (WidenLocked), and a request read whole gets its
	// size at once from the budget.
	c.initWindow = min(c.streamWindow, 64<<10)
	// A client's streams start smaller: what 256 streams of one
	// connection may send unasked is 4 MiB, not 16 (a request up to
	// 16 KiB is read whole at once; a bigger one is routed from its
	// first bytes or admitted by the budget, a round trip later). Streams
	// a client opens before it acknowledged our SETTINGS may send the
	// default 64 KiB (RFC 9113 6.9.3; the codec's recvInitLocked).
	c.clientWindow = min(c.initWindow, 16<<10)
	if c.connWindow < c.streamWindow {
		c.connWindow = max(c.streamWindow, 16<<20)
	}
	if c.bufSize <= 0 {
		c.bufSize = 64 << 10
	}
	if c.maxStreams == 0 {
		c.maxStreams = 256
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
	c.dest = h2codec.Config{
		BufSize: c.bufSize, MaxReadFrame: c.maxReadFrame, MaxHeaderList: c.maxHeaderList,
		MaxStreams: c.maxStreams, InitWindow: c.initWindow, StreamWindow: c.streamWindow,
		ConnWindow: c.connWindow, OutCap: c.outCap, Budget: c.budget,
	}
	c.client = c.dest
	c.client.InitWindow = c.clientWindow
	return c
}
