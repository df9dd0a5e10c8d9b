package sim

import (
	"context"
	"testing"
)

// BenchmarkIdentityDirect measures the server's own cost for an
// identity_fp32 call of 16 KiB (no gRPC), so benchmarks through a proxy
// know how little simserver adds.
func BenchmarkIdentityDirect(b *testing.B) {
	srv, err := New(Config{SampleInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	req := identityRequest(seq(4096, 0, 1))
	ctx := context.Background()
	b.SetBytes(4 * 4096)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := srv.modelInfer(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkIdentityGRPC is the same call over loopback gRPC.
func BenchmarkIdentityGRPC(b *testing.B) {
	h := start(b, Config{})
	req := identityRequest(seq(4096, 0, 1))
	ctx := context.Background()
	b.SetBytes(4 * 4096)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := h.ks.ModelInfer(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}
