package proxy

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/grpc/metadata"

	"github.com/infergate/infergate/grpcwire"
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

// Affinity, tenant and priority headers are checked as header names a
// client may send as metadata of its own.
func TestAffinityHeaderChecked(t *testing.T) {
	for _, ok := range []string{"", "x-session-id", "X-Session-Id", "tenant_key"} {
		if err := grpcwire.CheckClientHeader(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{":authority", "grpc-timeout", "content-type", "te", "x-id-bin", "x session", "x-é"} {
		if err := grpcwire.CheckClientHeader(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	_, errs := planYAML(t, "upstream: a:1,b:1\naffinity_header: grpc-timeout\n")
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "affinity_header") {
		t.Errorf("a reserved affinity header: %v, want one error naming affinity_header", errs)
	}
}
