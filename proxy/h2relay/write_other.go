//go:build !unix

package h2relay

import (
	"net"
	"syscall"
)

// tryWrite leaves every write to the flusher where the socket cannot be
// written without blocking.
func tryWrite(syscall.RawConn, []byte) (int, error) { return 0, nil }

func tryWritev(syscall.RawConn, [][]byte) (int, error) { return 0, nil }

func rawConn(net.Conn) syscall.RawConn { return nil }
