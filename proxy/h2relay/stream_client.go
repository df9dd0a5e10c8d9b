package h2relay

import (
	"golang.org/x/net/http2"
)

// A stream's client side: the request as it arrives, and where it goes.

// clientData is a DATA frame of the client's stream.
func (s *stream) clientData(data []byte, end bool, w *writes) error {
	s.mu.Lock()
	if s.clientEnded {
		// RFC 9113 5.1: DATA after END_STREAM is a stream error.
		s.mu.Unlock()
		s.creditClient(int64(len(data)), w)
		return http2.StreamError{StreamID: s.ch.id, Code: http2.ErrCodeStreamClosed}
	}
	s.clientEnded = end
	if s.done {
		s.mu.Unlock()
		s.creditClient(int64(len(data)), w)
		return nil
	}
	if s.buffering {
		if s.call.Body == nil && len(data) >= 5 {
			// The message's length prefix says how much is coming:
			// one allocation of the right size, not a doubling series
			// of copies (a 16 MiB tensor made 25 of them).
			n := int(data[1])<<24 | int(data[2])<<16 | int(data[3])<<8 | int(data[4])
			s.call.Body = make([]byte, 0, 5+min(n, s.cc.srv.cfg.maxBody))
		}
		s.call.Body = append(s.call.Body, data...)
		s.mu.Unlock()
		s.creditClient(int64(len(data)), w)
		if len(s.call.Body) > s.cc.srv.cfg.maxBody {
			s.mu.Lock()
			s.buffering = false
			s.mu.Unlock()
			return s.toLocal(end, w)
		}
		if end {
			s.dispatch(w)
		}
		return nil
	}
	dest, dh := s.dest, s.dh
	s.mu.Unlock()
	if dest == nil {
		s.creditClient(int64(len(data)), w)
		return nil
	}
	dc := dest.c
	dc.mu.Lock()
	due := dc.writeDataLocked(dh, data, end, false, s.ch)
	dc.mu.Unlock()
	w.add(dc)
	if due.n > 0 {
		s.creditClient(due.n, w)
	}
	return nil
}

func (s *stream) creditClient(n int64, w *writes) {
	c := s.cc.c
	c.mu.Lock()
	c.giveBackLocked(s.ch, n)
	c.mu.Unlock()
	w.add(c)
}

// clientTrailers are headers ending a client stream that is relayed as it
// arrives.
func (s *stream) clientTrailers(f *http2.MetaHeadersFrame, w *writes) error {
	s.mu.Lock()
	dest, dh, buffering, ended := s.dest, s.dh, s.buffering, s.clientEnded
	s.clientEnded = true
	s.mu.Unlock()
	if buffering || ended || !f.StreamEnded() {
		return http2.StreamError{StreamID: f.StreamID, Code: http2.ErrCodeProtocol}
	}
	if dest != nil {
		dest.c.mu.Lock()
		dest.c.writeHeadersLocked(dh, f.Fields, true)
		dest.c.mu.Unlock()
		w.add(dest.c)
	}
	return nil
}

// toLocal relays the stream, from its headers on, to the proxy's own
// server.
func (s *stream) toLocal(end bool, w *writes) error {
	d, err := s.cc.localConn()
	if err != nil {
		return http2.StreamError{StreamID: s.ch.id, Code: http2.ErrCodeRefusedStream}
	}
	s.mu.Lock()
	s.local = true
	body := s.call.Body
	s.call.Body = nil
	s.mu.Unlock()
	if !d.start(s, s.fields, body, end, false, w) {
		return http2.StreamError{StreamID: s.ch.id, Code: http2.ErrCodeRefusedStream}
	}
	return nil
}

// dispatch routes a complete unary request.
func (s *stream) dispatch(w *writes) {
	s.mu.Lock()
	s.buffering = false
	s.mu.Unlock()
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
		s.cc.resetStream(s.ch.id, http2.ErrCodeRefusedStream, w)
		return
	}
	s.mu.Lock()
	s.local = true
	body := s.call.Body
	s.mu.Unlock()
	if !d.start(s, s.fields, body, true, false, w) {
		s.cc.resetStream(s.ch.id, http2.ErrCodeRefusedStream, w)
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
	s.finish(&Result{Err: &Error{Kind: ErrClientGone, Code: 1, Msg: msg}}, nil, nil)
}
