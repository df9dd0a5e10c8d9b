package main

import (
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"google.golang.org/grpc/credentials"

	"github.com/infergate/infergate/batcher"
	"github.com/infergate/infergate/internal/memlimit"
	"github.com/infergate/infergate/internal/statefile"
	"github.com/infergate/infergate/monitor"
	"github.com/infergate/infergate/monitor/business"
	"github.com/infergate/infergate/monitor/correlate"
	"github.com/infergate/infergate/proxy"
	"github.com/infergate/infergate/tracing"
)

// parts are the pieces serve runs, built from one config with every
// metric registered on one registry. Nothing listens and no loop runs yet: serve
// starts them. `infergate docs metrics` builds the same parts to list
// the metrics, so the reference page is what /metrics can show.
type parts struct {
	srvCreds, upCreds credentials.TransportCredentials
	mon               *monitor.Registry
	gt                *gpuRuntime
	biz               *business.Hub
	rt                *routing
	al                *alerting
	bat               *batcher.Batcher // built even when nothing is batched (newBatcher)
	tr                *tracing.Tracing // nil when tracing is off
	p                 *proxy.Proxy
	fd                proxy.FrontDoor
	reload            *reloadGauges
	rel               *releasing
	budgetSource      string
	// closers undo what was built, in the order built; Close runs them
	// backwards.
	closers []func()
}

// Close closes the proxy, then the batcher, then tracing, then the
// upstreams: calls in flight end before what they use.
func (w *parts) Close() {
	for i := len(w.closers) - 1; i >= 0; i-- {
		w.closers[i]()
	}
	w.closers = nil
}

// newParts builds what cfg asks for and registers every metric on reg;
// mem is the container's memory limit as memlimit.Apply found it. On an
// error, what was built is closed.
func newParts(cfg Config, mem memlimit.Result, reg prometheus.Registerer, log *slog.Logger) (_ *parts, err error) {
	w := &parts{}
	defer func() {
		if err != nil {
			w.Close()
		}
	}()
	if w.srvCreds, err = serverCreds(cfg.TLS); err != nil {
		return nil, err
	}
	if w.upCreds, err = clientCreds(cfg.UpstreamTLS); err != nil {
		return nil, err
	}

	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), newBuildInfo())
	w.mon = monitor.NewRegistry(cfg.Monitor.Options())
	if err := w.mon.Register(reg); err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	fm := statefile.NewMetrics(reg)
	bs, err := newBaselines(cfg.alerts, fm, log)
	if err != nil {
		return nil, err
	}
	// The correlator runs once every part is built: w.rt is set by then.
	slow := func(model string) (correlate.SlowEndpoint, bool) { return slowEndpoint(w.rt.router, model) }
	if w.gt, err = startGPU(cfg.GPU, cfg.Cost.prices(), w.mon, bs, sloFunc(cfg.alerts), slow, reg, log); err != nil {
		return nil, err
	}
	if w.biz, err = startBusiness(cfg.BusinessMetrics, w.mon, w.gt.corr.InferenceModel, cfg.Monitor.Options().SliceLength, reg); err != nil {
		return nil, err
	}
	if w.rt, err = startRouting(cfg, w.upCreds, w.mon, log); err != nil {
		return nil, err
	}
	w.closers = append(w.closers, func() { w.rt.Close() })
	reg.MustRegister(w.rt.router.Collector())
	// Before alerting: its version_regression rule reads the releases.
	if w.rel, err = newReleasing(cfg, fm, log); err != nil {
		return nil, err
	}
	reg.MustRegister(w.rel.collector())
	if w.al, err = startAlerting(cfg.alerts, w.mon, w.gt, bs, w.rt.router, w.rel, reg, fm, log); err != nil {
		return nil, err
	}
	w.bat, err = startBatcher(cfg.Batching, nonIdempotentModels(cfg.RoutingConfig), w.rt.router.Replicas, reg, log)
	idempotencyWarnings(cfg.Batching, cfg.RoutingConfig, log)
	if err != nil {
		return nil, err
	}
	traceOpt, tr, stopTracing, err := startTracing(cfg.Tracing, log)
	if err != nil {
		return nil, err
	}
	w.tr = tr
	if tr != nil {
		reg.MustRegister(newTracingCollector(tr.Tail()))
	}
	w.closers = append(w.closers, stopTracing, func() { w.bat.Close() })
	w.fd, w.budgetSource = cfg.FrontDoor.frontDoor(mem)
	budgetWarnings(w.fd.MaxBufferedBytes, w.budgetSource, mem, log)
	w.p, err = proxy.New(proxy.UpstreamDirector(w.rt.Default),
		append(cfg.Config.Options(),
			proxy.WithRouter(w.rt.router),
			proxy.WithReleases(w.rel.set),
			proxy.WithBatcher(w.bat),
			proxy.WithRecorder(w.mon),
			proxy.WithLogger(log),
			proxy.WithLogInterval(cfg.Log.Interval),
			proxy.WithRequestLogger(requestLogger(cfg.Log)),
			proxy.WithFrontDoor(w.fd),
			proxy.WithFlowControl(cfg.FlowControl.settings()),
			traceOpt,
		)...,
	)
	if err != nil {
		return nil, err
	}
	w.closers = append(w.closers, func() { w.p.Close() })
	reg.MustRegister(proxyCollectors(w.p)...)
	if w.reload, err = newReloadGauges(reg); err != nil {
		return nil, err
	}
	return w, nil
}
