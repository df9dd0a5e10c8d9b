// Command infergate is a transparent gRPC proxy for model servers (Triton
// over KServe v2, TF-Serving) that measures every call's latency exactly and
// exports it on /metrics. docs/reference/ lists its flags, YAML keys and
// metrics, as `infergate docs` writes them.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/infergate/infergate/admin"
	"github.com/infergate/infergate/internal/memlimit"
	"github.com/infergate/infergate/proxy"
	"github.com/infergate/infergate/proxy/h2relay"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

// run returns the process exit code: 0 after a clean drain, 2 for a bad
// configuration (nothing was served), 1 for a runtime failure.
func run(args []string) int {
	if len(args) > 0 && args[0] == "rules" {
		return rulesCommand(args[1:], os.Stdout, os.Stderr)
	}
	if len(args) > 0 && args[0] == "healthcheck" {
		return healthcheckCommand(args[1:], os.Stdout, os.Stderr)
	}
	if len(args) > 0 && args[0] == "docs" {
		return docsCommand(args[1:], os.Stdout, os.Stderr)
	}
	cfg, err := parseConfig(args)
	if err == nil && !cfg.PrintVersion {
		// The I/O step after validation, for --check-config too: the TLS
		// files named can be read.
		err = cfg.readFiles()
	}
	switch {
	case errors.Is(err, flag.ErrHelp):
		return 0
	case cfg.PrintVersion:
		ver, rev, gov := buildInfo()
		fmt.Printf("infergate %s (revision %s, %s)\n", ver, rev, gov)
		return 0
	case err != nil:
		fmt.Fprintln(os.Stderr, "infergate:", err)
		return 2
	case cfg.CheckOnly:
		for _, w := range effectWarnings(cfg) {
			fmt.Fprintln(os.Stderr, "infergate: warning:", w)
		}
		problems, warning := checkReleaseTargets(cfg)
		if warning != "" {
			fmt.Fprintln(os.Stderr, "infergate: warning:", warning)
		}
		if len(problems) > 0 {
			fmt.Fprintln(os.Stderr, "infergate:", errors.Join(problems...))
			return 2
		}
		fmt.Println("infergate: configuration is valid")
		return 0
	}
	// Go's soft memory limit follows the container's before anything is
	// allocated for calls; the memory budget is sized from the same limit.
	mem := memlimit.Apply()
	cfg.level = new(slog.LevelVar)
	log := newLogger(cfg.Log, cfg.level)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := serve(ctx, cfg, mem, log); err != nil {
		fmt.Fprintln(os.Stderr, "infergate:", err)
		return 1
	}
	return 0
}

// newLogger returns the logger of c at level, which it sets to c's
// level; a reload sets it again (log.level changes live).
func newLogger(c LogConfig, level *slog.LevelVar) *slog.Logger {
	var l slog.Level
	l.UnmarshalText([]byte(c.Level)) // validated already
	level.Set(l)
	return loggerAt(c.Format, level)
}

func loggerAt(format string, level slog.Leveler) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(os.Stderr, opts))
	}
	return slog.New(slog.NewTextHandler(os.Stderr, opts))
}

// requestLogger returns the logger of --log-requests: one line per call,
// whatever --log-level says (asking for request lines is asking to see
// them); nil when off.
func requestLogger(c LogConfig) *slog.Logger {
	if !c.Requests {
		return nil
	}
	return loggerAt(c.Format, slog.LevelInfo)
}

