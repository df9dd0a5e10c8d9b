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
func serve(ctx context.Context, cfg Config, mem memlimit.Result, log *slog.Logger) error {
	reg := prometheus.NewRegistry()
	w, err := newParts(cfg, mem, reg, log)
	if err != nil {
		return err
	}
	// After the server: calls in flight end first, then the proxy, the
	// batches in flight, the spans and the upstreams.
	defer w.Close()
	srvCreds, upCreds, mon, gt, rt, al, bat, p := w.srvCreds, w.upCreds, w.mon, w.gt, w.rt, w.al, w.bat, w.p
	fd, budgetSource, up := w.fd, w.budgetSource, w.rt.Default

	var sopts []grpc.ServerOption
	// With the fast path the relay ends TLS (the front door's limits
	// hold for every client) and the grpc.Server behind it gets the
	// relay's plaintext socket pairs; without it, the grpc.Server ends
	// TLS itself.
	tlsAtRelay := cfg.FastPath && srvCreds != nil
	if srvCreds != nil && !tlsAtRelay {
		sopts = append(sopts, grpc.Creds(srvCreds))
	}
	gs := p.NewServer(sopts...)
	// On an early return (a listener failed) the calls in flight are cut,
	// so that closing the batcher and the proxy cannot wait on them.
	defer gs.Stop()

	// Bind both listeners before announcing anything, so a bad address
	// fails the start rather than half of the service.
	lis, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	adminLis, err := net.Listen("tcp", cfg.Admin)
	if err != nil {
		lis.Close()
		return fmt.Errorf("admin: %w", err)
	}
	ready := newReadiness(cfg.Readiness, up.Address, up.Conn(), recentFailures(mon))
	if cfg.Pprof {
		// Without these the block and mutex profiles are empty. Sampled
		// lightly (one contention event in 100, one blocking event per
		// 100 µs spent blocked): cheap enough to leave on, enough to see
		// where calls wait.
		runtime.SetMutexProfileFraction(100)
		runtime.SetBlockProfileRate(int(100 * time.Microsecond))
	}
	adm := &admin.Server{
		Gatherer: reg, Ready: ready.current, Pprof: cfg.Pprof,
		Monitor: mon, Batcher: bat, GPUs: gt.hub, Correlator: gt.corr,
		Alerts: al.engine, Token: cfg.adminToken, Router: rt.router,
	}
	// Reloads (reload.go): SIGHUP is caught from here on, before the
	// start line, so a SIGHUP never ends a process that says it serves.
	rl, err := newReloader(cfg, log, w.reload)
	if err != nil {
		return err
	}
	// The loops below live until runCtx ends; a reload may start the
	// batching discovery (batching turned on), so runCtx comes first.
	runCtx, cancelRun := context.WithCancel(context.Background())
	defer cancelRun()
	discover := sync.OnceFunc(func() { go discoverBatching(runCtx, bat, up.Conn(), log) })
	models := &modelCheck{ctx: runCtx, rt: rt, log: log}
	rl.steps = []reloadStep{alertingStep(al.engine), batchingStep(bat, discover), routingStep(rt, upCreds, cfg.ShutdownTimeout, log), tracingStep(w.tr),
		models.step()} // after routing: it reads the routes in force
	if cfg.level != nil {
		rl.steps = append([]reloadStep{logLevelStep(cfg.level)}, rl.steps...)
	}
	adm.Reload, adm.StatusConfig = rl.reloadAPI, rl.statusConfig
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	hs := &http.Server{Handler: adm.Handler(), ReadHeaderTimeout: 10 * time.Second}

	go mon.Run(runCtx)
	go gt.run(runCtx)
	// Before the reloads start: they re-run it (modelCheck is not
	// safe for concurrent use; reloads are serialised).
	models.check(cfg)
	go rl.run(runCtx, hup)
	if batchingOn(cfg.Batching) {
		discover()
	}
	alertsDone := make(chan struct{})
	go func() { al.run(runCtx); close(alertsDone) }()
	// stopAlerting ends the alert engine before a failed serve returns:
	// it saves its state and drains queued notifications, as on SIGTERM.
	stopAlerting := func(err error) error {
		cancelRun()
		<-alertsDone
		return err
	}
	// The first verdict is in before the start line: /readyz is never
	// "not checked yet" for a process that says it serves.
	ready.check(runCtx)
	go ready.run(runCtx)

	errc := make(chan error, 2)
	// The fast path (proxy.Relay) owns the client connections when on: it
	// relays plain unary calls itself and hands every other call to gs.
	var relay *h2relay.Server
	if cfg.FastPath {
		if tlsAtRelay {
			tc, err := serverTLS(cfg.TLS)
			if err != nil {
				return err
			}
			tc.NextProtos = []string{"h2"} // gRPC clients insist on it
			lis = tls.NewListener(lis, tc)
		}
		relay = p.Relay(gs)
		go func() { _ = gs.Serve(relay.LocalListener()) }()
		go func() { errc <- relay.Serve(lis) }()
	} else {
		go func() { errc <- gs.Serve(lis) }()
	}
	go func() {
		if err := hs.Serve(adminLis); !errors.Is(err, http.ErrServerClosed) {
			errc <- fmt.Errorf("admin: %w", err)
		}
	}()
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
		return stopAlerting(err)
	}

	// Drain, the way load balancers need it: readiness goes red at once
	// while calls are still served for the drain delay (a balancer polling
	// /readyz notices and stops sending); then the listener closes and
	// in-flight calls and queued batches finish within the timeout; past
	// it they are cut.
	adm.Drain()
	log.Info("draining", "delay", cfg.DrainDelay, "timeout", cfg.ShutdownTimeout)
	if cfg.DrainDelay > 0 {
		select {
		case <-time.After(cfg.DrainDelay):
		case err := <-errc:
			return stopAlerting(err)
		}
	}
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
	shutCtx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	hs.Shutdown(shutCtx)
	cancelRun()
	<-alertsDone // state and baseline saved, notifications drained
	log.Info("stopped")
	return nil
}
