package h2relay

import (
	"errors"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/grpc/codes"

	"github.com/infergate/infergate/budget"
	"github.com/infergate/infergate/grpcwire"
	"github.com/infergate/infergate/proxy/h2relay/h2codec"
)

// Server accepts client connections and relays their calls.
type Server struct {
	h      Handler
	cfg    *config
	local  *localListener
	budget *budget.Budget

	mu      sync.Mutex
	conns   map[*clientConn]struct{}
	pools   map[string]*Pool
	closing bool
	lis     []net.Listener
	idle    chan struct{} // closed when closing and no conns are left
}

// NewServer returns a relay that routes with h. Serve its LocalListener
// with the proxy's grpc.Server: calls the relay does not route go there.
func NewServer(h Handler, o Options) *Server {
	cfg := o.config()
	return &Server{
		h: h, cfg: cfg, local: newLocalListener(), budget: cfg.budget,
		conns: make(map[*clientConn]struct{}), pools: make(map[string]*Pool),
		idle: make(chan struct{}),
	}
}

// LocalListener is where connections to the proxy's own server come from.
func (s *Server) LocalListener() net.Listener { return s.local }

// Serve accepts connections on lis until it fails or the server stops.
func (s *Server) Serve(lis net.Listener) error {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		_ = lis.Close()
		return net.ErrClosed
	}
	s.lis = append(s.lis, lis)
	s.mu.Unlock()
	var delay time.Duration
	for {
		nc, err := lis.Accept()
		if err != nil {
			s.mu.Lock()
			closing := s.closing
			s.mu.Unlock()
			if closing {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				delay = min(max(delay*2, 5*time.Millisecond), time.Second)
				time.Sleep(delay)
				continue
			}
			return err
		}
		delay = 0
		go s.serveConn(nc)
	}
}

// GracefulStop stops accepting, tells every client to open no new stream
// (GOAWAY), waits for the streams in progress, then closes the pools.
func (s *Server) GracefulStop() {
	s.mu.Lock()
	s.closing = true
	for _, l := range s.lis {
		_ = l.Close()
	}
	for cc := range s.conns {
		cc.goAway()
	}
	empty := len(s.conns) == 0
	s.mu.Unlock()
	if empty {
		s.closeIdle()
	}
	<-s.idle
	s.closePools()
}

// Stop closes every connection at once.
func (s *Server) Stop() {
	s.mu.Lock()
	s.closing = true
	for _, l := range s.lis {
		_ = l.Close()
	}
	conns := make([]*clientConn, 0, len(s.conns))
	for cc := range s.conns {
		conns = append(conns, cc)
	}
	s.mu.Unlock()
	for _, cc := range conns {
		cc.c.Close(h2codec.ErrClosed)
	}
	s.closeIdle()
	s.closePools()
}

func (s *Server) closeIdle() {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.idle:
	default:
		close(s.idle)
	}
}

func (s *Server) closePools() {
	s.mu.Lock()
	pools := s.pools
	s.pools = map[string]*Pool{}
	s.mu.Unlock()
	for _, p := range pools {
		p.close()
	}
	_ = s.local.Close()
}

// clientConn is one client's connection.
type clientConn struct {
	srv *Server
	c   *h2codec.Conn

	mu       sync.Mutex
	local    *destConn // to the proxy's own server; opened when first needed
	maxID    uint32    // highest stream ID the client opened
	active   int
	draining bool // GOAWAY sent: no new streams
	closed   bool
	lim      connLimits
	share    budget.Share // its part of the budget
	// resetIDs are the streams the relay reset last: frames the client
	// sent on them before it saw the reset are ignored (RFC 9113 5.1).
	resetIDs [16]uint32
	resetAt  int
	// calm: its wasted streams passed the budget (limits.go); the
	// reader ends the connection after the frame it read.
	calm atomic.Bool
	// held counts the bytes its streams hold outside the budget: header
	// lists and requests not (yet) covered by it (limits.go).
	held atomic.Int64
}

