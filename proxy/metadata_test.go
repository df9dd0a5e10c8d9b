package proxy

import (
	"context"
	"reflect"
	"testing"

	"google.golang.org/grpc/metadata"
)

func TestOutgoingContext(t *testing.T) {
	hop := metadata.Pairs(":authority", "proxy:8001", "content-type", "application/grpc+proto",
		"user-agent", "grpc-go/1.85.0", "te", "trailers", "grpc-accept-encoding", "gzip")
	for _, tc := range []struct {
		name     string
		incoming metadata.MD
		// stale is outgoing metadata already on the server's context.
		stale       metadata.MD
		want        metadata.MD // nil: no outgoing metadata at all
		wantSubtype string
	}{
		{name: "only hop headers", incoming: hop, wantSubtype: "proto"},
		{name: "forwarded keys", incoming: metadata.Join(hop, metadata.Pairs("x-foo", "a", "x-foo", "b", "x-bin-bin", "\x00\xff")),
			want: metadata.Pairs("x-foo", "a", "x-foo", "b", "x-bin-bin", "\x00\xff"), wantSubtype: "proto"},
		{name: "stale outgoing metadata is replaced", incoming: hop, stale: metadata.Pairs("x-stale", "1"),
			want: metadata.MD{}, wantSubtype: "proto"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := metadata.NewIncomingContext(context.Background(), tc.incoming)
			if tc.stale != nil {
				ctx = metadata.NewOutgoingContext(ctx, tc.stale)
			}
			out, subtype := outgoingContext(ctx)
			got, ok := metadata.FromOutgoingContext(out)
			if ok != (tc.want != nil) || (ok && !reflect.DeepEqual(got, tc.want)) {
				t.Errorf("outgoing metadata %v (set: %v), want %v (set: %v)", got, ok, tc.want, tc.want != nil)
			}
			if subtype != tc.wantSubtype {
				t.Errorf("content-subtype %q, want %q", subtype, tc.wantSubtype)
			}
		})
	}
}
