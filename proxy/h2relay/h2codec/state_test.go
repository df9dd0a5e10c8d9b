package h2codec

import (
	"errors"
	"testing"

	"golang.org/x/net/http2"
)

func TestStateString(t *testing.T) {
	for _, tt := range []struct {
		s    State
		want string
	}{
		{StateOpen, "open"},
		{StateHalfClosedLocal, "half-closed (local)"},
		{StateHalfClosedRemote, "half-closed (remote)"},
		{StateClosed, "closed"},
		{State(9), "State(?)"},
	} {
		if got := tt.s.String(); got != tt.want {
			t.Errorf("State(%d).String() = %q, want %q", tt.s, got, tt.want)
		}
	}
}

// RFC 9113 5.1: END_STREAM sent takes open to half-closed (local) and
// half-closed (remote) to closed; END_STREAM received takes open to
// half-closed (remote) and half-closed (local) to closed. An end a side
// already made changes nothing.
func TestStateEnds(t *testing.T) {
	tests := []struct {
		from                State
		afterLocal          State
		afterRemote         State
		remoteEndedAlready  bool
		remoteEndedAfterEnd bool
	}{
		{StateOpen, StateHalfClosedLocal, StateHalfClosedRemote, false, true},
		{StateHalfClosedLocal, StateHalfClosedLocal, StateClosed, false, true},
		{StateHalfClosedRemote, StateClosed, StateHalfClosedRemote, true, true},
		{StateClosed, StateClosed, StateClosed, true, true},
	}
	for _, tt := range tests {
		h := &Half{state: tt.from}
		h.endLocal()
		if h.state != tt.afterLocal {
			t.Errorf("%v, END_STREAM sent: %v, want %v", tt.from, h.state, tt.afterLocal)
		}
		h = &Half{state: tt.from}
		h.endRemote()
		if h.state != tt.afterRemote {
			t.Errorf("%v, END_STREAM received: %v, want %v", tt.from, h.state, tt.afterRemote)
		}
		if got := tt.from.remoteEnded(); got != tt.remoteEndedAlready {
			t.Errorf("%v.remoteEnded() = %v, want %v", tt.from, got, tt.remoteEndedAlready)
		}
		if got := h.state.remoteEnded(); got != tt.remoteEndedAfterEnd {
			t.Errorf("%v.remoteEnded() = %v after the peer's END_STREAM", h.state, got)
		}
	}
}

// wantStreamClosed checks that err is the stream error STREAM_CLOSED for
// stream id (RFC 9113 5.1, a frame after the peer's END_STREAM).
func wantStreamClosed(t *testing.T, err error, id uint32) {
	t.Helper()
	var se http2.StreamError
	if !errors.As(err, &se) || se.StreamID != id || se.Code != http2.ErrCodeStreamClosed {
		t.Fatalf("got %v, want a STREAM_CLOSED stream error on stream %d", err, id)
	}
}

// The peer's HEADERS and DATA move its side of the stream, in every state:
// with END_STREAM they end it (open → half-closed (remote), half-closed
// (local) → closed); once the peer ended the stream (half-closed (remote),
// closed) either is the stream error STREAM_CLOSED and changes nothing
// (RFC 9113 5.1).
func TestPeerFramesByState(t *testing.T) {
	type frame struct {
		name string
		send func(c *Conn, h *Half, end bool) error
	}
	frames := []frame{
		{"HEADERS", func(c *Conn, h *Half, end bool) error { return c.PeerHeadersLocked(h, end) }},
		{"DATA", func(c *Conn, h *Half, end bool) error { return c.TakeDataLocked(h, 100, end) }},
		{"empty DATA", func(c *Conn, h *Half, end bool) error { return c.TakeDataLocked(h, 0, end) }},
	}
	tests := []struct {
		from    State
		end     bool
		want    State
		refused bool
	}{
		{StateOpen, false, StateOpen, false},
		{StateOpen, true, StateHalfClosedRemote, false},
		{StateHalfClosedLocal, false, StateHalfClosedLocal, false},
		{StateHalfClosedLocal, true, StateClosed, false},
		{StateHalfClosedRemote, false, StateHalfClosedRemote, true},
		{StateHalfClosedRemote, true, StateHalfClosedRemote, true},
		{StateClosed, false, StateClosed, true},
		{StateClosed, true, StateClosed, true},
	}
	for _, fr := range frames {
		for _, tt := range tests {
			c := newTestConn(t, testConfig())
			h := c.AddHalfLocked(3, nil)
			h.state = tt.from
			connBefore := c.recv.avail
			err := fr.send(c, h, tt.end)
			if tt.refused {
				wantStreamClosed(t, err, 3)
			} else if err != nil {
				t.Fatalf("%s (end %v) in %v: %v", fr.name, tt.end, tt.from, err)
			}
			if h.StateLocked() != tt.want {
				t.Fatalf("%s (end %v) in %v: now %v, want %v", fr.name, tt.end, tt.from, h.StateLocked(), tt.want)
			}
			if fr.name == "DATA" && c.recv.avail != connBefore-100 {
				// Refused or not, DATA counts against the
				// connection's window (RFC 9113 6.9).
				t.Fatalf("DATA (end %v) in %v: connection window %d, want %d", tt.end, tt.from, c.recv.avail, connBefore-100)
			}
		}
	}
}

