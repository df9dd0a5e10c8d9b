//go:build unix

package h2relay

import (
	"errors"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// tryWrite writes what the kernel takes of b at once, without blocking:
// one write(2) on the non-blocking socket. It returns 0 and no error when
// the socket buffer is full, and falls back to 0 (the flusher's blocking
// write) for connections without a file descriptor.
func tryWrite(rc syscall.RawConn, b []byte) (int, error) { return tryWriteAny(rc, b, nil) }

// tryWritev is tryWrite for several buffers: one writev(2).
func tryWritev(rc syscall.RawConn, bufs [][]byte) (int, error) { return tryWriteAny(rc, nil, bufs) }

func tryWriteAny(rc syscall.RawConn, b []byte, bufs [][]byte) (int, error) {
	if rc == nil {
		return 0, nil
	}
	var n int
	var werr error
	if err := rc.Write(func(fd uintptr) bool {
		for {
			if bufs != nil {
				n, werr = unix.Writev(int(fd), bufs)
			} else {
				n, werr = syscall.Write(int(fd), b)
			}
			if !errors.Is(werr, syscall.EINTR) {
				return true
			}
		}
	}); err != nil {
		return 0, err
	}
	if n < 0 {
		n = 0
	}
	if werr != nil && !errors.Is(werr, syscall.EAGAIN) {
		return n, werr
	}
	return n, nil
}

// rawConn returns nc's raw connection for tryWrite, or nil.
func rawConn(nc net.Conn) syscall.RawConn {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	return rc
}
