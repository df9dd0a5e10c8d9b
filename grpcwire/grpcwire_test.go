package grpcwire

import (
	"bytes"
	"testing"

	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/codes"
)

func frame(msg string, compressed bool) []byte {
	b := make([]byte, PrefixLen, PrefixLen+len(msg))
	PutPrefix(b, len(msg))
	if compressed {
		b[0] = 1
	}
	return append(b, msg...)
}

func TestMessages(t *testing.T) {
	one := frame("hello", false)
	if m, ok := OneMessage(one); !ok || string(m) != "hello" {
		t.Fatalf("OneMessage(one) = %q, %v", m, ok)
	}
	two := append(frame("a", false), frame("bc", false)...)
	for name, body := range map[string][]byte{
		"two":        two,
		"compressed": frame("x", true),
		"short":      one[:7],
		"prefix cut": one[:3],
		"empty":      nil,
	} {
		if _, ok := OneMessage(body); ok {
			t.Errorf("OneMessage(%s) accepted", name)
		}
	}
	if m, ok := FirstMessage(two); !ok || string(m) != "a" {
		t.Errorf("FirstMessage(two) = %q, %v", m, ok)
	}
	if m, ok := FirstMessage(frame("x", true)); !ok || string(m) != "x" {
		t.Errorf("FirstMessage(compressed) = %q, %v", m, ok)
	}
	for body, want := range map[string]int{"": 0, string(one): 1, string(two): 2, string(one[:7]): -1, string(append(two, 0)): 2} {
		if got := CountMessages([]byte(body)); got != want {
			t.Errorf("CountMessages(%q) = %d, want %d", body, got, want)
		}
	}
	if c, n, ok := ReadPrefix([]byte{1, 0, 0, 1, 2}); !ok || !c || n != 258 {
		t.Errorf("ReadPrefix = %v %d %v", c, n, ok)
	}
}

// A status written and read back is the status: codes, a message that
// needs percent-encoding, details, trailers-only or not.
func TestStatusRoundTrip(t *testing.T) {
	msg := "bad input: 100% of \"x\"\n — über"
	f := AppendStatus(nil, true, "proto", Status{Code: codes.InvalidArgument, Message: msg, Details: []byte{1, 2, 3}})
	want := []hpack.HeaderField{{Name: ":status", Value: "200"}, {Name: "content-type", Value: "application/grpc+proto"}, {Name: "grpc-status", Value: "3"}}
	for i, w := range want {
		if f[i] != w {
			t.Fatalf("field %d = %v, want %v", i, f[i], w)
		}
	}
	if f[3].Name != "grpc-message" || f[4].Name != "grpc-status-details-bin" || f[4].Value != "AQID" {
		t.Fatalf("fields %v", f)
	}
	code, got, ok := ReadStatus(f)
	if !ok || code != codes.InvalidArgument || got != msg {
		t.Fatalf("ReadStatus = %v %q %v", code, got, ok)
	}
	f = AppendStatus(nil, false, "", Status{Code: codes.OK})
	if len(f) != 1 || f[0].Value != "0" {
		t.Fatalf("OK trailers: %v", f)
	}
	if _, _, ok := ReadStatus([]hpack.HeaderField{{Name: "grpc-message", Value: "x"}}); ok {
		t.Fatal("no grpc-status read as a status")
	}
	if code, _, _ := ReadStatus([]hpack.HeaderField{{Name: "grpc-status", Value: "x"}}); code != codes.Unknown {
		t.Fatalf("malformed grpc-status read as %v", code)
	}
}

func TestMetadata(t *testing.T) {
	f := AppendMetadata(nil, map[string][]string{"x-a": {"1"}, "x-b-bin": {"\x00\xff"}, "grpc-status": {"0"}, ":path": {"/x"}})
	got := map[string]string{}
	for _, h := range f {
		got[h.Name] = h.Value
	}
	if len(got) != 2 || got["x-a"] != "1" || got["x-b-bin"] != "AP8" {
		t.Fatalf("AppendMetadata = %v", got)
	}
	if b, err := DecodeBinHeader("AP8"); err != nil || !bytes.Equal(b, []byte{0, 0xff}) {
		t.Fatalf("DecodeBinHeader unpadded = %v %v", b, err)
	}
	if b, err := DecodeBinHeader("AP8="); err != nil || !bytes.Equal(b, []byte{0, 0xff}) {
		t.Fatalf("DecodeBinHeader padded = %v %v", b, err)
	}
	for ct, want := range map[string]string{
		"application/grpc":        "",
		"application/grpc+proto":  "proto",
		"application/grpc;JSON":   "json",
		"application/grpc+":       "",
		"application/grpcx":       "",
		"text/plain":              "",
		"APPLICATION/GRPC+PROTO":  "proto",
		"application/grpc-web+pb": "",
	} {
		if got := ContentSubtype(ct); got != want {
			t.Errorf("ContentSubtype(%q) = %q, want %q", ct, got, want)
		}
	}
}
