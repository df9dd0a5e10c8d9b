package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/infergate/infergate/bench/load"
	"github.com/infergate/infergate/bench/scenario"
)

// errSoakFailed is returned after a soak whose verdict is FAIL, once the
// report has been printed and written.
var errSoakFailed = errors.New("soak: verdict FAIL")

// runSoak is "bench soak".
func runSoak(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench soak", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		simserver = fs.String("simserver", "bin/simserver", "simserver binary")
		infergate = fs.String("infergate", "bin/infergate", "infergate binary")
		igArgs    = fs.String("infergate-args", "", "extra infergate arguments, space-separated")
		simArgs   = fs.String("simserver-args", "", "extra simserver arguments, space-separated")
		rate      = fs.Float64("rate", 150, "open-loop calls per second, latency measured from intended send times")
		arrival   = fs.String("arrival", "fixed", "arrivals: fixed or poisson")
		dur       = fs.Duration("d", 10*time.Minute, "duration of the load")
		sample    = fs.Duration("sample", 30*time.Second, "time between samples of infergate (RSS, goroutines, /metrics) and the calls")
		baseline  = fs.Duration("baseline", 2*time.Minute, "the verdict compares the first sample at or after this with the last")
		tolerance = fs.Float64("tolerance", 0.10, "largest relative change of RSS and goroutines that passes")
		junk      = fs.Float64("junk", 0.01, "fraction of calls to junk model names, a new name each (0: none)")
		stream    = fs.Float64("stream", 0.02, "fraction of calls that are ModelStreamInfer streams (0: none)")
		streamN   = fs.Int("stream-messages", 3, "requests per stream")
		short     = fs.Float64("short", 0.05, "fraction of model calls with a short deadline (0: none)")
		shortMin  = fs.Duration("short-min", time.Millisecond, "shortest short deadline")
		shortMax  = fs.Duration("short-max", 10*time.Millisecond, "longest short deadline (drawn uniformly between the two)")
		timeout   = fs.Duration("timeout", 10*time.Second, "deadline of the other calls")
		conns     = fs.Int("conns", 4, "client connections")
		seed      = fs.Uint64("seed", 1, "seed of the mix, the short deadlines and Poisson gaps")
		outDir    = fs.String("out", "", "write soak.json and soak.md into this folder")
		keep      = fs.Bool("keep", false, "keep the work folder (process logs)")
	)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("soak: unexpected argument %q", fs.Arg(0))}
	}
	arr, err := load.ParseArrival(*arrival)
	if err != nil {
		return usageError{err}
	}
	if *rate <= 0 || *dur <= 0 || *sample <= 0 || *baseline <= 0 || *tolerance <= 0 {
		return usageError{errors.New("soak: -rate, -d, -sample, -baseline and -tolerance must be positive")}
	}
	cfg := scenario.SoakConfig{
		Simserver: *simserver, Infergate: *infergate,
		InfergateArgs: strings.Fields(*igArgs), SimserverArgs: strings.Fields(*simArgs),
		Rate: *rate, Arrival: arr, Duration: *dur, Sample: *sample, Baseline: *baseline, Tolerance: *tolerance,
		JunkFraction: zeroAsNone(*junk), StreamFraction: zeroAsNone(*stream), StreamMessages: *streamN,
		ShortFraction: zeroAsNone(*short), ShortMin: *shortMin, ShortMax: *shortMax,
		Timeout: *timeout, Conns: *conns, Seed: *seed, KeepWorkDir: *keep, Log: stderr,
	}
	if err := cfg.Validate(); err != nil {
		return usageError{err}
	}
	rep, err := scenario.RunSoak(ctx, cfg)
	if err != nil {
		return err
	}
	md := rep.Markdown()
	fmt.Fprint(stdout, md)
	if *outDir != "" {
		if err := saveReport(*outDir, "soak", rep, md); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "bench: soak: wrote %s, %s\n", filepath.Join(*outDir, "soak.json"), filepath.Join(*outDir, "soak.md"))
	}
	if rep.Verdict == scenario.SoakFail {
		return errSoakFailed
	}
	return nil
}

// zeroAsNone maps a flag's explicit 0 to the config's "none" (negative),
// since the config reads zero as its default.
func zeroAsNone(v float64) float64 {
	if v == 0 {
		return -1
	}
	return v
}
