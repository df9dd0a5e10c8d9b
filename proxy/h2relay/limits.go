package h2relay

import (
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/infergate/infergate/proxy/h2relay/h2codec"
)

// What one client connection may cost the proxy, decided in one place:
// how many streams it holds, how its wasted streams weigh against its
// calls, and how long it may sit idle.
//
// A stream counts against the concurrent-streams limit for as long as the
// relay holds anything of it (its client half, with a response queued for
// a client that reads slowly), not only until its request ended: counted
// until its trailers were queued, a client that never reads could open
// stream after stream and have every response pile up in the relay.
//
// Wasted streams are the Rapid Reset family (CVE-2023-44487): streams the
// client reset within a second of opening them, streams the relay refused
// or reset for a protocol error, requests with no message or two. Each
// costs the relay (and maybe the model server) work that answers nobody.
// A connection whose wasted streams outnumber its completed calls by more
// than wasteBudget gets GOAWAY ENHANCE_YOUR_CALM and is closed, as
// nginx, Envoy and x/net close such clients: a well-behaved client that
// cancels a burst of calls stays far below it, and an attacker is cut off
// after a few hundred streams instead of running for as long as it likes.
const (
	// wasteBudget is how far wasted streams may outnumber completed ones.
	wasteBudget = 100
	// prematureReset is the age under which a client's reset of its own
	// stream counts as wasted (Envoy's premature reset); a call cancelled
	// after a second is a client changing its mind, not an attack.
	prematureReset = time.Second
)

// connHeldMax bounds what one connection's streams may hold outside the
// budget (their header lists, requests of up to the initial window read
// whole, the first bytes of bigger ones): past it the connection gets no
// new stream until some end. 4 MiB is hundreds of ordinary calls; without
// it a client that filled each stream's window and kept it held 16 MiB a
// connection, and one with 8 MiB header lists far more.
const connHeldMax = 4 << 20

// headerBytes is a header list's size as HTTP/2 counts it (RFC 9113
// 6.5.2: name, value and 32 bytes a field).
func headerBytes(fields []hpack.HeaderField) int64 {
	var n int64
	for _, f := range fields {
		n += int64(len(f.Name) + len(f.Value) + 32)
	}
	return n
}

// connLimits is a client connection's accounting; guarded by
// clientConn.mu.
type connLimits struct {
	completed, wasted int64
	// idleSince is when the connection's last stream ended (or it
	// opened); zero while streams are open.
	idleSince time.Time
	idleTimer *time.Timer
}

// noteEndedLocked counts a stream that ended, wasted or not, and reports
// whether the connection's waste passed the budget.
func (l *connLimits) noteEndedLocked(wasted bool) (calm bool) {
	if !wasted {
		l.completed++
		return false
	}
	l.wasted++
	return l.wasted > l.completed+wasteBudget
}

// wasted counts a stream of the client's that was wasted before the relay
// made anything of it (refused, malformed).
func (cc *clientConn) wasted() {
	cc.mu.Lock()
	if cc.lim.noteEndedLocked(true) {
		cc.calm.Store(true)
	}
	cc.mu.Unlock()
}

// admitLocked says why a new stream must be refused, or ok. c.mu is held.
func (cc *clientConn) admitLocked() (refuse bool) {
	c := cc.c
	// Counted until the relay forgot it: halves are the streams it holds.
	if uint32(c.OpenLocked()) >= cc.srv.cfg.maxStreams {
		return true
	}
	// A client that does not read what it is owed gets no more streams
	// (their responses could only pile up behind the others), nor one
	// whose streams hold connHeldMax outside the budget.
	// (Data alone never fills the output past outCap: past the control
	// frames' margin above it, the client reads nothing. At outCap itself
	// it may just be taking a big answer: refusing then failed big calls
	// that gRPC's client could not send again.)
	return !c.ControlRoomLocked() || cc.held.Load() > connHeldMax
}

// malformedRequest says whether a request's header block makes it
// malformed (RFC 9113 8.3.1): no :method, no :scheme or an empty :path
// (but for CONNECT), or a connection-specific field (8.2.2: te may only
// be "trailers"). grpc-go's server resets such a stream with
// PROTOCOL_ERROR, and so does the relay, before anything of it goes on.
func malformedRequest(f *http2.MetaHeadersFrame) bool {
	method := f.PseudoValue("method")
	if method == "" || method != "CONNECT" && (f.PseudoValue("scheme") == "" || f.PseudoValue("path") == "") {
		return true
	}
	for _, f := range f.RegularFields() {
		switch f.Name {
		case "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade":
			return true
		case "te":
			if f.Value != "trailers" {
				return true
			}
		}
	}
	return false
}

// idle timeout: a connection with no stream open for cfg.idleTimeout gets
// GOAWAY (so its client reconnects cleanly when it needs to) and is closed.

// becameIdleLocked starts the idle clock; cc.mu is held.
func (cc *clientConn) becameIdleLocked() {
	d := cc.srv.cfg.idleTimeout
	if d <= 0 || cc.draining {
		return
	}
	cc.lim.idleSince = time.Now()
	if cc.lim.idleTimer == nil {
		cc.lim.idleTimer = time.AfterFunc(d, cc.checkIdle)
	}
}

// checkIdle runs when the idle timer fires.
func (cc *clientConn) checkIdle() {
	d := cc.srv.cfg.idleTimeout
	cc.mu.Lock()
	since := cc.lim.idleSince
	switch {
	case cc.draining || cc.closed:
		cc.lim.idleTimer = nil
		cc.mu.Unlock()
		return
	case since.IsZero():
		// Busy now: the clock starts again when it is idle.
		cc.lim.idleTimer = nil
		cc.mu.Unlock()
		return
	case time.Since(since) < d:
		cc.lim.idleTimer.Reset(d - time.Since(since))
		cc.mu.Unlock()
		return
	}
	cc.lim.idleTimer = nil
	cc.mu.Unlock()
	cc.goAway()
}

// stopIdleTimer stops the idle clock of a connection that closed.
func (cc *clientConn) stopIdleTimer() {
	cc.mu.Lock()
	cc.closed = true
	if t := cc.lim.idleTimer; t != nil {
		t.Stop()
		cc.lim.idleTimer = nil
	}
	cc.mu.Unlock()
}

// refuseConn answers a connection over the server's connection limit: our
// SETTINGS and a GOAWAY that lets no stream in, then the close.
func refuseConn(c *h2codec.Conn) {
	c.Lock()
	c.GreetLocked(false)
	c.WriteGoAwayLocked(0, http2.ErrCodeEnhanceYourCalm, []byte("too many connections"))
	c.Unlock()
	c.Close(h2codec.ErrClosed)
}
