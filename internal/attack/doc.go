// Package attack is a set of misbehaving HTTP/2 clients for testing a gRPC
// front door: each attack opens its own connections, writes raw frames
// with x/net/http2's Framer and hpack (or, for BigUploads, runs ordinary
// grpc-go clients), and returns a Report of what it sent and how the
// server answered: the GOAWAY and when it came, the RST_STREAM codes, when
// the connection ended.
//
// The attacks are the loads infergate's front door is tested against
// (CVE-2023-44487's rapid reset with request bodies, zero-length streams, held streams,
// never-read answers, a huge length prefix, a malformed neighbour, big
// concurrent uploads). They aim at a KServe v2 server (Triton, simserver)
// or a proxy in front of one, and are meant for loopback targets only.
//
// An attack's error return means it could not run (the dial failed); a
// server that defends itself by resetting streams or closing the
// connection is not an error but what the Report describes.
package attack
