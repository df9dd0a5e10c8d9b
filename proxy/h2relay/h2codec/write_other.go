//go:build !unix

package h2codec

import "net"

// rawWriter is nil where the socket cannot be written without blocking:
// every write is left to the flusher.
type rawWriter struct{}

func newRawWriter(net.Conn) *rawWriter { return nil }

func (*rawWriter) write([]byte) (int, error) { return 0, nil }

func (*rawWriter) writev([][]byte) (int, error) { return 0, nil }
