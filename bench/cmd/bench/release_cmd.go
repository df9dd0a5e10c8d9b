package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/infergate/infergate/bench/scenario"
)

// runRelease is `bench release`: a canary judged by infergate beside
// Flagger's rule on the same calls (scenario/release.go).
func runRelease(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench release", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		simserver = fs.String("simserver", "bin/simserver", "simserver binary")
		infergate = fs.String("infergate", "bin/infergate", "infergate binary")
		rate      = fs.Float64("rate", 100, "open-loop calls per second")
		weight    = fs.Float64("weight", 10, "the canary's weight (percent) in the slow and errors cases")
		steps     = fs.String("steps", "10,25,50,100", "the A/A and fast cases' steps (percent)")
		cases     = fs.String("cases", strings.Join(scenario.ReleaseCases, ","), "cases to run")
		doors     = fs.String("doors", scenario.DoorRelay+","+scenario.DoorGRPC, "doors: relay (plain calls), grpc (gzip calls, handed on to grpc-go)")
		aaRuns    = fs.Int("aa-runs", 20, "A/A runs")
		duration  = fs.Duration("duration", 90*time.Second, "each run's length")
		fast      = fs.Duration("fast-duration", 20*time.Minute, "the fast case's length (and its steps' time limit)")
		minCalls  = fs.Int("min-calls", 200, "the release's minimum candidate calls per step")
		outDir    = fs.String("out", "", "write release.json and release.md into this folder")
		keep      = fs.Bool("keep", false, "keep the work folder")
	)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("release: unexpected argument %q", fs.Arg(0))}
	}
	var stepList []float64
	for _, s := range strings.Split(*steps, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil {
			return usageError{fmt.Errorf("release: -steps: %q is not a number", s)}
		}
		stepList = append(stepList, v)
	}
	cfg := scenario.ReleaseConfig{
		Infergate: *infergate, Simserver: *simserver, Rate: *rate, Weight: *weight, Steps: stepList,
		Cases: strings.Split(*cases, ","), Doors: strings.Split(*doors, ","), AARuns: *aaRuns,
		Duration: *duration, FastDuration: *fast, MinCalls: *minCalls, KeepWorkDir: *keep, Log: stderr,
	}
	if err := cfg.Validate(); err != nil {
		return usageError{err}
	}
	res, err := scenario.RunRelease(ctx, cfg)
	if res == nil {
		return err
	}
	md := res.Markdown()
	fmt.Fprint(stdout, md)
	if *outDir != "" {
		if err := saveReport(*outDir, "release", res, md); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "bench: release: wrote %s\n", filepath.Join(*outDir, "release.md"))
	}
	return err
}
