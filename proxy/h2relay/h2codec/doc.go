// Package h2codec is the relay's HTTP/2 codec: one connection, either
// side, with its frames, flow control, stream states and HPACK, and
// nothing of gRPC or of what the relay decides.
//
// The relay is an HTTP/2 implementation of its own, so the codec keeps
// HTTP/2's rules on both sides: flow control windows in both directions (a
// stream's window is granted to the sender only once the data left for the
// other side, so a slow reader on either end holds back its own streams
// and no others; a connection's window is granted as data arrives, as
// grpc-go does, so those held-back streams cannot use up a shared
// connection's), the peers' frame size, header table size and
// concurrent-stream limits, SETTINGS, PING, GOAWAY and RST_STREAM. Headers
// are decoded and encoded again (each connection has its own HPACK state);
// their fields pass unchanged except :authority (the upstream's) and
// grpc-timeout (the time left).
//
// A write never blocks the goroutine that makes it: bytes go to the
// connection's buffer, one non-blocking write(2) is tried at once, and
// only what the kernel did not take is left to a flusher goroutine. So a
// client that stops reading cannot stall the shared upstream reader, and
// through it everyone else.
//
// Big messages are what a relay pays for in copies. DATA payloads are read
// in place from the connection's read buffer, which grows from 64 KiB to
// 512 KiB while the peer sends faster than it is read (readbuf.go; at most
// 64 such buffers at once). Data the relay owns, a request read whole or
// frames queued for window, goes to the kernel by writev from its own
// memory when nothing else is being written (writeVecLocked); other frames
// are copied into the output buffer and written together.
package h2codec
