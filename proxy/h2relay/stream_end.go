package h2relay

import (
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/codes"

	"github.com/infergate/infergate/grpcwire"
	"github.com/infergate/infergate/proxy/h2relay/h2codec"
)

// How a stream ends: its response relayed back, resets and losses on
// either side, the proxy's own timeout.

// finishLocal ends a stream relayed to Local, or refused before routing.
func (s *stream) finishLocal() {
	s.mu.Lock()
	if s.done {
		s.mu.Unlock()
		return
	}
	s.done = true
	dest, dh, cancel := s.dest, s.dh, s.cancel
	s.mu.Unlock()
	if cancel != nil {
		cancel() // a served call's handler sees its client gone
	}
	s.releaseAfterSend(dest, dh)
}

// finish ends a routed call: Done hears how, and when the relay ended it,
// the client gets the status Done returns. trailers, when not nil, are the
// upstream's last headers, to forward.
func (s *stream) finish(r *Result, trailers []hpack.HeaderField, w *writes) {
	s.mu.Lock()
	if s.done {
		s.mu.Unlock()
		return
	}
	s.done = true
	if s.timer != nil {
		s.timer.Stop()
	}
	dest, dh := s.dest, s.dh
	r.Answered = s.answered
	r.BytesOut = s.bytesOut
	if !s.sentAt.IsZero() {
		r.Upstream = s.cc.srv.cfg.now().Sub(s.sentAt)
	}
	answered := s.answered
	r.TimeoutAt = s.timeoutAt
	s.mu.Unlock()

	code, msg := s.cc.srv.h.Done(&s.call, r)
	// judged: the Handler's status is not the upstream's; it is sent
	// instead of the upstream's trailers, trailers-only when they were.
	judged := trailers != nil && r.Err == nil && (code != r.Status || msg != r.Message)
	if judged && trailersOnly(trailers) {
		answered = false
	}
	s.mu.Lock()
	s.call.Body = nil
	// A request relayed as it arrives may still be coming: the client
	// is told to stop (as grpc-go's server does after its status).
	stop := s.path == pathCut && !s.clientEnded && (r.Err == nil || r.Err.Kind != ErrClientGone)
	s.mu.Unlock()
	reset := false
	c := s.cc.c
	c.Lock()
	switch {
	case trailers != nil && !judged:
		c.WriteHeadersLocked(s.ch, trailers, true)
	case r.Err != nil && r.Err.Kind == ErrRefused:
		c.WriteResetLocked(s.ch.ID(), http2.ErrCodeRefusedStream)
		stop, reset = false, true
	case judged || r.Err != nil && r.Err.Kind != ErrClientGone:
		c.WriteHeadersLocked(s.ch, grpcwire.AppendStatus(nil, !answered, "", grpcwire.Status{Code: code, Message: msg}), true)
	}
	if stop {
		c.WriteResetLocked(s.ch.ID(), http2.ErrCodeNo)
		reset = true
	}
	if w == nil {
		c.KickLocked()
	}
	c.Unlock()
	if reset {
		s.cc.resetSent(s.ch.ID())
	}
	if w != nil {
		w.Add(c)
	}
	s.releaseAfterSend(dest, dh)
}

// releaseAfterSend forgets the stream's halves; the client's half stays
// until its queued frames went out, so a response waiting for window is
// not lost.
func (s *stream) releaseAfterSend(dest *destConn, dh *h2codec.Half) {
	c := s.cc.c
	c.Lock()
	s.ch.ForgetAfterQueueLocked()
	c.Unlock()
	if dest != nil && dh != nil {
		dest.forget(dh)
	}
	s.mu.Lock()
	wasted, budgeted := s.wasted, s.budgeted || s.widenTo > 0
	s.unholdLocked()
	s.cc.held.Add(-s.hdr)
	s.hdr = 0
	s.mu.Unlock()
	if budgeted {
		s.cc.srv.budget.Release(&s.res)
	}
	s.cc.streamEnded(wasted)
}

// respHeaders forwards response headers from the destination.
func (s *stream) respHeaders(f *http2.MetaHeadersFrame, w *writes) {
	s.mu.Lock()
	if s.done {
		s.mu.Unlock()
		return
	}
	first := !s.answered
	s.answered = true
	routed := s.pool != nil
	s.mu.Unlock()
	end := f.StreamEnded()
	if end && routed {
		code, msg, ok := grpcwire.ReadStatus(f.Fields)
		r := &Result{Status: code, Message: msg}
		if !ok {
			r.Status, r.Message = codes.Unknown, "upstream ended the call without grpc-status"
			if first {
				r.Status = 13
			}
		}
		s.finish(r, f.Fields, w)
		return
	}
	c := s.cc.c
	c.Lock()
	c.WriteHeadersLocked(s.ch, f.Fields, end)
	c.Unlock()
	w.Add(c)
	if end {
		s.finishLocal()
	}
}

// respData forwards response data from the destination; it returns the
// credit due to the destination now, and whether the data left as fast as
// it came (its window may widen).
func (s *stream) respData(data []byte, end bool, w *writes) (int64, bool) {
	s.mu.Lock()
	if s.done {
		s.mu.Unlock()
		return int64(len(data)), false
	}
	s.bytesOut += int64(len(data))
	dh := s.dh
	s.mu.Unlock()
	c := s.cc.c
	c.Lock()
	due := c.WriteDataLocked(s.ch, data, end, false, dh)
	fast := c.FlowingLocked(due, len(data))
	c.Unlock()
	w.Add(c)
	if end {
		s.mu.Lock()
		routed := s.pool != nil
		s.mu.Unlock()
		if routed {
			// DATA with END_STREAM: no trailers, no status.
			s.finish(&Result{Status: codes.Internal, Message: "upstream ended the call without trailers"}, nil, w)
		} else {
			s.finishLocal()
		}
	}
	return due.N, fast
}

