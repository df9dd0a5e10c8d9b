package tracing

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// The environment gives the defaults; a key the file or a flag sets wins.
func TestDefaultConfigFromEnvironment(t *testing.T) {
	env := map[string]string{
		"OTEL_TRACES_EXPORTER":        "otlp",
		"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
		"OTEL_TRACES_SAMPLER":         "parentbased_traceidratio",
		"OTEL_TRACES_SAMPLER_ARG":     "0.25",
		"OTEL_SERVICE_NAME":           "edge-gw",
	}
	c := DefaultConfig(func(k string) string { return env[k] })
	if !c.On() || c.Protocol != ProtocolGRPC || c.SampleRatio != 0.25 || c.ServiceName != "edge-gw" {
		t.Errorf("from the environment: %+v", c)
	}
	env["OTEL_SDK_DISABLED"] = "true"
	if c := DefaultConfig(func(k string) string { return env[k] }); c.On() {
		t.Error("OTEL_SDK_DISABLED=true: tracing on")
	}
	c = DefaultConfig(func(string) string { return "" })
	if c.On() || c.Protocol != ProtocolHTTP || c.SampleRatio != 1 || c.ServiceName != "infergate" || len(c.Problems()) != 0 {
		t.Errorf("no environment: %+v %v, want off, http/protobuf, all sampled, infergate", c, c.Problems())
	}
}

func TestProblems(t *testing.T) {
	c := Config{Protocol: "udp", Endpoint: "collector:4317", SampleRatio: 1.5, MaxSpansPerSecond: -1}
	var got []string
	for _, err := range c.Problems() {
		got = append(got, err.Error())
	}
	want := []string{
		`protocol: must be grpc or http/protobuf, got "udp"`,
		`endpoint: must be an http:// or https:// URL, got "collector:4317"`,
		`sample_ratio: must be between 0 and 1, got 1.5`,
		`max_spans_per_second: must be 0 (off) or a positive number, got -1`,
		`service_name: must not be empty`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// Over OTLP/HTTP, a collector's address without a path gets the traces
// path, and the spans arrive as protobuf with the service's name.
func TestHTTPExporterSendsSpans(t *testing.T) {
	var (
		mu   sync.Mutex
		got  []*coltracepb.ExportTraceServiceRequest
		path string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		req := new(coltracepb.ExportTraceServiceRequest)
		if err := proto.Unmarshal(b, req); err != nil {
			t.Errorf("not OTLP protobuf (%s): %v", r.Header.Get("Content-Type"), err)
		}
		mu.Lock()
		got, path = append(got, req), r.URL.Path
		mu.Unlock()
	}))
	defer srv.Close()
	c := DefaultConfig(func(string) string { return "" })
	c.Enabled, c.Endpoint, c.ServiceName = true, srv.URL, "gw-test"
	tr, err := Start(context.Background(), c, "v1.2.3")
	if err != nil {
		t.Fatal(err)
	}
	_, span := tr.Provider.Tracer("test").Start(context.Background(), "one")
	span.End()
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) == 0 || path != "/v1/traces" {
		t.Fatalf("collector got %d exports at %q, want some at /v1/traces", len(got), path)
	}
	rs := got[0].ResourceSpans[0]
	var service string
	for _, kv := range rs.Resource.Attributes {
		if kv.Key == "service.name" {
			service = kv.Value.GetStringValue()
		}
	}
	if service != "gw-test" || rs.ScopeSpans[0].Spans[0].Name != "one" {
		t.Errorf("got service %q, spans %v", service, rs.ScopeSpans[0].Spans)
	}
}

// A reload's sampler settings apply to the next span without a new
// provider: what a running proxy's tracer (taken once) samples changes.
func TestSetSamplerAppliesToNewSpans(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	c := DefaultConfig(func(string) string { return "" })
	c.Enabled, c.Endpoint, c.SampleRatio = true, srv.URL, 0
	tr, err := Start(context.Background(), c, "test")
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Shutdown(context.Background())
	tracer := tr.Provider.Tracer("test")
	sampledParent := trace.ContextWithRemoteSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1}, SpanID: trace.SpanID{1}, TraceFlags: trace.FlagsSampled, Remote: true}))
	sampled := func(ctx context.Context) bool {
		_, span := tracer.Start(ctx, "call")
		defer span.End()
		return span.SpanContext().IsSampled()
	}
	cases := []struct {
		name             string
		ratio            float64
		parentBased      bool
		newTrace, parent bool // want sampled: a call without a parent, one with a sampled parent
	}{
		{"ratio 0, parent-based: only the client's sampled traces", 0, true, false, true},
		{"ratio 1, parent-based: all", 1, true, true, true},
		{"ratio 0, not parent-based: none, whatever the client says", 0, false, false, false},
		{"ratio 1, not parent-based: all", 1, false, true, true},
	}
	for _, tc := range cases {
		c.SampleRatio, c.ParentBased = tc.ratio, tc.parentBased
		tr.SetSampler(c)
		if got := sampled(context.Background()); got != tc.newTrace {
			t.Errorf("%s: a new trace sampled %t, want %t", tc.name, got, tc.newTrace)
		}
		if got := sampled(sampledParent); got != tc.parent {
			t.Errorf("%s: a call with a sampled parent sampled %t, want %t", tc.name, got, tc.parent)
		}
	}
}

// OTEL_TRACES_SAMPLER without the parentbased_ prefix turns parent-based
// sampling off, as the specification reads it.
func TestDefaultConfigParentBased(t *testing.T) {
	for sampler, want := range map[string]bool{
		"": true, "parentbased_traceidratio": true, "parentbased_always_on": true,
		"traceidratio": false, "always_on": false, "always_off": false,
	} {
		c := DefaultConfig(func(k string) string {
			if k == "OTEL_TRACES_SAMPLER" {
				return sampler
			}
			return ""
		})
		if c.ParentBased != want {
			t.Errorf("OTEL_TRACES_SAMPLER=%q: parent_based %t, want %t", sampler, c.ParentBased, want)
		}
	}
}
