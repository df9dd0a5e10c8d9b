package h2relay

import (
	"context"

	"golang.org/x/net/http2/hpack"

	"github.com/infergate/infergate/grpcwire"
)

// Responder answers a call the Handler serves itself (Route's serve): the
// relay keeps the client's side of the HTTP/2 stream, the Handler writes
// the response. Its methods are safe to call from the Handler's goroutine
// while the relay reads on; after the client went away they do nothing.
type Responder struct {
	s   *stream
	ctx context.Context
}

// serve starts the Handler's Serve for s on a goroutine of its own.
func (s *stream) serve() {
	ctx := context.Background()
	var cancel context.CancelFunc
	if !s.call.Deadline.IsZero() {
		ctx, cancel = context.WithDeadline(ctx, s.call.Deadline)
	} else {
		ctx, cancel = context.WithCancel(ctx)
	}
	s.mu.Lock()
	s.cancel = cancel
	s.mu.Unlock()
	r := &Responder{s: s, ctx: ctx}
	go s.cc.srv.h.Serve(&s.call, r)
}

// Context is the call's: it carries the client's deadline and ends when
// the client resets the stream or its connection closes.
func (r *Responder) Context() context.Context { return r.ctx }

// HeaderSent says whether WriteHeader went out.
func (r *Responder) HeaderSent() bool {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	return r.s.answered
}

// WriteHeader sends the response headers, :status first. It reports
// false when they were sent already or the client is gone.
func (r *Responder) WriteHeader(fields []hpack.HeaderField) bool {
	s := r.s
	s.mu.Lock()
	if s.done || s.answered {
		s.mu.Unlock()
		return false
	}
	s.answered = true
	s.mu.Unlock()
	c := s.cc.c
	c.Lock()
	c.WriteHeadersLocked(s.ch, fields, false)
	c.Unlock()
	return true
}

// WriteMessage sends one length-prefixed message after the headers; msg
// is copied as far as it cannot go out at once. It reports false when the
// client is gone.
func (r *Responder) WriteMessage(msg []byte) bool {
	s := r.s
	s.mu.Lock()
	if s.done {
		s.mu.Unlock()
		return false
	}
	s.bytesOut += int64(len(msg)) + grpcwire.PrefixLen
	s.mu.Unlock()
	prefix := make([]byte, grpcwire.PrefixLen)
	grpcwire.PutPrefix(prefix, len(msg))
	c := s.cc.c
	c.Lock()
	c.WriteDataLocked(s.ch, prefix, false, true, nil)
	c.WriteDataLocked(s.ch, msg, false, false, nil)
	if len(msg) >= 64<<10 {
		c.KickLocked()
	}
	c.Unlock()
	return true
}

// Finish ends the call with trailers (grpc-status first; with :status and
// content-type before it when no header was sent: trailers-only).
func (r *Responder) Finish(fields []hpack.HeaderField) {
	s := r.s
	s.mu.Lock()
	if s.done {
		s.mu.Unlock()
		return
	}
	s.done = true
	cancel := s.cancel
	s.mu.Unlock()
	c := s.cc.c
	c.Lock()
	c.WriteHeadersLocked(s.ch, fields, true)
	c.KickLocked()
	c.Unlock()
	cancel()
	s.releaseAfterSend(nil, nil)
}
