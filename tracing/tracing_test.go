package tracing

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

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
	c := Config{Protocol: "udp", Endpoint: "collector:4317", SampleRatio: 1.5}
	var got []string
	for _, err := range c.Problems() {
		got = append(got, err.Error())
	}
	want := []string{
		`protocol: must be grpc or http/protobuf, got "udp"`,
		`endpoint: must be an http:// or https:// URL, got "collector:4317"`,
		`sample_ratio: must be between 0 and 1, got 1.5`,
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
