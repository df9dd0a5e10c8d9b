package main

import (
	"context"
	"log/slog"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"

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
	log.Info("tracing", "protocol", c.Protocol, "endpoint", c.Endpoint, "sample_ratio", c.SampleRatio, "parent_based", c.ParentBased,
		"max_spans_per_second", c.MaxSpansPerSecond)
	stop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := t.Shutdown(ctx); err != nil {
			log.Warn("tracing: spans not sent at shutdown", "error", err)
		}
	}
	return proxy.WithTracing(t.Provider, t.Propagator, conv), t, stop, nil
}

// tracingCollector exports the tail sampler's state: its rate, its
// budget, the spans it decided by decision and the spans it holds. It is
// registered whenever tracing is on (a reload may turn tail sampling on).
type tracingCollector struct {
	t                         *tracing.TailSampler
	ratio, budget, buf, spans *prometheus.Desc
}

func newTracingCollector(t *tracing.TailSampler) *tracingCollector {
	return &tracingCollector{
		t: t,
		ratio: prometheus.NewDesc("infergate_tracing_sample_ratio",
			"Probability with which tail-based sampling exports a call's spans when the call neither failed nor was slower than its model's recent p99; adapted every second to hold exports at tracing.max_spans_per_second (1 when that is 0: off).", nil, nil),
		budget: prometheus.NewDesc("infergate_tracing_max_spans_per_second",
			"The span export budget of tail-based sampling, tracing.max_spans_per_second (0: off).", nil, nil),
		buf: prometheus.NewDesc("infergate_tracing_buffered_spans",
			"Spans held by tail-based sampling until their call ends.", nil, nil),
		spans: prometheus.NewDesc("infergate_tracing_spans_total",
			"Spans decided by tail-based sampling, by decision: error (the call failed), slow (over its model's recent p99) and sampled were exported; dropped were not; evicted were dropped while waiting for a call that outlived the buffer's bounds.",
			[]string{"decision"}, nil),
	}
}

func (c *tracingCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.ratio
	ch <- c.budget
	ch <- c.buf
	ch <- c.spans
}

func (c *tracingCollector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(c.ratio, prometheus.GaugeValue, c.t.Ratio())
	ch <- prometheus.MustNewConstMetric(c.budget, prometheus.GaugeValue, c.t.MaxSpansPerSecond())
	ch <- prometheus.MustNewConstMetric(c.buf, prometheus.GaugeValue, float64(c.t.Buffered()))
	for _, d := range tracing.Decisions() {
		ch <- prometheus.MustNewConstMetric(c.spans, prometheus.CounterValue, float64(c.t.Spans(d)), d.String())
	}
}
