//go:build unix

package h2codec

import (
	"errors"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// rawWriter writes what the kernel takes at once, without blocking: one
// write(2) or writev(2) on the non-blocking socket. Its callback is bound
// once per connection, so a write allocates nothing (a closure over the
// buffers escaped to the heap on every write, the relay's most frequent
// allocation). It is used under its connection's lock. A nil rawWriter
// (a connection without a file descriptor) writes nothing and leaves
// every write to the flusher.
type rawWriter struct {
	rc   syscall.RawConn
	fn   func(fd uintptr) bool // w.run, bound once
	b    []byte
	bufs [][]byte
	n    int
	err  error
}

// newRawWriter returns nc's writer, or nil when nc has no descriptor.
func newRawWriter(nc net.Conn) *rawWriter {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	w := &rawWriter{rc: rc}
	w.fn = w.run
	return w
}

func (w *rawWriter) run(fd uintptr) bool {
	for {
		if w.bufs != nil {
			w.n, w.err = unix.Writev(int(fd), w.bufs)
		} else {
			w.n, w.err = syscall.Write(int(fd), w.b)
		}
		if !errors.Is(w.err, syscall.EINTR) {
			return true
		}
	}
}

// write writes what the kernel takes of b now. It returns 0 and no error
// when the socket buffer is full.
func (w *rawWriter) write(b []byte) (int, error) {
	if w == nil {
		return 0, nil
	}
	w.b = b
	return w.do()
}

// writev is write for several buffers: one writev(2).
func (w *rawWriter) writev(bufs [][]byte) (int, error) {
	if w == nil {
		return 0, nil
	}
	w.bufs = bufs
	return w.do()
}

func (w *rawWriter) do() (int, error) {
	w.n, w.err = 0, nil
	err := w.rc.Write(w.fn)
	n, werr := max(w.n, 0), w.err
	w.b, w.bufs, w.err = nil, nil, nil // hold no buffer past the write
	if err != nil {
		return 0, err
	}
	if werr != nil && !errors.Is(werr, syscall.EAGAIN) {
		return n, werr
	}
	return n, nil
}