// What we send moves our side of the stream: END_STREAM on HEADERS or on
// DATA (also empty DATA) ends it, but only once that frame is written. An
// END_STREAM queued behind flow control leaves the stream open until a
// WINDOW_UPDATE lets it go, and HEADERS queued behind that data wait too.
func TestLocalEndsByState(t *testing.T) {
	tests := []struct {
		name string
		send func(c *Conn, h *Half)
	}{
		{"HEADERS", func(c *Conn, h *Half) { c.WriteHeadersLocked(h, []hpackField{{Name: "grpc-status", Value: "0"}}, true) }},
		{"DATA", func(c *Conn, h *Half) { c.WriteDataLocked(h, []byte("hello"), true, false, nil) }},
		{"empty DATA", func(c *Conn, h *Half) { c.WriteDataLocked(h, nil, true, false, nil) }},
	}
	// The states in which we may still send (RFC 9113 5.1); ending a side
	// twice is TestStateEnds'.
	for _, tt := range tests {
		for _, from := range []State{StateOpen, StateHalfClosedRemote} {
			c := newTestConn(t, testConfig())
			h := c.AddHalfLocked(1, nil)
			h.state = from
			tt.send(c, h)
			want := map[State]State{
				StateOpen:             StateHalfClosedLocal,
				StateHalfClosedRemote: StateClosed,
			}[from]
			if h.StateLocked() != want {
				t.Errorf("%s with END_STREAM in %v: now %v, want %v", tt.name, from, h.StateLocked(), want)
			}
			fs := outFrames(t, c)
			if len(fs) != 1 || !endsStream(fs[0]) {
				t.Errorf("%s with END_STREAM in %v: wrote %v, want one frame ending the stream", tt.name, from, fs)
			}
		}
	}

	// Queued behind the window: not ended until written.
	for _, from := range []State{StateOpen, StateHalfClosedRemote} {
		c := newTestConn(t, testConfig())
		h := c.AddHalfLocked(1, nil)
		h.state = from
		h.send = outflow{n: 10}
		c.WriteDataLocked(h, make([]byte, 30), false, false, nil)
		c.WriteHeadersLocked(h, []hpackField{{Name: "grpc-status", Value: "0"}}, true)
		if h.StateLocked() != from {
			t.Fatalf("END_STREAM queued in %v: now %v, before it was written", from, h.StateLocked())
		}
		if _, err := c.OnControl(readFrame(t, func(fr *http2.Framer) error { return fr.WriteWindowUpdate(1, 10) }), &Batch{}); err != nil {
			t.Fatal(err)
		}
		if h.StateLocked() != from {
			t.Fatalf("END_STREAM still queued in %v: now %v", from, h.StateLocked())
		}
		if _, err := c.OnControl(readFrame(t, func(fr *http2.Framer) error { return fr.WriteWindowUpdate(1, 10) }), &Batch{}); err != nil {
			t.Fatal(err)
		}
		want := map[State]State{StateOpen: StateHalfClosedLocal, StateHalfClosedRemote: StateClosed}[from]
		if h.StateLocked() != want {
			t.Fatalf("END_STREAM written in %v: now %v, want %v", from, h.StateLocked(), want)
		}
		fs := outFrames(t, c)
		var ends int
		for _, f := range fs {
			if endsStream(f) {
				ends++
			}
		}
		if ends != 1 {
			t.Fatalf("%d frames ended the stream, want 1: %v", ends, fs)
		}
	}
}

