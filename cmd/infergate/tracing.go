package main

import (
	"context"
	"log/slog"
	"os"
	"time"

	"github.com/infergate/infergate/proxy"
	"github.com/infergate/infergate/tracing"
)

// startTracing starts the tracer provider when c turns tracing on and
// returns the proxy's option (WithTracing(nil) when off: nothing on the
// call path), the provider (nil when off; a reload swaps its sampler) and
// the stop that flushes the spans still buffered.
func startTracing(c tracing.Config, log *slog.Logger) (proxy.Option, *tracing.Tracing, func(), error) {
	if !c.On() {
		return proxy.WithTracing(nil, nil, proxy.SemconvOld), nil, func() {}, nil
	}
	ver, _, _ := buildInfo()
	t, err := tracing.Start(context.Background(), c, ver)
	if err != nil {
		return nil, nil, nil, err
	}
	conv := proxy.SemconvFromEnv(os.Getenv("OTEL_SEMCONV_STABILITY_OPT_IN"))
	log.Info("tracing", "protocol", c.Protocol, "endpoint", c.Endpoint, "sample_ratio", c.SampleRatio, "parent_based", c.ParentBased)
	stop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := t.Shutdown(ctx); err != nil {
			log.Warn("tracing: spans not sent at shutdown", "error", err)
		}
	}
	return proxy.WithTracing(t.Provider, t.Propagator, conv), t, stop, nil
}
