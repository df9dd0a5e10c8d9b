package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/infergate/infergate/bench/report"
	"github.com/infergate/infergate/bench/scenario"
)

// runBatching is "bench batching".
func runBatching(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench batching", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		simserver  = fs.String("simserver", "bin/simserver", "simserver binary")
		infergate  = fs.String("infergate", "bin/infergate", "infergate binary")
		igArgs     = fs.String("infergate-args", "", "extra infergate arguments, space-separated")
		simArgs    = fs.String("simserver-args", "", `extra simserver arguments, space-separated (e.g. "--config models.yaml")`)
		model      = fs.String("model", "resnet50", "batched model (one-item requests of its known input)")
		slo        = fs.Duration("slo", 50*time.Millisecond, "latency SLO: goodput counts requests within it; also adaptive's --batch-slo")
		loads      = fs.String("loads", "0.1,0.25,0.5,0.75,1,1.25,1.5,2,4,8,12,16", "offered loads, fractions of the measured unbatched capacity")
		dur        = fs.Duration("d", 5*time.Second, "measured duration per point")
		warmup     = fs.Duration("warmup", time.Second, "warmup before each point, same rate, unrecorded")
		minReq     = fs.Int("min-requests", 300, "stretch low-load points to about this many requests (at most 3x -d); 0 never")
		timeout    = fs.Duration("timeout", 0, "per-request timeout (default 20 x slo, at least 1s)")
		conns      = fs.Int("conns", 2, "client connections")
		static     = fs.String("static", "", "static configurations SIZE:DELAY,... (e.g. 64:2ms,32:5ms,16:1ms); skips the sweep")
		sizes      = fs.String("sweep-sizes", "8,16,32,64", "sweep: max batch sizes")
		delays     = fs.String("sweep-delays", "1ms,2ms,5ms,10ms", "sweep: max delays")
		sweepLoads = fs.String("sweep-loads", "4,8,12", "sweep: loads each candidate runs at (where batching configurations differ)")
		adMax      = fs.Int("adaptive-max-size", 64, "adaptive: --batch-max-size")
		adShed     = fs.Bool("adaptive-shed", true, "adaptive: --batch-shed (shed what cannot meet the SLO); -adaptive-shed=false sends every request")
		quick      = fs.Bool("quick", false, "smoke test: 1s points, 250ms warmup, fewer loads, a 2x2 sweep")
		outDir     = fs.String("out", "", "write batching.json, batching.md and batching.png into this folder")
		plotFmt    = fs.String("plot", "png", "plot format: png or svg")
		keep       = fs.Bool("keep", false, "keep the work folder (process logs)")
	)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("batching: unexpected argument %q", fs.Arg(0))}
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if *quick {
		// Quick values apply only where the flag was not given explicitly.
		quickDefaults := map[string]func(){
			"d":            func() { *dur = time.Second },
			"warmup":       func() { *warmup = 250 * time.Millisecond },
			"loads":        func() { *loads = "0.1,0.5,1,2,4,8,12" },
			"sweep-sizes":  func() { *sizes = "16,64" },
			"sweep-delays": func() { *delays = "2ms,5ms" },
			"sweep-loads":  func() { *sweepLoads = "4,8" },
			"min-requests": func() { *minReq = 100 },
		}
		for name, apply := range quickDefaults {
			if !set[name] {
				apply()
			}
		}
	}
	if *plotFmt != report.FormatPNG && *plotFmt != report.FormatSVG {
		return usageError{fmt.Errorf("batching: plot format %q: want png or svg", *plotFmt)}
	}
	cfg := scenario.BatchingConfig{
		Simserver: *simserver, Infergate: *infergate, InfergateArgs: strings.Fields(*igArgs),
		SimserverArgs: strings.Fields(*simArgs),
		Model:         *model, SLO: *slo, Duration: *dur, Warmup: *warmup, Timeout: *timeout, Conns: *conns,
		AdaptiveMaxSize: *adMax, AdaptiveNoShed: !*adShed, KeepWorkDir: *keep, Log: stderr,
		MinRequests: *minReq,
	}
	if cfg.Warmup == 0 {
		cfg.Warmup = -1 // Validate reads zero as "default"
	}
	if cfg.MinRequests == 0 {
		cfg.MinRequests = -1
	}
	var err error
	if cfg.Loads, err = scenario.ParseFloats(*loads); err != nil {
		return usageError{err}
	}
	if *static != "" {
		if cfg.Static, err = scenario.ParseStatic(*static); err != nil {
			return usageError{err}
		}
	}
	if cfg.SweepSizes, err = scenario.ParseInts(*sizes); err != nil {
		return usageError{err}
	}
	if cfg.SweepDelays, err = scenario.ParseDurations(*delays); err != nil {
		return usageError{err}
	}
	if cfg.SweepLoads, err = scenario.ParseFloats(*sweepLoads); err != nil {
		return usageError{err}
	}
	if err := cfg.Validate(); err != nil {
		return usageError{err}
	}
	rep, err := scenario.RunBatching(ctx, cfg)
	if err != nil {
		return err
	}
	md := rep.Markdown()
	fmt.Fprint(stdout, md)
	if *outDir == "" {
		return nil
	}
	if err := saveReport(*outDir, "batching", rep, md); err != nil {
		return err
	}
	plotPath := filepath.Join(*outDir, "batching."+*plotFmt)
	if err := report.WritePlot(plotPath, rep.Panels()); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "bench: batching: wrote %s, %s, %s\n",
		filepath.Join(*outDir, "batching.json"), filepath.Join(*outDir, "batching.md"), plotPath)
	return nil
}