func (s *Server) serveConn(nc net.Conn) {
	cc := &clientConn{srv: s}
	cc.c = h2codec.NewConn(nc, &s.cfg.client, func(*h2codec.Conn, error) {})
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		_ = nc.Close()
		return
	}
	over := s.cfg.maxConns > 0 && len(s.conns) >= s.cfg.maxConns
	if !over {
		s.conns[cc] = struct{}{}
	}
	s.mu.Unlock()
	if over {
		refuseConn(cc.c)
		cc.c.ReleaseBuf()
		return
	}
	defer func() {
		cc.stopIdleTimer()
		cc.c.ReleaseBuf()
		cc.shutdown()
		s.mu.Lock()
		delete(s.conns, cc)
		last := s.closing && len(s.conns) == 0
		s.mu.Unlock()
		if last {
			s.closeIdle()
		}
	}()

	_ = nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	if !cc.c.ReadPreface() {
		_ = nc.Close()
		return
	}
	_ = nc.SetReadDeadline(time.Time{})
	cc.c.Lock()
	cc.c.GreetLocked(false)
	cc.c.KickLocked()
	cc.c.Unlock()
	cc.mu.Lock()
	cc.becameIdleLocked()
	cc.mu.Unlock()

	var w writes
	for {
		f, in, isData, err := cc.c.ReadFrame()
		if isData {
			err = cc.onData(in.ID, int64(len(in.Data)), in.Data, in.End, &w)
			cc.c.Discard(len(in.Data))
			if err != nil {
				var se http2.StreamError
				if !errors.As(err, &se) {
					cc.connError(err)
					return
				}
				cc.resetStream(se.StreamID, se.Code, &w)
			}
		} else if err != nil {
			var se http2.StreamError
			if !errors.As(err, &se) {
				cc.connError(err)
				return
			}
			// A malformed stream (bad header fields): reset it,
			// and flush below like any frame (the reset used to
			// wait for the client's next frame). It was opened all
			// the same: its later frames are a reset stream's, not
			// an idle one's (its DATA used to end the connection,
			// and every good call on it).
			cc.opened(se.StreamID)
			cc.resetStream(se.StreamID, se.Code, &w)
		} else if err := cc.onFrame(f, &w); err != nil {
			var se http2.StreamError
			if errors.As(err, &se) {
				cc.resetStream(se.StreamID, se.Code, &w)
			} else {
				cc.connError(err)
				return
			}
		}
		if !cc.c.WholeFrame() {
			w.flush()
		}
		if cc.calm.Load() {
			w.flush()
			cc.connError(h2codec.ErrCalm)
			return
		}
	}
}

// opened notes that the client opened stream id, if it is a new one.
func (cc *clientConn) opened(id uint32) {
	cc.mu.Lock()
	if id%2 == 1 && id > cc.maxID {
		cc.maxID = id
	}
	cc.mu.Unlock()
}

// writes is what a reader goroutine owes others once its input is
// drained: the connections it wrote to (kicked together, so frames read
// together leave together), and client streams whose request is
// complete, routed then, so a stream the client reset in the frames read
// with it (Rapid Reset) is never sent anywhere.
type writes struct {
	h2codec.Batch
	ready []*stream
}

func (w *writes) flush() {
	for i := 0; i < len(w.ready); i++ {
		s := w.ready[i]
		w.ready[i] = nil
		s.dispatch(w)
	}
	w.ready = w.ready[:0]
	w.Flush()
}

// streamOf is the relay's stream behind one of its connections' halves.
func streamOf(h *h2codec.Half) *stream { return h.Owner.(*stream) }

// connError ends the connection: GOAWAY with the error's code.
func (cc *clientConn) connError(err error) {
	code := http2.ErrCodeNo
	var ce http2.ConnectionError
	if errors.As(err, &ce) {
		code = http2.ErrCode(ce)
	} else if errors.Is(err, http2.ErrFrameTooLarge) {
		code = http2.ErrCodeFrameSize
	}
	c := cc.c
	c.Lock()
	if !c.ClosedLocked() && code != http2.ErrCodeNo {
		cc.mu.Lock()
		last := cc.maxID
		cc.mu.Unlock()
		c.WriteGoAwayLocked(last, code, nil)
	}
	c.Unlock()
	c.Close(err)
}

