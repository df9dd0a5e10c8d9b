// Package tracing sets up OpenTelemetry tracing for infergate: the OTLP
// exporter (gRPC or HTTP), parent-based ratio sampling or tail-based
// sampling under a span budget (TailSampler) and the resource,
// configured by the standard OTEL_* environment variables under the
// tracing section of the config file and the flags. It owns the SDK; the
// proxy only sees the trace API (proxy.WithTracing).
package tracing

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Protocols of the OTLP exporter, as OTEL_EXPORTER_OTLP_PROTOCOL spells
// them.
const (
	ProtocolGRPC = "grpc"
	ProtocolHTTP = "http/protobuf"
)

// Config is the tracing section. DefaultConfig fills it from the OTEL_*
// environment, so the file and the flags, applied over it, win over the
// environment, as they win over every other default.
type Config struct {
	// Enabled turns tracing on. Default false, unless the environment
	// says OTEL_TRACES_EXPORTER=otlp; OTEL_SDK_DISABLED=true keeps it off
	// whatever the file says.
	Enabled bool `yaml:"enabled"`
	// Protocol is grpc or http/protobuf. Default OTEL_EXPORTER_OTLP_TRACES_PROTOCOL,
	// then OTEL_EXPORTER_OTLP_PROTOCOL, then http/protobuf (the
	// specification's default).
	Protocol string `yaml:"protocol"`
	// Endpoint is the collector's URL (http://host:4318 for HTTP,
	// http://host:4317 for gRPC; https for TLS). Empty: the exporter reads
	// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT,
	// else localhost.
	Endpoint string `yaml:"endpoint"`
	// SampleRatio is the share of new traces (calls without a sampled
	// parent) recorded, 0 to 1; a call whose client sampled its trace is
	// always recorded, one whose client did not never is (parent-based).
	// Default OTEL_TRACES_SAMPLER_ARG for a ratio sampler, else 1.
	// A reload changes it live (SetSampler).
	SampleRatio float64 `yaml:"sample_ratio"`
	// ParentBased follows the client's decision where the call carries a
	// trace context: a sampled parent is always recorded, an unsampled one
	// never; SampleRatio then applies only to new traces. False applies
	// SampleRatio to every call, whatever its parent says. Default true,
	// unless OTEL_TRACES_SAMPLER names a sampler without the parentbased_
	// prefix. A reload changes it live (SetSampler).
	ParentBased bool `yaml:"parent_based"`
	// MaxSpansPerSecond turns on tail-based sampling when above 0: every
	// call is recorded, and at its end its spans are exported if it failed
	// or was slower than its model's recent p99, else with the probability
	// that holds the exports at this many spans a second (TailSampler).
	// SampleRatio and ParentBased then do not apply. Default 0: off,
	// head-based sampling by SampleRatio. A reload changes it live.
	MaxSpansPerSecond float64 `yaml:"max_spans_per_second"`
	// ServiceName is the resource's service.name. Default OTEL_SERVICE_NAME,
	// else "infergate".
	ServiceName string `yaml:"service_name"`

	disabled bool // OTEL_SDK_DISABLED=true
}

// DefaultConfig returns the defaults, read from the environment by getenv
// (os.Getenv).
func DefaultConfig(getenv func(string) string) Config {
	c := Config{Protocol: ProtocolHTTP, SampleRatio: 1, ParentBased: true, ServiceName: "infergate"}
	c.Enabled = strings.EqualFold(strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")), "otlp")
	c.disabled = strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true")
	for _, k := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if v := strings.TrimSpace(getenv(k)); v != "" {
			c.Protocol = v
			break
		}
	}
	sampler := getenv("OTEL_TRACES_SAMPLER")
	switch strings.TrimPrefix(sampler, "parentbased_") {
	case "traceidratio":
		if r, err := strconv.ParseFloat(getenv("OTEL_TRACES_SAMPLER_ARG"), 64); err == nil {
			c.SampleRatio = r
		}
	case "always_off":
		c.SampleRatio = 0
	}
	switch sampler {
	case "traceidratio", "always_on", "always_off":
		c.ParentBased = false
	}
	if v := getenv("OTEL_SERVICE_NAME"); v != "" {
		c.ServiceName = v
	}
	return c
}

// On reports whether tracing is to run.
func (c Config) On() bool { return c.Enabled && !c.disabled }

// Problems returns one error per bad field, named as the file spells it.
func (c Config) Problems() []error {
	var errs []error
	if c.Protocol != ProtocolGRPC && c.Protocol != ProtocolHTTP {
		errs = append(errs, fmt.Errorf("protocol: must be %s or %s, got %q", ProtocolGRPC, ProtocolHTTP, c.Protocol))
	}
	if c.Endpoint != "" {
		u, err := url.Parse(c.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("endpoint: must be an http:// or https:// URL, got %q", c.Endpoint))
		}
	}
	if c.SampleRatio < 0 || c.SampleRatio > 1 {
		errs = append(errs, fmt.Errorf("sample_ratio: must be between 0 and 1, got %v", c.SampleRatio))
	}
	if c.MaxSpansPerSecond < 0 || math.IsNaN(c.MaxSpansPerSecond) || math.IsInf(c.MaxSpansPerSecond, 0) {
		errs = append(errs, fmt.Errorf("max_spans_per_second: must be 0 (off) or a positive number, got %v", c.MaxSpansPerSecond))
	}
	if c.ServiceName == "" {
		errs = append(errs, errors.New("service_name: must not be empty"))
	}
	return errs
}