// destReset is a RST_STREAM from the destination.
func (s *stream) destReset(code http2.ErrCode, w *writes) {
	s.mu.Lock()
	if s.done {
		s.mu.Unlock()
		return
	}
	routed := s.pool != nil
	s.mu.Unlock()
	if s.retryOnce(code == http2.ErrCodeRefusedStream, w) {
		return
	}
	if routed && code == http2.ErrCodeCancel {
		// A gRPC server resets a call whose deadline passed with CANCEL;
		// gRPC's client reports the deadline, and so does the relay.
		now := time.Now()
		if s.proxyTimeoutPassed(now) || !s.call.Deadline.IsZero() && !now.Before(s.call.Deadline) {
			s.finish(&Result{Err: &Error{Kind: ErrReset, Code: codes.DeadlineExceeded, Msg: "context deadline exceeded"}}, nil, w)
			return
		}
	}
	if !routed {
		c := s.cc.c
		c.Lock()
		c.WriteResetLocked(s.ch.ID(), code)
		c.Unlock()
		w.Add(c)
		s.cc.resetSent(s.ch.ID())
		s.finishLocal()
		return
	}
	s.finish(&Result{Err: &Error{Kind: ErrReset, Code: grpcwire.ResetCode(code),
		Msg: "stream terminated by RST_STREAM with error code: " + code.String()}}, nil, w)
}

// retryOnce sends a routed call that the upstream never processed
// (refused) again, once, as gRPC's client does (an upstream that refuses
// every stream got the call again and again, for as long as the client
// waited). It reports whether it did.
func (s *stream) retryOnce(refused bool, w *writes) bool {
	s.mu.Lock()
	p := s.pool
	retry := refused && p != nil && !s.answered && !s.retried && !s.done
	if retry {
		s.retried = true
	}
	cut := s.path == pathCut
	s.mu.Unlock()
	if !retry {
		return false
	}
	if cut {
		// What was relayed is gone: the client sends it again.
		s.finish(&Result{Err: &Error{Kind: ErrRefused, Code: codes.Unavailable, Msg: "the upstream refused the stream"}}, nil, w)
		return true
	}
	s.detach()
	p.send(s, w)
	return true
}

// destLost is the end of the destination's connection under the stream.
func (s *stream) destLost(err error, retry bool, w *writes) {
	s.mu.Lock()
	if s.done {
		s.mu.Unlock()
		return
	}
	routed, answered := s.pool != nil, s.answered
	s.mu.Unlock()
	if s.retryOnce(retry, w) {
		return
	}
	if !routed {
		c := s.cc.c
		c.Lock()
		if !answered {
			c.WriteHeadersLocked(s.ch, grpcwire.AppendStatus(nil, true, "", grpcwire.Status{Code: codes.Unavailable, Message: "connection to the proxy's server lost"}), true)
		} else {
			c.WriteResetLocked(s.ch.ID(), http2.ErrCodeInternal)
		}
		c.Unlock()
		w.Add(c)
		s.finishLocal()
		return
	}
	msg := "connection to the upstream lost"
	if err != nil {
		msg += ": " + err.Error()
	}
	s.finish(&Result{Err: &Error{Kind: ErrUnavailable, Code: codes.Unavailable, Msg: msg}}, nil, w)
}

// detach forgets the stream's destination before it is sent again.
func (s *stream) detach() {
	s.mu.Lock()
	dest, dh := s.dest, s.dh
	s.dest, s.dh = nil, nil
	s.mu.Unlock()
	if dest != nil && dh != nil {
		dest.forget(dh)
	}
}

// trailersOnly says whether an answer's last headers were its only ones
// (they carry :status).
func trailersOnly(fields []hpack.HeaderField) bool {
	for _, f := range fields {
		if f.Name == ":status" {
			return true
		}
	}
	return false
}

// proxyTimeoutPassed says whether Call.Timeout, the proxy's deadline for a
// call sent without one, has passed at now.
func (s *stream) proxyTimeoutPassed(now time.Time) bool {
	s.mu.Lock()
	at := s.timeoutAt
	s.mu.Unlock()
	return !at.IsZero() && !now.Before(at)
}

// cancelDest resets the stream's destination side with CANCEL, if it has
// one: the upstream (or the proxy's server) stops working on it.
func (s *stream) cancelDest() {
	s.mu.Lock()
	dest, dh := s.dest, s.dh
	s.mu.Unlock()
	if dest == nil {
		return
	}
	dc := dest.c
	dc.Lock()
	if !dh.GoneLocked() {
		dc.WriteResetLocked(dh.ID(), http2.ErrCodeCancel)
	}
	dc.KickLocked()
	dc.Unlock()
}

// timedOut is Call.Timeout passing.
func (s *stream) timedOut() {
	s.cancelDest()
	s.finish(&Result{Err: &Error{Kind: ErrTimeout, Code: codes.DeadlineExceeded, Msg: "context deadline exceeded"}}, nil, nil)
}
