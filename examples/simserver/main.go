// Command simserver is a simulated NVIDIA Triton / TensorFlow Serving model
// server: both gRPC protocols for real, a GPU latency model, Triton's
// metrics and an HTTP fault-injection API. See package sim.
//
//	simserver --listen 127.0.0.1:8001 --admin 127.0.0.1:8002 [--config models.yaml] [--seed N] [--gpu-interval 1s] [--log-level info]
//
// At start it prints exactly one line "simserver: grpc=ADDR admin=ADDR" to
// stderr with the bound addresses (so :0 ports can be discovered). SIGTERM
// or SIGINT stops it gracefully with exit status 0.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"google.golang.org/grpc"

	"github.com/infergate/infergate/examples/simserver/sim"
)

// shutdownGrace bounds graceful shutdown before in-flight calls are cut.
const shutdownGrace = 5 * time.Second

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, err)
		}
		os.Exit(2)
	}
}

// options are the parsed command-line flags.
type options struct {
	listen, admin, config string
	seed                  uint64
	level                 slog.Level
	gpuInterval           time.Duration
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("simserver", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.listen, "listen", "127.0.0.1:8001", "gRPC listen address (KServe v2, TF-Serving, grpc.health.v1)")
	fs.StringVar(&o.admin, "admin", "127.0.0.1:8002", "admin HTTP listen address (/metrics, /healthz, /api/v1/faults)")
	fs.StringVar(&o.config, "config", "", "YAML models file; replaces the default models")
	fs.Uint64Var(&o.seed, "seed", 1, "seed for the long tail and error_rate faults")
	fs.DurationVar(&o.gpuInterval, "gpu-interval", time.Second, "GPU telemetry period (utilisation is averaged over it)")
	level := fs.String("log-level", "info", "log level: debug, info, warn, error")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("simserver: unexpected arguments: %v", fs.Args())
	}
	if err := o.level.UnmarshalText([]byte(*level)); err != nil {
		return o, fmt.Errorf("simserver: --log-level: %w", err)
	}
	if o.gpuInterval <= 0 {
		return o, fmt.Errorf("simserver: --gpu-interval: must be positive, got %s", o.gpuInterval)
	}
	return o, nil
}

// run serves until ctx ends, then stops gracefully. Flag, config and
// listen errors are returned before anything is served.
func run(ctx context.Context, args []string, stderr io.Writer) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: o.level}))
	var models []sim.ModelConfig
	if o.config != "" {
		if models, err = sim.LoadModels(o.config); err != nil {
			return fmt.Errorf("simserver: --config: %w", err)
		}
	}
	srv, err := sim.New(sim.Config{Models: models, Seed: o.seed, Logger: log, SampleInterval: o.gpuInterval})
	if err != nil {
		return fmt.Errorf("simserver: %w", err)
	}
	defer srv.Close()
	grpcLis, err := net.Listen("tcp", o.listen)
	if err != nil {
		return fmt.Errorf("simserver: --listen: %w", err)
	}
	adminLis, err := net.Listen("tcp", o.admin)
	if err != nil {
		grpcLis.Close()
		return fmt.Errorf("simserver: --admin: %w", err)
	}

	gs := grpc.NewServer(sim.ServerOptions()...)
	srv.RegisterGRPC(gs)
	hs := &http.Server{Handler: srv.AdminHandler(), ReadHeaderTimeout: 10 * time.Second}
	serveErr := make(chan error, 2)
	go func() { serveErr <- gs.Serve(srv.WrapListener(grpcLis)) }()
	go func() { serveErr <- hs.Serve(adminLis) }()
	// The contract line, written whole and unadorned so tests and
	// scripts can parse the bound addresses.
	fmt.Fprintf(stderr, "simserver: grpc=%s admin=%s\n", grpcLis.Addr(), adminLis.Addr())

	var result error
	select {
	case <-ctx.Done():
		log.Info("simserver: shutting down")
	case err := <-serveErr:
		result = fmt.Errorf("simserver: serve: %w", err)
	}
	// Close first: it releases hung requests, so GracefulStop can finish.
	srv.Close()
	stopGRPC(gs)
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		hs.Close()
	}
	return result
}

// stopGRPC stops gs gracefully, or forcibly after shutdownGrace.
func stopGRPC(gs *grpc.Server) {
	done := make(chan struct{})
	go func() {
		gs.GracefulStop()
		close(done)
	}()
	t := time.NewTimer(shutdownGrace)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		gs.Stop()
		<-done
	}
}
