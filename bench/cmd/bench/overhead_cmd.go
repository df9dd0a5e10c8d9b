package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/infergate/infergate/bench/load"
	"github.com/infergate/infergate/bench/report"
	"github.com/infergate/infergate/bench/scenario"
)

// runOverhead is "bench overhead".
func runOverhead(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench overhead", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		simserver = fs.String("simserver", "bin/simserver", "simserver binary")
		infergate = fs.String("infergate", "bin/infergate", `infergate binary ("" leaves the path out)`)
		igArgs    = fs.String("infergate-args", "", "extra infergate arguments, space-separated")
		igBArgs   = fs.String("infergate-b-args", "", "start a second infergate (path infergate-b) with these extra arguments too, measured in the same run")
		nginx     = fs.String("nginx", "/usr/sbin/nginx", `nginx binary ("" leaves the path out)`)
		workers   = fs.String("nginx-workers", "auto", "nginx worker_processes")
		proto     = fs.String("proto", "kserve", "protocol: kserve or tf")
		model     = fs.String("model", "identity_fp32", "model: echoes its input, no simulated latency")
		input     = fs.String("input", "INPUT0", "input name")
		dtype     = fs.String("dtype", "FP32", "input datatype")
		small     = fs.String("small", "1,1024", "small payload shape (~4 KiB of FP32)")
		large     = fs.String("large", "1,262144", "large payload shape (1 MiB of FP32)")
		cSmall    = fs.Int("c-small", 32, "closed-loop concurrency for the small payload")
		cLarge    = fs.Int("c-large", 8, "closed-loop concurrency for the large payload")
		dur       = fs.Duration("d", 5*time.Second, "duration of each measurement")
		warmup    = fs.Duration("warmup", time.Second, "warmup before each measurement")
		quick     = fs.Bool("quick", false, "smoke test: 1s measurements, 250ms warmup")
		repeat    = fs.Int("repeat", 1, "repetitions; medians and min..max are reported")
		conns     = fs.Int("conns", 2, "client connections per run")
		arrival   = fs.String("arrival", "fixed", "open-loop arrivals: fixed or poisson")
		openBase  = fs.String("open-base", "direct", "open-loop rate is a fraction of this path's max: direct or slowest")
		openFrac  = fs.Float64("open-frac", 0.5, "open-loop rate as a fraction of -open-base's max throughput")
		outDir    = fs.String("out", "", "write overhead.json, overhead.md and runs.md into this folder")
		keep      = fs.Bool("keep", false, "keep the work folder (logs, nginx config)")
	)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("overhead: unexpected argument %q", fs.Arg(0))}
	}
	p, err := load.ParseProtocol(*proto)
	if err != nil {
		return usageError{err}
	}
	arr, err := load.ParseArrival(*arrival)
	if err != nil {
		return usageError{err}
	}
	smallShape, err := load.ParseShape(*small)
	if err != nil {
		return usageError{err}
	}
	largeShape, err := load.ParseShape(*large)
	if err != nil {
		return usageError{err}
	}
	cfg := scenario.OverheadConfig{
		Simserver: *simserver, Infergate: *infergate, Nginx: *nginx, NginxWorkers: *workers,
		InfergateArgs: strings.Fields(*igArgs), InfergateBArgs: strings.Fields(*igBArgs),
		Proto: p, Model: *model, Input: *input, Datatype: strings.ToUpper(*dtype),
		Payloads: []scenario.PayloadSpec{
			{Name: sizeName("small", smallShape, *dtype), Shape: smallShape, Concurrency: *cSmall},
			{Name: sizeName("large", largeShape, *dtype), Shape: largeShape, Concurrency: *cLarge},
		},
		Duration: *dur, Warmup: *warmup, Repeat: *repeat, Conns: *conns, Arrival: arr,
		OpenBase: *openBase, OpenFraction: *openFrac,
		KeepWorkDir: *keep, Log: stderr,
	}
	if *quick {
		cfg.Duration, cfg.Warmup = time.Second, 250*time.Millisecond
	}
	if cfg.Warmup == 0 {
		cfg.Warmup = -1 // Validate reads zero as "default"
	}
	if err := cfg.Validate(); err != nil {
		return usageError{err}
	}
	rep, err := scenario.RunOverhead(ctx, cfg)
	if err != nil {
		return err
	}
	md := rep.Markdown()
	fmt.Fprint(stdout, md)
	if *outDir == "" {
		return nil
	}
	if err := saveReport(*outDir, "overhead", rep, md); err != nil {
		return err
	}
	return report.WriteFile(filepath.Join(*outDir, "runs.md"), []byte(rep.RunsMarkdown()))
}

// sizeName names a payload by its size ("4KiB", "1MiB"), falling back to
// the given word when the datatype is unknown.
func sizeName(fallback string, shape []int64, dtype string) string {
	n, err := load.Tensor{Datatype: dtype, Shape: shape}.ByteSize()
	if err != nil {
		return fallback
	}
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", n>>10)
	default:
		return fmt.Sprintf("%dB", n)
	}
}

// saveReport writes a scenario's report into dir as NAME.json and NAME.md.
func saveReport(dir, name string, rep any, md string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("%s: out: %w", name, err)
	}
	if err := report.WriteJSONFile(filepath.Join(dir, name+".json"), rep); err != nil {
		return err
	}
	return report.WriteFile(filepath.Join(dir, name+".md"), []byte(md))
}
