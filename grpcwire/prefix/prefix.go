// Package prefix is the 5-byte prefix gRPC puts before each message on
// the wire: a compressed flag and a 4-byte big-endian length. It imports
// nothing, so that the readers of raw messages (proto/wire's scanner,
// which may import only protobuf) read it here too; package grpcwire
// builds the rest of gRPC's wire on it.
package prefix

// Len is the length of the prefix.
const Len = 5

// Read reads the prefix at the start of b: its compressed flag (0 or 1;
// any other value is a malformed prefix) and the message's length. ok is
// false when b is shorter than a prefix.
func Read(b []byte) (flag byte, n uint32, ok bool) {
	if len(b) < Len {
		return 0, 0, false
	}
	return b[0], uint32(b[1])<<24 | uint32(b[2])<<16 | uint32(b[3])<<8 | uint32(b[4]), true
}

// Put writes the prefix of an uncompressed message of n bytes into
// b[:Len].
func Put(b []byte, n int) {
	b[0] = 0
	b[1], b[2], b[3], b[4] = byte(n>>24), byte(n>>16), byte(n>>8), byte(n)
}
