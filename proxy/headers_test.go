package proxy

import (
	"encoding/base64"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"golang.org/x/net/http2/hpack"

	"github.com/infergate/infergate/batcher"
	"github.com/infergate/infergate/grpcwire"
	"github.com/infergate/infergate/internal/h2raw"
	"github.com/infergate/infergate/proxy/route"
)

// headerRecorder is a model server that keeps the request header fields of
// every ModelInfer call it gets as they came on the wire: Go's HTTP/2
// server reads them, grpc-go's server (ServeHTTP) answers the call.
type headerRecorder struct {
	mu    sync.Mutex
	calls []map[string][]string
}

// startHeaderRecorder serves the test backend behind a headerRecorder
// until the test ends and returns the recorder and its address.
func startHeaderRecorder(t *testing.T) (*headerRecorder, string) {
	t.Helper()
	_, srv := newBackend()
	hr := &headerRecorder{}
	var protos http.Protocols
	protos.SetUnencryptedHTTP2(true)
	hs := &http.Server{Protocols: &protos, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/inference.GRPCInferenceService/ModelInfer" {
			got := make(map[string][]string, len(r.Header)+1)
			for k, v := range r.Header {
				got[strings.ToLower(k)] = v
			}
			got[":authority"] = []string{r.Host}
			hr.mu.Lock()
			hr.calls = append(hr.calls, got)
			hr.mu.Unlock()
		}
		srv.ServeHTTP(w, r)
	})}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = hs.Serve(lis) }()
	t.Cleanup(func() {
		_ = hs.Close()
		srv.Stop()
	})
	return hr, lis.Addr().String()
}

// last returns the fields of the last call recorded.
func (hr *headerRecorder) last(t *testing.T) map[string][]string {
	t.Helper()
	hr.mu.Lock()
	defer hr.mu.Unlock()
	if len(hr.calls) == 0 {
		t.Fatal("the upstream got no ModelInfer call")
	}
	return hr.calls[len(hr.calls)-1]
}