// Tracing is a running tracer provider.
type Tracing struct {
	// Provider makes the spans; Propagator reads and writes W3C trace
	// context and baggage.
	Provider   trace.TracerProvider
	Propagator propagation.TextMapPropagator
	sdk        *sdktrace.TracerProvider
	sampler    *swapSampler
	tail       *TailSampler
}

// Sampler is the sampler c's settings (SampleRatio, ParentBased) make;
// with tail sampling on (MaxSpansPerSecond), one that records every span:
// the decision is the TailSampler's, at the call's end.
func (c Config) Sampler() sdktrace.Sampler {
	if c.MaxSpansPerSecond > 0 {
		return sdktrace.AlwaysSample()
	}
	s := sdktrace.TraceIDRatioBased(c.SampleRatio)
	if c.ParentBased {
		s = sdktrace.ParentBased(s)
	}
	return s
}

// SetSampler makes spans from now on sampled by c's SampleRatio,
// ParentBased and MaxSpansPerSecond (a reload's change); the rest of c
// (exporter, endpoint, service name) is read by Start only. Spans already
// started keep their head decision.
func (t *Tracing) SetSampler(c Config) {
	t.tail.SetMaxSpansPerSecond(c.MaxSpansPerSecond)
	t.sampler.set(c.Sampler())
}

// Tail is the tail sampler between the spans and the exporter: its rate
// and counts are the tracing metrics. Off (passing every span) while
// MaxSpansPerSecond is 0.
func (t *Tracing) Tail() *TailSampler { return t.tail }

// swapSampler is the provider's sampler: the SDK takes one sampler when
// the provider is built and keeps it, so the provider gets this one, which
// hands each decision to the sampler stored last. One atomic load per
// span; nothing on a call that is not traced.
type swapSampler struct{ cur atomic.Pointer[samplerBox] }

// samplerBox holds an interface value behind one pointer.
type samplerBox struct{ sdktrace.Sampler }

func newSwapSampler(s sdktrace.Sampler) *swapSampler {
	w := &swapSampler{}
	w.set(s)
	return w
}

func (w *swapSampler) set(s sdktrace.Sampler) { w.cur.Store(&samplerBox{s}) }

func (w *swapSampler) ShouldSample(p sdktrace.SamplingParameters) sdktrace.SamplingResult {
	return w.cur.Load().ShouldSample(p)
}

func (w *swapSampler) Description() string { return w.cur.Load().Description() }

// Start builds the exporter, the sampler and the provider of c. The
// exporter connects lazily: an unreachable collector loses spans (the
// batch processor drops them) but never slows or fails a call.
func Start(ctx context.Context, c Config, version string) (*Tracing, error) {
	var (
		exp sdktrace.SpanExporter
		err error
	)
	switch c.Protocol {
	case ProtocolGRPC:
		var opts []otlptracegrpc.Option
		if c.Endpoint != "" {
			opts = append(opts, otlptracegrpc.WithEndpointURL(c.Endpoint))
		}
		exp, err = otlptracegrpc.New(ctx, opts...)
	default:
		var opts []otlptracehttp.Option
		if c.Endpoint != "" {
			opts = append(opts, otlptracehttp.WithEndpointURL(endpointWithPath(c.Endpoint)))
		}
		exp, err = otlptracehttp.New(ctx, opts...)
	}
	if err != nil {
		return nil, fmt.Errorf("tracing: %s exporter: %w", c.Protocol, err)
	}
	res, err := resource.New(ctx, resource.WithFromEnv(), resource.WithTelemetrySDK(),
		resource.WithAttributes(attribute.String("service.name", c.ServiceName), attribute.String("service.version", version)))
	if err != nil && res == nil {
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	sampler := newSwapSampler(c.Sampler())
	tail := NewTailSampler(sdktrace.NewBatchSpanProcessor(exp), TailOptions{MaxSpansPerSecond: c.MaxSpansPerSecond})
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithSpanProcessor(tail),
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sampler),
	)
	return &Tracing{
		Provider:   provider{tp, tail},
		Propagator: propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}),
		sdk:        tp,
		sampler:    sampler,
		tail:       tail,
	}, nil
}

// provider is the SDK's provider that also says which traces the tail
// sampler kept (Kept), for the proxy's exemplars: with tail sampling on
// every span is sampled at its start, and an exemplar must not point at
// a trace that was then dropped.
type provider struct {
	*sdktrace.TracerProvider
	tail *TailSampler
}

// Kept says whether the trace of sc, whose local root has ended, was
// exported.
func (p provider) Kept(sc trace.SpanContext) bool { return p.tail.Kept(sc.TraceID()) }

// endpointWithPath gives an HTTP collector URL without a path the
// signal's path, /v1/traces, as OTEL_EXPORTER_OTLP_ENDPOINT is read: a
// user writes the collector's address, not the route of one signal.
func endpointWithPath(endpoint string) string {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Path != "" && u.Path != "/") {
		return endpoint
	}
	u.Path = "/v1/traces"
	return u.String()
}

// Shutdown sends the spans still buffered and stops the exporter.
func (t *Tracing) Shutdown(ctx context.Context) error {
	return t.sdk.Shutdown(ctx)
}
