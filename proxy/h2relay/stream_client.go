package h2relay

import (
	"errors"
	"fmt"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/grpc/codes"

	"github.com/infergate/infergate/budget"
	"github.com/infergate/infergate/grpcwire"
)

// A stream's client side: the request as it arrives, and where it goes.

// clientData is a DATA frame of the client's stream.
func (s *stream) clientData(data []byte, end bool, w *writes) error {
	s.mu.Lock()
	s.clientEnded = end
	if s.declared > 0 {
		s.got += int64(len(data))
		if s.got > s.declared-1 || end && s.got != s.declared-1 {
			s.mu.Unlock()
			s.creditClient(int64(len(data)), w)
			return http2.StreamError{StreamID: s.ch.ID(), Code: http2.ErrCodeProtocol}
		}
	}
	if s.done {
		s.mu.Unlock()
		s.creditClient(int64(len(data)), w)
		return nil
	}
	if s.path == pathWhole {
		return s.bufferData(data, end, w)
	}
	dest, dh := s.dest, s.dh
	if dest == nil && s.path == pathCut {
		// Routed, waiting for its pool to start it: what comes is held
		// (no window given back) and goes first when it starts.
		s.call.Body = append(s.call.Body, data...)
		s.holdLocked(int64(len(data)))
		s.mu.Unlock()
		s.checkTarget(data, w)
		return nil
	}
	s.mu.Unlock()
	if dest == nil {
		s.creditClient(int64(len(data)), w)
		return nil
	}
	if !s.checkTarget(data, w) {
		return nil
	}
	dc := dest.c
	dc.Lock()
	due := dc.WriteDataLocked(dh, data, end, false, s.ch)
	fast := dc.FlowingLocked(due, len(data))
	dc.Unlock()
	w.Add(dc)
	if due.N > 0 {
		c := s.cc.c
		c.Lock()
		c.GiveBackLocked(s.ch, due.N)
		if fast {
			c.WidenLocked(s.ch)
		}
		c.Unlock()
		w.Add(c)
	}
	return nil
}

// bufferData takes a DATA frame of a unary request read whole; s.mu is
// held and released. The stream gets no window back for what it sends:
// its initial window covers a small request, and a bigger one gets its
// whole size at once, from the budget, when its length prefix arrives.
func (s *stream) bufferData(data []byte, end bool, w *writes) error {
	var need int64
	fresh := false
	if !s.sized {
		var p [grpcwire.PrefixLen]byte
		k := copy(p[:], s.call.Body)
		if k += copy(p[k:], data); k == grpcwire.PrefixLen {
			s.sized = true
			_, n, _ := grpcwire.ReadPrefix(p[:])
			if max := s.cc.srv.cfg.maxMessage; max > 0 && n > max {
				// Answered now, as grpc-go's server answers it, and
				// reset: no more window for a body nobody reads.
				s.mu.Unlock()
				s.refuse(codes.ResourceExhausted, fmt.Sprintf("grpc: received message larger than max (%d vs. %d)", n, max), w)
				return nil
			}
			need = grpcwire.PrefixLen + int64(n)
			s.need = need
			scanner := s.cc.srv.h.Scan(s.call.Method)
			if need > int64(s.cc.srv.cfg.maxBody) && (scanner == nil || need <= s.cc.c.InitWindow()) {
				s.mu.Unlock()
				return s.tooBigToHold(data, end, w)
			}
			switch {
			case need <= s.cc.c.InitWindow():
				s.sizeBodyLocked(need)
			case scanner != nil:
				// Read its target from its first bytes: it may be
				// relayed as it arrives (early), holding nothing.
				s.scan = scanner()
				fresh = true
			default:
				s.budgeted = true
			}
		}
	}
	s.call.Body = append(s.call.Body, data...)
	if !s.covered {
		// Not covered by the budget (yet): the connection's.
		s.holdLocked(int64(len(data)))
	}
	var early, hold bool
	if s.scan != nil && !s.budgeted {
		chunk := data
		if fresh {
			chunk = s.call.Body
		}
		err := s.scan.Feed(chunk)
		switch {
		case err == nil && s.scan.Known():
			early = true
		case err != nil || int64(len(s.call.Body)) >= s.cc.c.InitWindow():
			// Unreadable, or no target within what the client may
			// send unasked: read whole, under the budget.
			s.scan, s.budgeted, hold = nil, true, true
		}
	}
	need = s.need
	s.mu.Unlock()
	if early {
		hold = !s.routeEarly(w)
	}
	if hold && need > int64(s.cc.srv.cfg.maxBody) {
		return s.tooBigToHold(nil, end, w)
	}
	if hold || (need > 0 && s.budgeted && !s.admitted) {
		s.admitted = true
		if s.cc.srv.budget.Reserve(&s.res, s, &s.cc.share, need, s.call.Deadline) {
			s.Admitted(need)
		}
	}
	if end {
		// Routed once the reader's input is drained (writes.flush): if
		// the client reset it in the same read, it goes nowhere.
		w.ready = append(w.ready, s)
	}
	return nil
}

