package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
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
		igB       = fs.String("infergate-b", "", "start a second infergate (path infergate-b) from this binary, another build (say the previous main's), measured in the same run")
		igBEps    = fs.Int("infergate-b-endpoints", 0, "start a second infergate (path infergate-b) whose upstream is the simserver N times over: a pool of N endpoints, for what picking one costs a call")
		nginx     = fs.String("nginx", "/usr/sbin/nginx", `nginx binary ("" leaves the path out)`)
		workers   = fs.String("nginx-workers", "auto", "nginx worker_processes")
		haproxy   = fs.String("haproxy", "auto", `haproxy binary for the path haproxy (h2 both sides, http-reuse always); "auto" looks on PATH, then /usr/sbin/haproxy, and leaves the path out (said in the report) when there is none; "" leaves it out`)
		hpTCP     = fs.Bool("haproxy-tcp", false, "also measure HAProxy in mode tcp (path haproxy-tcp), a plain TCP relay: the floor for big messages")
		hpThreads = fs.Int("haproxy-threads", 2, "HAProxy nbthread")
		proto     = fs.String("proto", "kserve", "protocol: kserve or tf")
		model     = fs.String("model", "identity_fp32", "model: echoes its input, no simulated latency")
		input     = fs.String("input", "INPUT0", "input name")
		dtype     = fs.String("dtype", "FP32", "input datatype")
		small     = fs.String("small", "1,1024", "small payload shape (~4 KiB of FP32)")
		large     = fs.String("large", "1,262144", "large payload shape (1 MiB of FP32)")
		cSmall    = fs.Int("c-small", 32, "closed-loop concurrency for the small payload")
		cLarge    = fs.Int("c-large", 8, "closed-loop concurrency for the large payload")
		sizes     = fs.String("size", "", "payloads, comma-separated, instead of -small/-large: a size (4KiB, 1MiB, 16MiB) of -model's -input, or a simserver model name (simple) for its own inputs")
		callers   = fs.String("c", "", "closed-loop caller counts, comma-separated (8,32), measured for every payload instead of -c-small/-c-large")
		ghz       = fs.String("ghz", "auto", `ghz binary run beside the project's load on every path and load; "auto" looks for ghz on PATH, then ~/go/bin/ghz; "" leaves ghz out`)
		protoDir  = fs.String("proto-dir", "proto/defs", "the .proto definitions ghz reads")
		dur       = fs.Duration("d", 5*time.Second, "duration of each measurement")
		warmup    = fs.Duration("warmup", time.Second, "warmup before each measurement")
		quick     = fs.Bool("quick", false, "smoke test: 1s measurements, 250ms warmup")
		repeat    = fs.Int("repeat", 1, "repetitions; medians and min..max are reported")
		conns     = fs.String("conns", "2", "client connections per run, comma-separated (1,4): every load runs on each")
		arrival   = fs.String("arrival", "fixed", "open-loop arrivals: fixed or poisson")
		openBase  = fs.String("open-base", "direct", "open-loop rate is a fraction of this path's max: direct or slowest")
		openFrac  = fs.Float64("open-frac", 0.5, "open-loop rate as a fraction of -open-base's max throughput")
		outDir    = fs.String("out", "", "write overhead.json, overhead.md and runs.md into this folder")
		keep      = fs.Bool("keep", false, "keep the work folder (logs, nginx config)")
		byteRelay = fs.Bool("byte-relay", false, "also measure a TCP byte relay (path tcp-relay: splice, parses nothing), the floor of any proxy's cost")
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
	connsList, err := parseInts("conns", *conns)
	if err != nil {
		return usageError{err}
	}
	var callersList []int
	if *callers != "" {
		if callersList, err = parseInts("c", *callers); err != nil {
			return usageError{err}
		}
	}
	payloads := []scenario.PayloadSpec{
		{Name: sizeName("small", smallShape, *dtype), Shape: smallShape, Concurrency: *cSmall},
		{Name: sizeName("large", largeShape, *dtype), Shape: largeShape, Concurrency: *cLarge},
	}
	if *sizes != "" {
		if payloads, err = parseSizes(*sizes, *input, *dtype, *cSmall); err != nil {
			return usageError{err}
		}
	}
	ghzBin, ghzSkipped := *ghz, ""
	switch ghzBin {
	case "auto":
		if ghzBin = scenario.FindGhz(); ghzBin == "" {
			ghzSkipped = "ghz not found on PATH or in ~/go/bin"
		}
	case "":
		ghzSkipped = `-ghz ""`
	}
	hpBin, hpSkipped := haproxyFlag(*haproxy)
	if hpSkipped != "" {
		fmt.Fprintf(stderr, "bench: overhead: haproxy skipped: %s\n", hpSkipped)
	}
	cfg := scenario.OverheadConfig{
		Simserver: *simserver, Infergate: *infergate, Nginx: *nginx, NginxWorkers: *workers,
		HAProxy: hpBin, HAProxySkipped: hpSkipped, HAProxyTCP: *hpTCP && hpBin != "", HAProxyThreads: *hpThreads,
		InfergateArgs: strings.Fields(*igArgs), InfergateBArgs: strings.Fields(*igBArgs), InfergateB: *igB, InfergateBEndpoints: *igBEps,
		Proto: p, Model: *model, Input: *input, Datatype: strings.ToUpper(*dtype),
		Payloads: payloads, Callers: callersList,
		Duration: *dur, Warmup: *warmup, Repeat: *repeat, Conns: connsList, Arrival: arr,
		OpenBase: *openBase, OpenFraction: *openFrac,
		Ghz: ghzBin, GhzSkipped: ghzSkipped, ProtoDir: *protoDir,
		KeepWorkDir: *keep, Log: stderr,
	}
	if *byteRelay {
		self, err := os.Executable()
		if err != nil {
			return fmt.Errorf("overhead: -byte-relay: %w", err)
		}
		cfg.ByteRelay = self
	}
	if ghzSkipped != "" {
		fmt.Fprintf(stderr, "bench: overhead: ghz skipped: %s\n", ghzSkipped)
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

// haproxyFlag reads -haproxy: "auto" finds the binary, or says why there
// is none; "" leaves HAProxy out; anything else is the binary.
func haproxyFlag(v string) (bin, skipped string) {
	switch v {
	case "auto":
		if bin = scenario.FindHAProxy(); bin == "" {
			return "", "haproxy not found on PATH or at /usr/sbin/haproxy"
		}
		return bin, ""
	case "":
		return "", `-haproxy ""`
	}
	return v, ""
}

// parseInts reads a comma-separated list of positive integers.
func parseInts(flagName, s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("overhead: -%s %q: %q is not a positive integer", flagName, s, f)
		}
		out = append(out, n)
	}
	return out, nil
}