// shutdown ends every stream of a connection that closed.
func (cc *clientConn) shutdown() {
	c := cc.c
	c.Close(h2codec.ErrClosed)
	c.Lock()
	streams := make([]*stream, 0, c.OpenLocked())
	for _, h := range c.HalvesLocked() {
		streams = append(streams, streamOf(h))
	}
	c.Unlock()
	for _, s := range streams {
		s.clientGone(http2.ErrCodeCancel)
	}
	// Halves kept for responses that would have waited for window are
	// forgotten with the connection, and what they took of the budget
	// given back.
	c.Lock()
	for _, h := range c.HalvesLocked() {
		c.RemoveHalfLocked(h)
	}
	c.Unlock()
	cc.mu.Lock()
	local := cc.local
	cc.mu.Unlock()
	if local != nil {
		local.c.Close(h2codec.ErrClosed)
	}
}

// goAway refuses new streams and closes the connection once the streams in
// progress ended.
func (cc *clientConn) goAway() {
	cc.mu.Lock()
	if cc.draining {
		cc.mu.Unlock()
		return
	}
	cc.draining = true
	last, idle := cc.maxID, cc.active == 0
	cc.mu.Unlock()
	c := cc.c
	c.Lock()
	c.WriteGoAwayLocked(last, http2.ErrCodeNo, nil)
	c.KickLocked()
	c.Unlock()
	if idle {
		cc.closeSoon()
	}
}

// closeSoon closes a drained connection after a short grace, so the GOAWAY
// and the last frames reach the client before the FIN. It waits while
// responses are still queued or being written: a stream counts as ended
// when its trailers were queued, and closing then cut off responses that
// waited for the client's window or for the socket (a graceful stop
// truncated large responses in flight).
func (cc *clientConn) closeSoon() {
	time.AfterFunc(100*time.Millisecond, func() {
		c := cc.c
		c.Lock()
		busy := c.BusyLocked()
		c.Unlock()
		if busy {
			cc.closeSoon()
			return
		}
		c.Close(h2codec.ErrClosed)
	})
}

func (cc *clientConn) onFrame(f http2.Frame, w *writes) error {
	c := cc.c
	switch f := f.(type) {
	case *http2.MetaHeadersFrame:
		return cc.onHeaders(f, w)
	case *http2.DataFrame:
		return cc.onData(f.StreamID, int64(f.Length), f.Data(), f.StreamEnded(), w)
	case *http2.RSTStreamFrame:
		if cc.idle(f.StreamID) {
			return http2.ConnectionError(http2.ErrCodeProtocol) // RFC 9113 6.4
		}
		c.Lock()
		h := c.HalfLocked(f.StreamID)
		c.Unlock()
		if h != nil {
			streamOf(h).clientReset(f.ErrCode)
			cc.forgetHalf(h)
		}
	case *http2.PriorityFrame:
		if f.StreamDep == f.StreamID {
			// A stream that depends on itself (RFC 9113 5.3.1).
			return http2.StreamError{StreamID: f.StreamID, Code: http2.ErrCodeProtocol}
		}
	case *http2.WindowUpdateFrame:
		if f.StreamID != 0 && cc.idle(f.StreamID) {
			return http2.ConnectionError(http2.ErrCodeProtocol) // RFC 9113 5.1
		}
		_, err := c.OnControl(f, &w.Batch)
		return err
	case *http2.SettingsFrame, *http2.PingFrame:
		_, err := c.OnControl(f, &w.Batch)
		return err
	case *http2.GoAwayFrame:
		// The client opens no more streams; those in progress finish.
	case *http2.PushPromiseFrame:
		return http2.ConnectionError(http2.ErrCodeProtocol)
	}
	return nil
}