// proxyCollectors exports the proxy's own counters.
func proxyCollectors(p *proxy.Proxy) []prometheus.Collector {
	return []prometheus.Collector{
		p.FlowCollector(),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name:        "infergate_rejected_calls_total",
			Help:        "Calls the proxy refused at once, by reason: max_in_flight (--max-in-flight reached), buffer_budget (no room in the memory budget, --max-buffered-bytes, before the call's deadline).",
			ConstLabels: prometheus.Labels{"reason": "max_in_flight"},
		}, func() float64 { return float64(p.Stats().RejectedInFlight) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "infergate_panics_total",
			Help: "Panics recovered in the proxy's call path; each failed the calls it touched with INTERNAL.",
		}, func() float64 { return float64(p.Stats().Panics) }),
		fastPathCounter(p, "forwarded", func(s proxy.Stats) int64 { return s.Forwarded }),
		fastPathCounter(p, "served", func(s proxy.Stats) int64 { return s.Served }),
		fastPathCounter(p, "grpc_server", func(s proxy.Stats) int64 { return s.HandedOn }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name:        "infergate_release_shadow_copies_total",
			Help:        "Shadow copies of releases' calls, by outcome: compared (sent to the candidate, its answer compared with the stable one), skipped (shed at once: no room in the memory budget or the candidate's flow-control gate).",
			ConstLabels: prometheus.Labels{"outcome": "compared"},
		}, func() float64 { return float64(p.Stats().ShadowCompared) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name:        "infergate_release_shadow_copies_total",
			Help:        "Shadow copies of releases' calls, by outcome: compared (sent to the candidate, its answer compared with the stable one), skipped (shed at once: no room in the memory budget or the candidate's flow-control gate).",
			ConstLabels: prometheus.Labels{"outcome": "skipped"},
		}, func() float64 { return float64(p.Stats().ShadowSkipped) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "infergate_buffered_bytes",
			Help: "Bytes calls hold now of the memory budget (--max-buffered-bytes), on the relay and the gRPC path.",
		}, func() float64 { return float64(p.Stats().Buffer.Held) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "infergate_buffer_budget_bytes",
			Help: "The memory budget for bytes held for calls (--max-buffered-bytes, auto from the container's limit).",
		}, func() float64 { return float64(p.Stats().Buffer.Limit) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "infergate_buffer_waits_total",
			Help: "Requests that waited for room in the memory budget (their senders got no window meanwhile).",
		}, func() float64 { return float64(p.Stats().Buffer.Waits) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name:        "infergate_rejected_calls_total",
			Help:        "Calls the proxy refused at once, by reason: max_in_flight (--max-in-flight reached), buffer_budget (no room in the memory budget, --max-buffered-bytes, before the call's deadline).",
			ConstLabels: prometheus.Labels{"reason": "buffer_budget"},
		}, func() float64 { return float64(p.Stats().Buffer.Refusals) }),
	}
}

// fastPathCounter is infergate_fast_path_calls_total for one path.
func fastPathCounter(p *proxy.Proxy, path string, get func(proxy.Stats) int64) prometheus.Collector {
	return prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "infergate_fast_path_calls_total",
		Help: "Unary calls the fast path (--fast-path) routed, by path: forwarded (relayed frame by frame to the upstream), " +
			"served (answered by the pipeline on the relay: batched, routed, breakers, tracing), " +
			"grpc_server (handed to the gRPC server: not one uncompressed message).",
		ConstLabels: prometheus.Labels{"path": path},
	}, func() float64 { return float64(get(p.Stats())) })
}

