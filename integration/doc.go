// Package integration holds end-to-end tests that build and start the real
// binaries (simserver, infergate, and bench for its attacks) on loopback and drive them over gRPC and
// HTTP, with real tools (promtool) where users would use them. It has no
// non-test code beyond this comment.
package integration
