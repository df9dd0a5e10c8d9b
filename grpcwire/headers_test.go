package grpcwire

import (
	"testing"

	"golang.org/x/net/http2/hpack"
	_ "google.golang.org/grpc/encoding/gzip" // a compressor to accept, as the proxy registers
)

func TestHeaderPolicyForwardField(t *testing.T) {
	for _, tc := range []struct {
		in, want string // want "": left out
	}{
		{":path", "v"}, {":authority", "v"}, {"content-type", "v"}, {"te", "v"}, {"user-agent", "v"},
		{"x-tenant", "v"}, {"x-infergate-batch-id", "v"}, {"traceparent", "v"}, {"x-blob-bin", "v"},
		{"grpc-previous-rpc-attempts", "v"},
		{"grpc-timeout", ""}, {"grpc-encoding", ""}, {"grpc-status", ""}, {"grpc-message", ""},
		{"grpc-message-type", ""}, {"grpc-status-details-bin", ""}, {"host", ""}, {"connection", ""},
	} {
		f, ok := ForwardField(hpack.HeaderField{Name: tc.in, Value: "v"})
		if ok != (tc.want != "") || ok && f.Value != tc.want {
			t.Errorf("ForwardField(%s) = %q, %v; want %q", tc.in, f.Value, ok, tc.want)
		}
		// The served door passes the client's metadata where the
		// forwarded door passes the field, but for the fields grpc-go
		// writes itself.
		own := tc.in[0] == ':' || tc.in == "content-type" || tc.in == "te" || tc.in == "user-agent"
		if MetadataPasses(tc.in) != (ok && !own) {
			t.Errorf("MetadataPasses(%s) = %v, ForwardField: %v", tc.in, !ok, ok)
		}
	}
}

func TestHeaderPolicyAcceptEncoding(t *testing.T) {
	for in, want := range map[string]string{
		"gzip":                    "gzip",
		"identity, deflate, gzip": "gzip",
		"identity,deflate,gzip":   "gzip",
		"deflate":                 "",
		"":                        "",
	} {
		for range 2 { // the second answer is the memo's
			if got := AcceptEncoding(in); got != want {
				t.Errorf("AcceptEncoding(%q) = %q, want %q", in, got, want)
			}
		}
		f, ok := ForwardField(hpack.HeaderField{Name: "grpc-accept-encoding", Value: in})
		if ok != (want != "") || f.Value != want && ok {
			t.Errorf("ForwardField(grpc-accept-encoding: %q) = %q, %v", in, f.Value, ok)
		}
		if MetadataPasses("grpc-accept-encoding") {
			t.Error("the served door's grpc-go client writes grpc-accept-encoding itself")
		}
	}
}