func (cc *clientConn) onHeaders(f *http2.MetaHeadersFrame, w *writes) error {
	c := cc.c
	id := f.StreamID
	c.Lock()
	h := c.HalfLocked(id)
	var err error
	if h != nil {
		err = c.PeerHeadersLocked(h, f.StreamEnded())
	}
	c.Unlock()
	if h != nil {
		if err != nil {
			return err
		}
		// Trailers from the client: only a stream relayed as it arrives
		// can carry them on.
		return streamOf(h).clientTrailers(f, w)
	}
	cc.mu.Lock()
	if id%2 == 0 {
		cc.mu.Unlock()
		return http2.ConnectionError(http2.ErrCodeProtocol)
	}
	if id <= cc.maxID {
		// One the relay reset: the client sent this before it saw the
		// reset, ignored (RFC 9113 5.1). Any other: a stream ID that
		// went down, as x/net's server ends it (5.1.1).
		reset := cc.wasResetLocked(id)
		cc.mu.Unlock()
		if reset {
			return nil
		}
		return http2.ConnectionError(http2.ErrCodeProtocol)
	}
	cc.maxID = id
	draining := cc.draining
	cc.mu.Unlock()
	if draining {
		return http2.StreamError{StreamID: id, Code: http2.ErrCodeRefusedStream}
	}
	if f.Truncated {
		return http2.StreamError{StreamID: id, Code: http2.ErrCodeFrameSize}
	}
	if f.HasPriority() && f.Priority.StreamDep == id || malformedRequest(f) {
		return http2.StreamError{StreamID: id, Code: http2.ErrCodeProtocol}
	}
	s := &stream{cc: cc, fields: f.Fields, opened: time.Now(), hdr: headerBytes(f.Fields)}
	s.call.Start = cc.srv.cfg.now()
	s.call.Peer = c.NetConn().RemoteAddr()
	c.Lock()
	if cc.admitLocked() {
		c.Unlock()
		return http2.StreamError{StreamID: id, Code: http2.ErrCodeRefusedStream}
	}
	s.ch = c.AddHalfLocked(id, s)
	_ = c.PeerHeadersLocked(s.ch, f.StreamEnded()) // a new stream: never an error
	c.Unlock()
	cc.held.Add(s.hdr)
	cc.mu.Lock()
	cc.active++
	cc.lim.idleSince = time.Time{}
	cc.mu.Unlock()

	method, unary := f.PseudoValue("method"), false
	path := f.PseudoValue("path")
	if method == "POST" && strings.HasPrefix(path, "/") {
		unary = cc.srv.h.Unary(path)
	}
	plain := true
	for _, hf := range f.RegularFields() {
		switch hf.Name {
		case "content-type":
			if !strings.HasPrefix(hf.Value, "application/grpc") {
				plain = false
			}
		case "grpc-encoding":
			if hf.Value != "identity" {
				plain = false
			}
		case "content-length":
			// gRPC sends none; one that the DATA does not match
			// makes the request malformed (RFC 9113 8.1.1).
			n, err := strconv.ParseInt(hf.Value, 10, 64)
			if err != nil || n < 0 {
				return http2.StreamError{StreamID: id, Code: http2.ErrCodeProtocol}
			}
			s.declared = n + 1
		case "grpc-timeout":
			d, ok := grpcwire.DecodeTimeout(hf.Value)
			if !ok {
				plain = false
			} else {
				// Real time, as a context's deadline (Start is
				// the Handler's clock).
				s.call.Deadline = time.Now().Add(d)
			}
		}
	}
	s.call.Method = path
	s.call.Header = f.RegularFields()
	if unary && plain {
		if f.StreamEnded() {
			// No request message: grpc-go's server's answer, given
			// here (each of these used to cost a stream to the
			// proxy's own server).
			s.refuse(codes.Internal, msgNoRequest, w)
			return nil
		}
		s.path = pathWhole
		return nil
	}
	s.mu.Lock()
	s.clientEnded = f.StreamEnded()
	s.mu.Unlock()
	return s.toLocal(f.StreamEnded(), w)
}