// TestHeadersSameUpstreamOnEveryDoor sends one call, as a gRPC client of
// another language sends it, forwarded, batched, routed and traced, and
// compares what the upstream received (grpcwire/headers.go, the header
// policy). The doors agree on every field but those the policy names:
// user-agent (the served door's is grpc-go's own), grpc-timeout (the time
// left), a merged call's batch id and a traced call's traceparent.
func TestHeadersSameUpstreamOnEveryDoor(t *testing.T) {
	hr, addr := startHeaderRecorder(t)
	const (
		clientUA  = "grpc-python/1.71.0 grpc-c/46.0.0 (linux; chttp2)"
		traceID   = "4bf92f3577b34da6a3ce929d0e0e4736"
		clientTP  = "00-" + traceID + "-00f067aa0ba902b7-01"
		method    = "/inference.GRPCInferenceService/ModelInfer"
		blobValue = "\x00\x01\xfe\xff"
	)
	newUp := func() *Upstream {
		up, err := DialUpstream(addr, UpstreamOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = up.Close() })
		return up
	}
	doors := []struct {
		name   string
		served bool // through the pipeline even with the relay on
		opts   func(up *Upstream) []Option
	}{
		{"forwarded", false, func(*Upstream) []Option { return nil }},
		{"batched", true, func(*Upstream) []Option {
			b, err := batcher.New(batcher.Config{Models: map[string]batcher.Policy{
				"simple": {Mode: batcher.Static, MaxSize: 4, MaxDelay: time.Millisecond}}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = b.Close() })
			return []Option{WithBatcher(b)}
		}},
		{"routed", true, func(up *Upstream) []Option {
			edge := newUp()
			r, err := route.NewRouter(route.RouterOptions{
				Routes:   []route.RouteConfig{{Model: "simple", Upstream: up, Fallback: &route.FallbackTarget{Upstream: edge, Model: "simple"}, HedgeAfter: -1}},
				Breakers: map[route.Upstream]BreakerConfig{up: {}},
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = r.Close() })
			return []Option{WithRouter(r)}
		}},
		{"traced", true, func(*Upstream) []Option {
			return []Option{WithTracing(sdktrace.NewTracerProvider(), propagation.TraceContext{}, SemconvOld)}
		}},
	}
	body := mustMarshal(t, simpleRequest("simple", 64))
	msg := make([]byte, 5+len(body))
	grpcwire.PutPrefix(msg, len(body))
	copy(msg[5:], body)

	got := map[string]map[string][]string{}
	for _, d := range doors {
		up := newUp()
		p, err := New(StaticDirector(up), append([]Option{WithRecorder(newFakeRecorder())}, d.opts(up)...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Close() })
		front := serveFront(t, p, p.NewServer())

		c, err := h2raw.Dial(ctxT(t), front, h2raw.Options{Decode: true})
		if err != nil {
			t.Fatal(err)
		}
		fields := append(h2raw.RequestHeaders(front, method, clientUA),
			hpack.HeaderField{Name: "grpc-accept-encoding", Value: "identity,deflate,gzip"},
			hpack.HeaderField{Name: "grpc-encoding", Value: "identity"},
			hpack.HeaderField{Name: "grpc-timeout", Value: "10S"},
			hpack.HeaderField{Name: "x-tenant", Value: "team-a"},
			hpack.HeaderField{Name: "x-priority", Value: "high"},
			hpack.HeaderField{Name: "x-request-id", Value: "rid-1"},
			hpack.HeaderField{Name: "x-custom", Value: "a"},
			hpack.HeaderField{Name: "x-custom", Value: "b"},
			hpack.HeaderField{Name: "x-blob-bin", Value: base64.RawStdEncoding.EncodeToString([]byte(blobValue))},
			hpack.HeaderField{Name: "traceparent", Value: clientTP},
		)
		err = c.Call(ctxT(t), 1, fields, msg)
		st := c.Stream(1)
		c.Close()
		if err != nil || st.Status != "0" {
			t.Fatalf("%s: call ended with %v, grpc-status %q %q", d.name, err, st.Status, st.Message)
		}
		h := maps.Clone(hr.last(t))

		// What the policy lets differ, checked and set aside.
		if len(h["grpc-timeout"]) != 1 {
			t.Errorf("%s: grpc-timeout %q, want the time left", d.name, h["grpc-timeout"])
		}
		delete(h, "grpc-timeout")
		ua := h["user-agent"]
		if !d.served && !grpcPathOnly {
			if !slices.Equal(ua, []string{clientUA}) {
				t.Errorf("%s: user-agent %q, want the client's %q", d.name, ua, clientUA)
			}
		} else if len(ua) != 1 || !strings.HasPrefix(ua[0], "grpc-go/") {
			// grpc-go writes its own; see the policy.
			t.Errorf("%s: user-agent %q, want grpc-go's own", d.name, ua)
		}
		delete(h, "user-agent")
		if d.name == "batched" {
			delete(h, grpcwire.HeaderBatchID)
		}
		if d.name == "traced" {
			if tp := h["traceparent"]; len(tp) != 1 || !strings.Contains(tp[0], traceID) || tp[0] == clientTP {
				t.Errorf("traced: traceparent %q, want the proxy's span in the client's trace", tp)
			}
			delete(h, "traceparent")
		}
		got[d.name] = h
	}

	want := got["forwarded"]
	for k, v := range map[string][]string{
		":authority":           {addr},
		"content-type":         {"application/grpc"},
		"te":                   {"trailers"},
		"grpc-accept-encoding": {"gzip"},
		"x-tenant":             {"team-a"},
		"x-priority":           {"high"},
		"x-request-id":         {"rid-1"},
		"x-custom":             {"a", "b"},
		"x-blob-bin":           {base64.RawStdEncoding.EncodeToString([]byte(blobValue))},
	} {
		if !slices.Equal(want[k], v) {
			t.Errorf("forwarded: %s %q, want %q", k, want[k], v)
		}
	}
	if v, ok := want["grpc-encoding"]; ok {
		t.Errorf("forwarded: grpc-encoding %q, want none (an uncompressed call, as the served door sends it)", v)
	}
	for _, d := range doors[1:] {
		h := got[d.name]
		for _, k := range slices.Sorted(maps.Keys(mergeKeys(want, h))) {
			if d.name == "traced" && k == "traceparent" {
				continue // checked above
			}
			if !slices.Equal(h[k], want[k]) {
				t.Errorf("%s: upstream got %s %q, forwarded %q", d.name, k, h[k], want[k])
			}
		}
	}
}

// mergeKeys is the set of keys of a and b.
func mergeKeys(a, b map[string][]string) map[string]bool {
	m := make(map[string]bool, len(a)+len(b))
	for k := range a {
		m[k] = true
	}
	for k := range b {
		m[k] = true
	}
	return m
}