// parseSizes reads -size: each item is a simserver model name with known
// inputs (load.ModelDefaults: "simple"), or a byte size ("1MiB", "16MiB",
// "4KiB", "4096") of one input of dtype, shaped [1, n]. concurrency is each
// payload's closed-loop callers when -c is not given.
func parseSizes(s, input, dtype string, concurrency int) ([]scenario.PayloadSpec, error) {
	var out []scenario.PayloadSpec
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if inputs, ok := load.ModelDefaults(item); ok {
			out = append(out, scenario.PayloadSpec{Name: item, Shape: inputs[0].Shape, Concurrency: concurrency, Model: item, Inputs: inputs})
			continue
		}
		n, err := parseBytes(item)
		if err != nil {
			return nil, fmt.Errorf("overhead: -size %q: %w", s, err)
		}
		elem, err := load.Tensor{Name: input, Datatype: dtype, Shape: []int64{1}}.ByteSize()
		if err != nil {
			return nil, fmt.Errorf("overhead: -size %q: %w", s, err)
		}
		if n%elem != 0 {
			return nil, fmt.Errorf("overhead: -size %q: %s is not a whole number of %s elements (%d bytes each)", s, item, dtype, elem)
		}
		shape := []int64{1, int64(n / elem)}
		out = append(out, scenario.PayloadSpec{Name: sizeName(item, shape, dtype), Shape: shape, Concurrency: concurrency})
	}
	return out, nil
}

// parseBytes reads "16MiB", "4KiB" or a plain byte count.
func parseBytes(s string) (int, error) {
	num, mult := s, 1
	for _, u := range []struct {
		suffix string
		mult   int
	}{{"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}} {
		if strings.HasSuffix(s, u.suffix) {
			num, mult = strings.TrimSuffix(s, u.suffix), u.mult
			break
		}
	}
	n, err := strconv.Atoi(num)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%q is neither a known model nor a size like 4KiB, 1MiB or 16MiB", s)
	}
	return n * mult, nil
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