// serve wires the parts, serves until ctx ends, then drains; mem is the
// container's memory limit as memlimit.Apply found it.
//
// The running process is a list of components (components.go), started
// in the order added and stopped in reverse: the parts, the loops that
// read them, the admin listener, then the gRPC listener. A SIGTERM stops
// the gRPC listener first (drained), the admin listener next, then the
// loops (the alert engine saves its state and drains its notifications),
// and closes the parts last.
func serve(ctx context.Context, cfg Config, mem memlimit.Result, log *slog.Logger) error {
	reg := prometheus.NewRegistry()
	w, err := newParts(cfg, mem, reg, log)
	if err != nil {
		return err
	}
	// Without a container limit, the garbage the budget's bytes leave is
	// bounded by a soft limit from the budget (memlimit.BudgetSoftLimit).
	mem = memlimit.FromBudget(mem, w.fd.MaxBufferedBytes)
	srvCreds, upCreds, mon, gt, rt, al, bat, p := w.srvCreds, w.upCreds, w.mon, w.gt, w.rt, w.al, w.bat, w.p
	fd, budgetSource, up := w.fd, w.budgetSource, w.rt.Default
	var cs components
	// Closed last: calls in flight end first, then the proxy, the
	// batches in flight, the spans and the upstreams.
	cs.add("parts", nil, w.Close)

	// Bind both listeners before anything starts, so a bad address fails
	// the start rather than half of the service.
	lis, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		w.Close()
		return fmt.Errorf("listen: %w", err)
	}
	adminLis, err := net.Listen("tcp", cfg.Admin)
	if err != nil {
		lis.Close()
		w.Close()
		return fmt.Errorf("admin: %w", err)
	}
	if cfg.Pprof {
		// Without these the block and mutex profiles are empty. Sampled
		// lightly (one contention event in 100, one blocking event per
		// 100 µs spent blocked): cheap enough to leave on, enough to see
		// where calls wait.
		runtime.SetMutexProfileFraction(100)
		runtime.SetBlockProfileRate(int(100 * time.Microsecond))
	}
	ready := newReadiness(cfg.Readiness, up.Address, up, recentFailures(mon))
	adm := &admin.Server{
		Gatherer: reg, Ready: ready.current, Pprof: cfg.Pprof,
		Monitor: mon, Batcher: bat, GPUs: gt.hub, Correlator: gt.corr, Business: w.biz, Cost: gt.cost,
		Alerts: al.engine, Token: cfg.adminToken, Router: rt.router, Flow: w.p.Flow, FlowTenants: w.p.FlowTenants,
	}
	rl, err := newReloader(cfg, log, w.reload)
	if err != nil {
		lis.Close()
		adminLis.Close()
		w.Close()
		return err
	}
	adm.Reload, adm.StatusConfig = rl.reloadAPI, rl.statusConfig
	adm.Releases = w.rel
	// errc hears a listener that failed while serving.
	errc := make(chan error, 2)

	cs.loop("monitor", mon.Run)
	cs.loop("gpu", gt.run)
	cs.loop("business metrics", w.biz.Run)
	// Batching discovery and the model checks may be started by a reload
	// (batching turned on, a route added), so they live on a context of
	// their own, from here to its stop.
	bgCtx, stopBg := context.WithCancel(context.Background())
	discover := sync.OnceFunc(func() { go discoverBatching(bgCtx, bat, up, w.p.SetPriorityLevels, log) })
	cs.add("batching discovery", func() error {
		if batchingOn(cfg.Batching) || cfg.FlowControl.Enabled {
			discover()
		}
		return nil
	}, stopBg)
	models := &modelCheck{ctx: bgCtx, rt: rt, log: log}
	rl.steps = []reloadStep{alertingStep(al.engine), batchingStep(bat, discover), routingStep(rt, upCreds, cfg.ShutdownTimeout, log), tracingStep(w.tr),
		flowControlStep(w.p, discover), businessStep(w.biz), models.step(), // after routing: it reads the routes in force
		releasesStep(w.rel)} // after routing: it asks the upstreams in force
	if cfg.level != nil {
		rl.steps = append([]reloadStep{logLevelStep(cfg.level)}, rl.steps...)
	}
	// Reloads (reload.go): SIGHUP is caught from here on, before the
	// start line, so a SIGHUP never ends a process that says it serves.
	hup := make(chan os.Signal, 1)
	cs.add("model check", func() error {
		// Before the reloads start: they re-run it (modelCheck is not
		// safe for concurrent use; reloads are serialised).
		models.check(cfg)
		return nil
	}, nil)
	cs.add("sighup", func() error { signal.Notify(hup, syscall.SIGHUP); return nil }, func() { signal.Stop(hup) })
	cs.loop("reloads", func(ctx context.Context) { rl.run(ctx, hup) })
	// The alert engine's stop saves its state and drains queued
	// notifications, on SIGTERM as after a failed start.
	// The releases' targets are checked once the servers answer; the
	// judgement ticks every second and saves the releases' state.
	w.rel.ask, w.rel.upstreamConns = askTargets, func() []namedConn { return upstreamConns(rt.Upstreams) }
	cs.add("release targets", func() error { w.rel.recheck(); return nil }, w.rel.stopCheck)
	cs.loop("releases", w.rel.run)
	cs.loop("alerts", al.run)
	// The first verdict is in before the start line: /readyz is never
	// "not checked yet" for a process that says it serves.
	cs.add("first readiness verdict", func() error { ready.check(bgCtx); return nil }, nil)
	cs.loop("readiness", ready.run)

	hs := &http.Server{Handler: adm.Handler(), ReadHeaderTimeout: 10 * time.Second}
	cs.add("admin listener", func() error {
		go func() {
			if err := hs.Serve(adminLis); !errors.Is(err, http.ErrServerClosed) {
				errc <- fmt.Errorf("admin: %w", err)
			}
		}()
		return nil
	}, func() {
		shutCtx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = hs.Shutdown(shutCtx)
	})

	// The gRPC listener: with the fast path the relay owns the client
	// connections (it relays plain unary calls itself and hands every
	// other call to the grpc.Server) and ends TLS, so the front door's
	// limits hold for every client; without it, the grpc.Server ends TLS
	// itself.
	tlsAtRelay := cfg.FastPath && srvCreds != nil
	var sopts []grpc.ServerOption
	if srvCreds != nil && !tlsAtRelay {
		sopts = append(sopts, grpc.Creds(srvCreds))
	}
	gs := p.NewServer(sopts...)
	var relay *h2relay.Server
	// cut: the process stops on a failure, not a SIGTERM; calls in
	// flight are cut rather than drained.
	cut := true
	cs.add("grpc listener", func() error {
		if !cfg.FastPath {
			go func() { errc <- gs.Serve(lis) }()
			return nil
		}
		if tlsAtRelay {
			tc, err := serverTLS(cfg.TLS)
			if err != nil {
				lis.Close()
				return err
			}
			tc.NextProtos = []string{"h2"} // gRPC clients insist on it
			lis = tls.NewListener(lis, tc)
		}
		relay = p.Relay(gs)
		go func() { _ = gs.Serve(relay.LocalListener()) }()
		go func() { errc <- relay.Serve(lis) }()
		return nil
	}, func() {
		if cut {
			if relay != nil {
				relay.Stop()
			}
			gs.Stop()
			return
		}
		// In-flight calls and queued batches finish within the
		// timeout; past it they are cut.
		done := make(chan struct{})
		go func() {
			if relay != nil {
				relay.GracefulStop()
			}
			gs.GracefulStop()
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(cfg.ShutdownTimeout):
			log.Warn("drain timeout: cutting remaining calls")
			if relay != nil {
				relay.Stop()
			}
			gs.Stop()
			<-done
		}
	})

	if err := cs.startAll(); err != nil {
		lis.Close()
		adminLis.Close()
		return err
	}
	defer cs.stopAll()
	// The one start line: tests and scripts read the bound addresses from
	// it. Every value is one word: memory_limit and buffer_budget end it.
	ver, _, _ := buildInfo()
	fmt.Fprintf(os.Stderr, "infergate: grpc=%s admin=%s upstream=%s tls=%t upstream_tls=%t version=%s%s memory_limit=%s buffer_budget=%d(%s)\n",
		lis.Addr(), adminLis.Addr(), up.Name(), srvCreds != nil, upCreds != nil, ver, rt.describe(), mem, fd.MaxBufferedBytes, budgetSource)
	startWarnings(cfg, log)
	log.Info("serving", "grpc", lis.Addr().String(), "admin", adminLis.Addr().String(),
		"upstream", up.Name(), "upstream_tls", upCreds != nil,
		"memory_limit", mem.Limit, "gomemlimit", mem.SoftLimit, "gomemlimit_source", mem.Source,
		"buffer_budget", fd.MaxBufferedBytes, "buffer_budget_source", budgetSource)

	select {
	case <-ctx.Done():
	case err := <-errc:
		return err
	}

	// Drain, the way load balancers need it: readiness goes red at once
	// while calls are still served for the drain delay (a balancer polling
	// /readyz notices and stops sending); then the components stop, the
	// gRPC listener first, draining its calls.
	adm.Drain()
	log.Info("draining", "delay", cfg.DrainDelay, "timeout", cfg.ShutdownTimeout)
	if cfg.DrainDelay > 0 {
		select {
		case <-time.After(cfg.DrainDelay):
		case err := <-errc:
			return err
		}
	}
	cut = false
	cs.stopAll()
	log.Info("stopped")
	return nil
}