// The ways through RFC 9113 5.1's states a stream takes in the relay, as a
// server (the peer opens it) and as a client (we open it), each step
// through the codec's methods. Idle is a stream the connection has no Half
// for; closed and forgotten is idle's ID with no Half again.
func TestStreamLifecycles(t *testing.T) {
	type step struct {
		name string
		do   func(c *Conn, h *Half) error
		want State
	}
	peerHeaders := func(end bool) func(*Conn, *Half) error {
		return func(c *Conn, h *Half) error { return c.PeerHeadersLocked(h, end) }
	}
	peerData := func(end bool) func(*Conn, *Half) error {
		return func(c *Conn, h *Half) error { return c.TakeDataLocked(h, 10, end) }
	}
	ourHeaders := func(end bool) func(*Conn, *Half) error {
		return func(c *Conn, h *Half) error {
			c.WriteHeadersLocked(h, []hpackField{{Name: ":status", Value: "200"}}, end)
			return nil
		}
	}
	ourData := func(end bool) func(*Conn, *Half) error {
		return func(c *Conn, h *Half) error { c.WriteDataLocked(h, []byte("x"), end, false, nil); return nil }
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"server: a request with a body, then the answer", []step{
			{"recv HEADERS", peerHeaders(false), StateOpen},
			{"recv DATA", peerData(false), StateOpen},
			{"recv DATA+END_STREAM", peerData(true), StateHalfClosedRemote},
			{"send HEADERS", ourHeaders(false), StateHalfClosedRemote},
			{"send DATA", ourData(false), StateHalfClosedRemote},
			{"send trailers", ourHeaders(true), StateClosed},
		}},
		{"server: a request of headers only", []step{
			{"recv HEADERS+END_STREAM", peerHeaders(true), StateHalfClosedRemote},
			{"send HEADERS+END_STREAM", ourHeaders(true), StateClosed},
		}},
		{"server: the answer ends before the request does", []step{
			{"recv HEADERS", peerHeaders(false), StateOpen},
			{"send HEADERS+END_STREAM", ourHeaders(true), StateHalfClosedLocal},
			{"recv DATA", peerData(false), StateHalfClosedLocal},
			{"recv trailers", peerHeaders(true), StateClosed},
		}},
		{"client: a request, then the answer", []step{
			{"send HEADERS", ourHeaders(false), StateOpen},
			{"send DATA+END_STREAM", ourData(true), StateHalfClosedLocal},
			{"recv HEADERS", peerHeaders(false), StateHalfClosedLocal},
			{"recv DATA", peerData(false), StateHalfClosedLocal},
			{"recv trailers", peerHeaders(true), StateClosed},
		}},
		{"client: the answer before the request ended", []step{
			{"send HEADERS", ourHeaders(false), StateOpen},
			{"recv HEADERS", peerHeaders(false), StateOpen},
			{"recv DATA+END_STREAM", peerData(true), StateHalfClosedRemote},
			{"send DATA", ourData(false), StateHalfClosedRemote},
			{"send empty DATA+END_STREAM", func(c *Conn, h *Half) error {
				c.WriteDataLocked(h, nil, true, false, nil)
				return nil
			}, StateClosed},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newTestConn(t, testConfig())
			if c.HalfLocked(1) != nil {
				t.Fatal("stream 1 is not idle")
			}
			h := c.AddHalfLocked(1, nil)
			if c.HalfLocked(1) != h || h.StateLocked() != StateOpen {
				t.Fatalf("a new stream: %v", h.StateLocked())
			}
			for _, s := range tt.steps {
				if err := s.do(c, h); err != nil {
					t.Fatalf("%s: %v", s.name, err)
				}
				if h.StateLocked() != s.want {
					t.Fatalf("%s: %v, want %v", s.name, h.StateLocked(), s.want)
				}
			}
			// Closed: any more from the peer is refused.
			wantStreamClosed(t, c.PeerHeadersLocked(h, true), 1)
			wantStreamClosed(t, c.TakeDataLocked(h, 1, false), 1)
			h.ForgetAfterQueueLocked()
			if !h.GoneLocked() || c.HalfLocked(1) != nil || c.OpenLocked() != 0 {
				t.Fatal("a closed stream with nothing queued is not forgotten")
			}
		})
	}
}

// A stream whose last frames wait for window is forgotten once they are
// written, not before.
func TestForgetAfterQueue(t *testing.T) {
	c := newTestConn(t, testConfig())
	h := c.AddHalfLocked(1, nil)
	h.send = outflow{n: 0}
	c.WriteDataLocked(h, []byte("held"), true, false, nil)
	h.ForgetAfterQueueLocked()
	if h.GoneLocked() || c.HalfLocked(1) != h {
		t.Fatal("forgotten with its data still queued")
	}
	if _, err := c.OnControl(readFrame(t, func(fr *http2.Framer) error { return fr.WriteWindowUpdate(1, 4) }), &Batch{}); err != nil {
		t.Fatal(err)
	}
	if !h.GoneLocked() || c.HalfLocked(1) != nil {
		t.Fatal("not forgotten once its queue was written")
	}
	if h.StateLocked() != StateHalfClosedLocal {
		t.Fatalf("state %v, want half-closed (local)", h.StateLocked())
	}
}