// onData is a DATA frame of the client's: n bytes with padding, data
// without.
func (cc *clientConn) onData(id uint32, n int64, data []byte, end bool, w *writes) error {
	c := cc.c
	c.Lock()
	h := c.HalfLocked(id)
	if err := c.TakeDataLocked(h, n, end); err != nil {
		c.Unlock()
		return err
	}
	if pad := n - int64(len(data)); pad > 0 {
		c.GiveBackLocked(h, pad)
	}
	if h == nil {
		// A stream that ended (or never was): nothing more is owed.
		c.Unlock()
		w.Add(c)
		cc.mu.Lock()
		known := id <= cc.maxID && id%2 == 1
		reset := cc.wasResetLocked(id)
		cc.mu.Unlock()
		switch {
		case !known:
			return http2.ConnectionError(http2.ErrCodeProtocol)
		case reset:
			return nil // sent before the client saw our reset
		}
		// Closed: the client is told, that stream alone (RFC 9113 5.1).
		return http2.StreamError{StreamID: id, Code: http2.ErrCodeStreamClosed}
	}
	c.Unlock()
	w.Add(c) // the connection's window update, if one is due
	return streamOf(h).clientData(data, end, w)
}

// resetStream resets a client stream with code. Unless the connection is
// draining (a stream racing our GOAWAY is nobody's fault), the stream
// counts as wasted.
func (cc *clientConn) resetStream(id uint32, code http2.ErrCode, w *writes) {
	c := cc.c
	c.Lock()
	h := c.HalfLocked(id)
	if c.ControlRoomLocked() {
		c.WriteResetLocked(id, code)
	} else {
		c.FailLocked(h2codec.ErrCalm) // resets it does not read
	}
	c.Unlock()
	w.Add(c)
	cc.mu.Lock()
	cc.noteResetLocked(id)
	// Resets that answer frames on a closed stream, or a stream racing
	// our GOAWAY, are nobody's waste.
	notWasted := cc.draining || code == http2.ErrCodeStreamClosed && h == nil
	cc.mu.Unlock()
	if h != nil {
		streamOf(h).markWasted(!notWasted)
		streamOf(h).clientGone(http2.ErrCodeCancel)
		cc.forgetHalf(h)
	} else if !notWasted {
		cc.wasted()
	}
}

// resetSent notes a RST_STREAM written to the client for stream id.
func (cc *clientConn) resetSent(id uint32) {
	cc.mu.Lock()
	cc.noteResetLocked(id)
	cc.mu.Unlock()
}

// idle says whether stream id was never opened by the client.
func (cc *clientConn) idle(id uint32) bool {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	return id > cc.maxID
}

// noteResetLocked remembers that the relay reset stream id.
func (cc *clientConn) noteResetLocked(id uint32) {
	cc.resetIDs[cc.resetAt%len(cc.resetIDs)] = id
	cc.resetAt++
}

// wasResetLocked says whether the relay reset stream id lately.
func (cc *clientConn) wasResetLocked(id uint32) bool {
	for _, x := range cc.resetIDs {
		if x == id {
			return true
		}
	}
	return false
}

// forgetHalf drops a reset stream's client half. A stream that had ended
// keeps its half while its last frames wait for window (releaseAfterSend);
// once reset, that window never comes, so without this the half and its
// queued response stayed until the connection closed.
func (cc *clientConn) forgetHalf(h *h2codec.Half) {
	c := cc.c
	c.Lock()
	c.RemoveHalfLocked(h)
	c.Unlock()
}

// streamEnded counts a stream off, wasted or completed; the last one of
// a draining connection closes it.
func (cc *clientConn) streamEnded(wasted bool) {
	cc.mu.Lock()
	cc.active--
	if cc.lim.noteEndedLocked(wasted) {
		cc.calm.Store(true)
	}
	last := cc.draining && cc.active == 0
	if cc.active == 0 {
		cc.becameIdleLocked()
	}
	cc.mu.Unlock()
	if last {
		cc.closeSoon()
	}
}

// localConn returns the connection to the proxy's own server, opening it.
func (cc *clientConn) localConn() (*destConn, error) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if cc.local != nil && !cc.local.dead() {
		return cc.local, nil
	}
	d, err := cc.srv.local.open(cc.c.NetConn(), cc.srv.cfg)
	if err != nil {
		return nil, err
	}
	cc.local = d
	return d, nil
}

// BudgetStats returns the byte budget's figures; safe for concurrent use.
func (s *Server) BudgetStats() budget.Stats { return s.budget.Stats() }
