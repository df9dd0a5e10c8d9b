package h2codec

import "golang.org/x/net/http2"

// State is a stream's state from one connection's side, as RFC 9113 5.1
// names it. A stream the codec holds is never idle (it has no Half until
// its HEADERS) and is forgotten once closed and written out, so a Half is
// in one of these four.
type State uint8

const (
	// StateOpen: both sides may still send.
	StateOpen State = iota
	// StateHalfClosedLocal: we sent END_STREAM; the peer may still send.
	StateHalfClosedLocal
	// StateHalfClosedRemote: the peer sent END_STREAM; we may still send.
	StateHalfClosedRemote
	// StateClosed: both sides sent END_STREAM.
	StateClosed
)

func (s State) String() string {
	switch s {
	case StateOpen:
		return "open"
	case StateHalfClosedLocal:
		return "half-closed (local)"
	case StateHalfClosedRemote:
		return "half-closed (remote)"
	case StateClosed:
		return "closed"
	}
	return "State(?)"
}

// remoteEnded says whether the peer sent END_STREAM.
func (s State) remoteEnded() bool { return s == StateHalfClosedRemote || s == StateClosed }

// endLocal notes that we sent END_STREAM on h.
func (h *Half) endLocal() {
	switch h.state {
	case StateOpen:
		h.state = StateHalfClosedLocal
	case StateHalfClosedRemote:
		h.state = StateClosed
	}
}

// endRemote notes that the peer sent END_STREAM on h.
func (h *Half) endRemote() {
	switch h.state {
	case StateOpen:
		h.state = StateHalfClosedRemote
	case StateHalfClosedLocal:
		h.state = StateClosed
	}
}

// errStreamClosed is the stream error for a frame the peer sent after its
// END_STREAM (RFC 9113 5.1, half-closed (remote)).
func errStreamClosed(h *Half) error {
	return http2.StreamError{StreamID: h.id, Code: http2.ErrCodeStreamClosed}
}

// PeerHeadersLocked takes in a HEADERS frame the peer sent on h (trailers,
// or a request's headers once h is added), end saying it carried
// END_STREAM. HEADERS after the peer's END_STREAM are a stream error.
func (c *Conn) PeerHeadersLocked(h *Half, end bool) error {
	if h.state.remoteEnded() {
		return errStreamClosed(h)
	}
	if end {
		h.endRemote()
	}
	return nil
}
