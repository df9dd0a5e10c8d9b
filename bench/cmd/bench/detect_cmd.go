package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/infergate/infergate/bench/scenario"
)

// errDetectFailed is returned after a run whose verdict is FAIL, once the
// report has been printed and written.
var errDetectFailed = errors.New("detect: verdict FAIL")

// runDetect is "bench detect".
func runDetect(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench detect", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		simserver = fs.String("simserver", "bin/simserver", "simserver binary")
		infergate = fs.String("infergate", "bin/infergate", "infergate binary")
		scale     = fs.Float64("scale", 1440, "simulated seconds per real second (infergate's baseline time_scale); 1440 = a day per minute")
		days      = fs.Float64("days", 14, "simulated days of the normal pattern: the first half learned, the second judged for false alerts")
		rateMin   = fs.Float64("rate-min", 100, "lowest call rate of the pattern (the highest is 1.6x)")
		coldStart = fs.Duration("cold-start", time.Minute, "the days' first stretch, judged for false alerts: a fresh infergate, load ramping from zero over its first half (0: none)")
		light     = fs.Duration("light", 10*time.Minute, "steady light load phase at -light-rate (0: none)")
		lightRate = fs.Float64("light-rate", 20, "calls per second of the light phase")
		calm      = fs.Duration("calm", 30*time.Second, "calm stretch before each incident")
		hold      = fs.Duration("hold", 90*time.Second, "longest an incident is held waiting for its alert")
		creepHold = fs.Duration("creep-hold", 6*time.Minute, "longest the creep is held")
		recovery  = fs.Duration("recovery", 30*time.Second, "recovery after each incident")
		gpuFactor = fs.Float64("gpu-factor", 3, "GPU saturation load as a multiple of the GPU's capacity")
		outDir    = fs.String("out", "", "write detect.json, detect.md, detect.png and detect.svg into this folder")
		keep      = fs.Bool("keep", false, "keep the work folder (process logs, models and rules files)")
	)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("detect: unexpected argument %q", fs.Arg(0))}
	}
	// A flag's explicit 0 means "none" where the config reads 0 as default.
	noneIfZero := func(v float64) float64 {
		if v == 0 {
			return -1
		}
		return v
	}
	lightD := *light
	if lightD == 0 {
		lightD = -1
	}
	coldD := *coldStart
	if coldD == 0 {
		coldD = -1
	}
	cfg := scenario.DetectConfig{
		Simserver: *simserver, Infergate: *infergate, Scale: *scale, Days: noneIfZero(*days), RateMin: *rateMin,
		ColdStart: coldD, Light: lightD, LightRate: *lightRate, Calm: *calm, Hold: *hold, CreepHold: *creepHold, Recovery: *recovery,
		GPUFactor: *gpuFactor, KeepWorkDir: *keep, Log: stderr,
	}
	if err := cfg.Validate(); err != nil {
		return usageError{err}
	}
	rep, err := scenario.RunDetect(ctx, cfg)
	if err != nil {
		return err
	}
	md := rep.Markdown()
	fmt.Fprint(stdout, md)
	if *outDir != "" {
		if err := saveReport(*outDir, "detect", rep, md); err != nil {
			return err
		}
		if err := rep.WritePlots(*outDir); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "bench: detect: wrote detect.json, detect.md, detect.png, detect.svg in %s\n", *outDir)
	}
	if rep.Verdict == scenario.SoakFail {
		return errDetectFailed
	}
	return nil
}