// tooBigToHold relays a request too big to read whole to Local as it
// comes, data (not yet in Body) after what arrived before it.
func (s *stream) tooBigToHold(data []byte, end bool, w *writes) error {
	s.mu.Lock()
	s.path, s.scan, s.budgeted = pathRelayed, nil, false
	s.call.Body = append(s.call.Body, data...)
	s.mu.Unlock()
	return s.toLocal(end, w)
}

// routeEarly asks the Handler for a pool for a request whose first bytes
// named its target, and relays it as it arrives if it got one; it reports
// whether it did.
func (s *stream) routeEarly(w *writes) bool {
	model, version := s.scan.Target()
	p := s.cc.srv.h.RouteEarly(&s.call, model, version)
	if p == nil {
		s.mu.Lock()
		s.scan, s.budgeted = nil, true
		s.mu.Unlock()
		return false
	}
	s.mu.Lock()
	s.path, s.pool = pathCut, p
	need := s.need
	s.mu.Unlock()
	// Its size is known: open its window now, within the budget, rather
	// than widening from the first 16 KiB. With no room in the budget
	// now, it waits for room in order, as a request read whole does,
	// relaying meanwhile what its window lets come: only widening a
	// window when the budget happened to have room made big tensors
	// crawl at 16 KiB a round trip behind others in open loop.
	c := s.cc.c
	c.Lock()
	short := c.WidenToLocked(s.ch, need)
	win := s.ch.WindowLocked()
	c.Unlock()
	w.Add(c)
	if short = min(short, windowAsk-win); short > 0 {
		s.mu.Lock()
		s.widenTo = win + short
		s.mu.Unlock()
		if s.cc.srv.budget.Reserve(&s.res, s, &s.cc.share, short, s.call.Deadline) {
			s.Admitted(short)
		}
	}
	p.send(s, w)
	return true
}

// windowAsk is the window a request relayed as it arrives waits for when
// the budget has no room for its whole window at once.
const windowAsk = 1 << 20

// checkTarget reads the target in data of a request relayed as it
// arrives, before data goes on: one that names another model or version
// than its first bytes did is reset on both sides (ErrTargetChanged), so
// no client can dodge a route, a breaker or its series by naming one
// model first and another later. It reports whether the stream goes on.
func (s *stream) checkTarget(data []byte, w *writes) bool {
	sc := s.scan
	if sc == nil {
		return true
	}
	err := sc.Feed(data)
	if sc.Changed() || errors.Is(err, ErrUnroutable) {
		s.scan = nil
		s.cancelDest()
		s.finish(&Result{Err: &Error{Kind: ErrTargetChanged, Code: codes.InvalidArgument,
			Msg: "infergate: the request names another model or version after its first bytes"}}, nil, w)
		return false
	}
	if err != nil || sc.Done() {
		// Malformed: the upstream says so; done: a later message
		// names nothing the upstream routes by.
		s.scan = nil
	}
	return true
}

