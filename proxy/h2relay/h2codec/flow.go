package h2codec

// HTTP/2 flow control, kept in two types as x/net/http2 keeps it in
// flow.go: what we may send (outflow) and what we let the peer send
// (inflow), for a connection and for each of its streams alike. Every
// window the codec keeps is one of these; nothing else adds to or takes
// from a window.

// maxWindow is the largest window RFC 9113 6.9.1 allows.
const maxWindow = 1<<31 - 1

// outflow is a send window: what the peer has let us send and we have not
// sent yet.
type outflow struct {
	n int64
}

// available is what may be sent now; negative after the peer shrank its
// initial window below what was in flight (RFC 9113 6.9.2).
func (f *outflow) available() int64 { return f.n }

// take spends n bytes of the window; the caller checked available.
func (f *outflow) take(n int64) { f.n -= n }

// add widens the window by n (a WINDOW_UPDATE, or a change of the peer's
// initial window, which may be negative). It reports false when the
// window passed maxWindow: a flow-control error.
func (f *outflow) add(n int64) bool {
	f.n += n
	return f.n <= maxWindow
}

// inflow is a receive window: what the peer may still send (avail), and
// what it sent that we are done with but have not granted again yet
// (unacked). Updates go out in batches, as gRPC's transports send them, so
// a small call costs no WINDOW_UPDATE frame.
type inflow struct {
	avail, unacked int64
}

// init sets the window the peer starts with.
func (f *inflow) init(n int64) { f.avail = n }

// take accounts for n bytes received. It reports false when the peer
// sent more than it was granted: a flow-control error.
func (f *inflow) take(n int64) bool {
	f.avail -= n
	return f.avail >= 0
}

// release hands n received bytes back and returns the increment to send
// now: zero until what is owed reaches batch.
func (f *inflow) release(n, batch int64) int64 {
	f.unacked += n
	if f.unacked < batch {
		return 0
	}
	return f.grant(0)
}

// grant opens the window by extra at once, with whatever is owed, and
// returns the increment to send.
func (f *inflow) grant(extra int64) int64 {
	d := f.unacked + extra
	f.avail += d
	f.unacked = 0
	return d
}
