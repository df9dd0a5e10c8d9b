package proxy

import (
	"context"

	"google.golang.org/grpc/metadata"

	"github.com/infergate/infergate/grpcwire"
)

// outgoingContext returns ctx with the client's metadata set as the
// upstream call's, the keys the header policy passes
// (grpcwire.MetadataPasses), and the client's content-subtype ("" for
// plain "application/grpc"). Everything else, binary "-bin" keys and
// tracing keys included, passes unchanged. ctx keeps its deadline, so
// gRPC sends the remaining time upstream as grpc-timeout.
func outgoingContext(ctx context.Context) (context.Context, string) {
	md, ok := metadata.FromIncomingContext(ctx) // a copy, ours to edit
	if !ok {
		return ctx, ""
	}
	var subtype string
	if ct := md["content-type"]; len(ct) > 0 {
		subtype = grpcwire.ContentSubtype(ct[0])
	}
	for k := range md {
		if !grpcwire.MetadataPasses(k) {
			delete(md, k)
		}
	}
	if len(md) == 0 {
		// Nothing to forward (a client that sends no metadata of its
		// own): ctx as it is saves two allocations per call, unless it
		// carries outgoing metadata the client's empty set must replace
		// (FromOutgoingContext allocates only when there is some).
		if _, ok := metadata.FromOutgoingContext(ctx); !ok {
			return ctx, subtype
		}
	}
	return metadata.NewOutgoingContext(ctx, md), subtype
}