// holdLocked counts n bytes of the request held outside the budget
// against the connection (limits.go).
func (s *stream) holdLocked(n int64) {
	s.loose += n
	s.cc.held.Add(n)
}

// unholdLocked gives them back: the request left, or the budget took it.
func (s *stream) unholdLocked() {
	s.cc.held.Add(-s.loose)
	s.loose = 0
}

// wholeBody is the request to send of a call read whole; nil for one
// relayed as it arrives, whose reader may be adding to call.Body
// (startLocked takes what came, under the stream's lock).
func (s *stream) wholeBody() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.path == pathCut {
		return nil
	}
	return s.call.Body
}

// sizeBodyLocked makes room for the whole request of need bytes: one
// allocation of the right size, not a doubling series of copies (a 16 MiB
// tensor made 25 of them).
func (s *stream) sizeBodyLocked(need int64) {
	if int64(cap(s.call.Body)) >= need {
		return
	}
	b := make([]byte, len(s.call.Body), need)
	copy(b, s.call.Body)
	s.call.Body = b
}

// Admitted gives a stream the budget took need bytes for the window to
// send its whole request, or for a request relayed as it arrives the
// wider window it waited for (budget.Waiter).
func (s *stream) Admitted(need int64) {
	s.mu.Lock()
	if s.done {
		s.mu.Unlock()
		return // its end gives the room back
	}
	if win := s.widenTo; win > 0 {
		s.mu.Unlock()
		c := s.cc.c
		c.Lock()
		c.GrowLocked(s.ch, win)
		c.KickLocked()
		c.Unlock()
		return
	}
	s.sizeBodyLocked(need)
	s.unholdLocked() // the budget covers what came
	s.covered = true
	s.mu.Unlock()
	c := s.cc.c
	c.Lock()
	c.GrowLocked(s.ch, need)
	c.KickLocked()
	c.Unlock()
}

// Refused answers a stream that got no room in the budget before its
// deadline (budget.Waiter). A request relayed as it arrives that waited
// for a wider window only stops waiting: it goes on at the window it has
// (its deadline, passed now, ends it anyway).
func (s *stream) Refused(err *budget.Error) {
	s.mu.Lock()
	widening := s.widenTo > 0
	s.mu.Unlock()
	if widening {
		return
	}
	var w writes
	s.refuse(codes.ResourceExhausted, err.Error(), &w)
	w.flush()
}

func (s *stream) creditClient(n int64, w *writes) {
	c := s.cc.c
	c.Lock()
	c.GiveBackLocked(s.ch, n)
	c.Unlock()
	w.Add(c)
}

// clientTrailers are headers ending a client stream that is relayed as it
// arrives.
func (s *stream) clientTrailers(f *http2.MetaHeadersFrame, w *writes) error {
	s.mu.Lock()
	dest, dh, whole := s.dest, s.dh, s.path == pathWhole
	s.clientEnded = true
	s.mu.Unlock()
	if whole || !f.StreamEnded() {
		return http2.StreamError{StreamID: f.StreamID, Code: http2.ErrCodeProtocol}
	}
	if dest != nil {
		dest.c.Lock()
		dest.c.WriteHeadersLocked(dh, f.Fields, true)
		dest.c.Unlock()
		w.Add(dest.c)
	}
	return nil
}

// toLocal relays the stream, from its headers on, to the proxy's own
// server.
func (s *stream) toLocal(end bool, w *writes) error {
	d, err := s.cc.localConn()
	if err != nil {
		return http2.StreamError{StreamID: s.ch.ID(), Code: http2.ErrCodeRefusedStream}
	}
	s.mu.Lock()
	body := s.call.Body
	s.call.Body = nil
	s.mu.Unlock()
	if !d.start(s, s.fields, body, end, false, w) {
		return http2.StreamError{StreamID: s.ch.ID(), Code: http2.ErrCodeRefusedStream}
	}
	if !end && len(body) > 0 {
		// The window the client spent on what was read so far comes
		// back, or a client that spent it all would wait for ever.
		s.creditClient(int64(len(body)), w)
	}
	return nil
}

