package h2codec

import (
	"errors"
	"io"
	"sync/atomic"
)

// readBuf is a connection's read buffer: bufio.Reader's Peek, Discard and
// Read, on a small buffer that a big one replaces while the peer sends
// faster than the connection is read.
//
// Why: a big tensor crosses the relay as 16 KiB frames (gRPC's peers send
// HTTP/2's default frame size). Read 64 KiB at a time, a 1 MiB message
// cost 16 read(2) calls each way plus a slide of the partial frame left at
// the end of each read; read 512 KiB at a time, it costs a few, and the
// proxy spends a sixth less CPU on a 1 MiB call. A big buffer for every
// connection would be held by idle ones too, so a connection takes one
// when a read fills its small buffer, gives it back after a run of reads
// that find little, and at most maxBigBufs are out at once.
type readBuf struct {
	src   io.Reader
	buf   []byte // small or big
	small []byte // the connection's own buffer, kept while big is in use
	r, w  int
	// full: the last read filled the free space (the peer has more).
	full bool
	// littleRun counts reads in a row that took less than small holds.
	littleRun int
	err       error
}

const (
	// BigBufSize is the read buffer a connection takes while its peer
	// sends faster than it reads.
	BigBufSize = 512 << 10
	// maxBigBufs bounds the big buffers out at once (32 MiB): past it,
	// connections read with their small ones, as all did before.
	maxBigBufs = 64
	// shrinkAfter is how many little reads in a row give a big buffer
	// back; not the first, or a busy connection would swap buffers
	// between calls.
	shrinkAfter = 16
)

var (
	bigOut  atomic.Int32
	bigFree = make(chan []byte, 16) // not a sync.Pool: GC empties those
)

func takeBig() []byte {
	if bigOut.Add(1) > maxBigBufs {
		bigOut.Add(-1)
		return nil
	}
	select {
	case b := <-bigFree:
		return b
	default:
		return make([]byte, BigBufSize)
	}
}

func giveBig(b []byte) {
	bigOut.Add(-1)
	select {
	case bigFree <- b:
	default:
	}
}

func newReadBuf(src io.Reader, size int) *readBuf {
	b := make([]byte, size)
	return &readBuf{src: src, buf: b, small: b}
}

// Buffered is how many bytes can be read without a read(2).
func (b *readBuf) Buffered() int { return b.w - b.r }

// Size is the largest Peek that can succeed now.
func (b *readBuf) Size() int { return len(b.buf) }

func (b *readBuf) big() bool { return len(b.buf) != len(b.small) }

// startBig makes the first read take a big buffer (if one is free), as if
// a read had filled the small one: for a connection known to carry many
// streams' data.
func (b *readBuf) startBig() { b.full = true }

// release gives a big buffer back; the reader calls it as it ends.
func (b *readBuf) release() {
	if b.big() {
		giveBig(b.buf)
		b.buf, b.r, b.w = b.small, 0, 0
	}
}

// fill reads once from src into the free end of the buffer, which keeps
// room for need bytes.
func (b *readBuf) fill(need int) error {
	if b.err != nil {
		return b.err
	}
	n := b.w - b.r
	switch {
	case b.big() && n == 0 && b.littleRun >= shrinkAfter && need <= len(b.small):
		b.release()
	case !b.big() && b.full && len(b.small) < BigBufSize:
		if nb := takeBig(); nb != nil {
			copy(nb, b.buf[b.r:b.w])
			b.buf, b.r, b.w = nb, 0, n
			b.littleRun = 0
			break
		}
		fallthrough
	case b.r > 0:
		copy(b.buf, b.buf[b.r:b.w])
		b.r, b.w = 0, n
	}
	free := len(b.buf) - b.w
	k, err := b.src.Read(b.buf[b.w:])
	k = max(k, 0)
	b.w += k
	b.full = k == free
	if k < len(b.small) {
		b.littleRun++
	} else {
		b.littleRun = 0
	}
	if err != nil {
		b.err = err
		if k > 0 {
			return nil
		}
		return err
	}
	if k == 0 {
		return io.ErrNoProgress
	}
	return nil
}

// Peek returns the next n bytes without consuming them; they stay valid
// until the next Peek or Read.
func (b *readBuf) Peek(n int) ([]byte, error) {
	if n < 0 || n > len(b.buf) {
		return nil, errors.New("h2codec: peek beyond the read buffer")
	}
	for b.w-b.r < n {
		if err := b.fill(n); err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
	}
	return b.buf[b.r : b.r+n], nil
}

// Discard skips the next n bytes, which must be buffered (Peek first).
func (b *readBuf) Discard(n int) {
	b.r += min(n, b.w-b.r)
}

// Read reads what is buffered, or reads once from src when nothing is.
func (b *readBuf) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if b.r == b.w {
		if err := b.fill(0); err != nil {
			return 0, err
		}
	}
	n := copy(p, b.buf[b.r:b.w])
	b.r += n
	return n, nil
}

// wholeFrame says whether the buffer holds a whole HTTP/2 frame, header
// and payload: when it does not, the next read may block, so what the
// reader has for others must go first.
func (b *readBuf) wholeFrame() bool {
	n := b.w - b.r
	if n < 9 {
		return false
	}
	l := int(b.buf[b.r])<<16 | int(b.buf[b.r+1])<<8 | int(b.buf[b.r+2])
	return n >= 9+l
}