// dispatch routes a complete unary request.
func (s *stream) dispatch(w *writes) {
	s.mu.Lock()
	if s.done {
		s.mu.Unlock()
		return // reset before it was routed: nothing of it went anywhere
	}
	s.path = pathDecided
	s.mu.Unlock()
	switch grpcwire.CountMessages(s.call.Body) {
	case 0:
		s.refuse(codes.Internal, msgNoRequest, w)
		return
	case 2:
		s.refuse(codes.Internal, msgMultiple, w)
		return
	}
	p, serve := s.cc.srv.h.Route(&s.call)
	if serve {
		s.serve()
		return
	}
	if p == nil {
		s.toLocalWhole(w)
		return
	}
	s.mu.Lock()
	s.pool = p
	s.mu.Unlock()
	p.send(s, w)
}

// toLocalWhole sends a complete request to the proxy's own server.
func (s *stream) toLocalWhole(w *writes) {
	d, err := s.cc.localConn()
	if err != nil {
		s.cc.resetStream(s.ch.ID(), http2.ErrCodeRefusedStream, w)
		return
	}
	s.mu.Lock()
	body := s.call.Body
	s.mu.Unlock()
	if !d.start(s, s.fields, body, true, false, w) {
		s.cc.resetStream(s.ch.ID(), http2.ErrCodeRefusedStream, w)
	}
}

// clientGone ends a stream whose client reset it or went away.
func (s *stream) clientGone(code http2.ErrCode) {
	s.mu.Lock()
	if s.done {
		s.mu.Unlock()
		return
	}
	routed := s.pool != nil
	s.mu.Unlock()
	s.cancelDest()
	var msg string
	if code == http2.ErrCodeCancel {
		msg = "client cancelled the call"
	} else {
		msg = "client reset the stream: " + code.String()
	}
	if !routed {
		s.finishLocal()
		return
	}
	s.finish(&Result{Err: &Error{Kind: ErrClientGone, Code: codes.Canceled, Msg: msg}}, nil, nil)
}

// clientReset is the client's RST_STREAM for s; one within prematureReset
// of its headers is wasted.
func (s *stream) clientReset(code http2.ErrCode) {
	s.markWasted(time.Since(s.opened) < prematureReset)
	s.clientGone(code)
}

// markWasted marks s as having answered nobody, when wasted.
func (s *stream) markWasted(wasted bool) {
	if !wasted {
		return
	}
	s.mu.Lock()
	s.wasted = true
	s.mu.Unlock()
}

// The texts of grpc-go's server for a unary call without exactly one
// request message (its status is INTERNAL).
const (
	msgNoRequest = "cardinality violation: received no request message from non-client-streaming RPC"
	msgMultiple  = "cardinality violation: received multiple request messages for non-client-streaming RPC"
)

// refuse answers a call the relay routed nowhere with a status of its own
// (trailers-only) and counts it wasted. A client still sending gets
// RST_STREAM NO_ERROR after the status, as from grpc-go's server: it
// stops, and what it sent meanwhile is ignored.
func (s *stream) refuse(code codes.Code, msg string, w *writes) {
	s.mu.Lock()
	if s.done {
		s.mu.Unlock()
		return
	}
	s.wasted = true
	s.path = pathDecided
	ended := s.clientEnded
	s.mu.Unlock()
	s.cc.srv.h.Refused(&s.call, code, msg)
	s.mu.Lock()
	s.call.Body = nil
	s.mu.Unlock()
	cc := s.cc
	c := cc.c
	c.Lock()
	c.WriteHeadersLocked(s.ch, grpcwire.AppendStatus(nil, true, "", grpcwire.Status{Code: code, Message: msg}), true)
	if !ended {
		c.WriteResetLocked(s.ch.ID(), http2.ErrCodeNo)
	}
	c.Unlock()
	w.Add(c)
	if !ended {
		cc.mu.Lock()
		cc.noteResetLocked(s.ch.ID())
		cc.mu.Unlock()
	}
	s.finishLocal()
	if !ended {
		cc.forgetHalf(s.ch)
	}
}
