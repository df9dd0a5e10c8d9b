package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/infergate/infergate/bench/scenario"
)

// runUploads is "bench uploads".
func runUploads(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench uploads", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		simserver = fs.String("simserver", "bin/simserver", "simserver binary")
		infergate = fs.String("infergate", "bin/infergate", `infergate binary ("" leaves the path out)`)
		igArgs    = fs.String("infergate-args", "", "extra infergate arguments, space-separated (none: its defaults)")
		nginx     = fs.String("nginx", "/usr/sbin/nginx", `nginx binary ("" leaves the path out)`)
		workers   = fs.String("nginx-workers", "auto", "nginx worker_processes")
		haproxy   = fs.String("haproxy", "auto", `haproxy binary; "auto" looks on PATH, then /usr/sbin/haproxy, and leaves the path out (said in the report) when there is none; "" leaves it out`)
		hpThreads = fs.Int("haproxy-threads", 2, "HAProxy nbthread")
		callers   = fs.Int("c", 100, "callers, each on its own connection")
		size      = fs.String("bytes", "4MiB", "request tensor size (4MiB, 1MiB, 65536): FP32 for model -model, which echoes it")
		model     = fs.String("model", "identity_fp32", "simserver identity model")
		dur       = fs.Duration("d", 10*time.Second, "duration of each run")
		repeat    = fs.Int("repeat", 3, "rounds; each runs every path once (interleaved); medians and min..max are reported")
		timeout   = fs.Duration("timeout", 30*time.Second, "deadline of each call")
		sample    = fs.Duration("sample", 100*time.Millisecond, "RSS sampling interval")
		outDir    = fs.String("out", "", "write uploads.json and uploads.md into this folder")
		keep      = fs.Bool("keep", false, "keep the work folder (logs, nginx and haproxy configs)")
	)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("uploads: unexpected argument %q", fs.Arg(0))}
	}
	n, err := parseBytes(*size)
	if err != nil {
		return usageError{fmt.Errorf("uploads: -bytes %q: want a size like 4MiB, 1MiB, 64KiB or 65536", *size)}
	}
	if *callers <= 0 || *dur <= 0 || *repeat <= 0 || *timeout <= 0 || *sample <= 0 {
		return usageError{fmt.Errorf("uploads: -c, -d, -repeat, -timeout and -sample must be positive")}
	}
	hpBin, hpSkipped := haproxyFlag(*haproxy)
	if hpSkipped != "" {
		fmt.Fprintf(stderr, "bench: uploads: haproxy skipped: %s\n", hpSkipped)
	}
	cfg := scenario.UploadsConfig{
		Simserver: *simserver, Infergate: *infergate, InfergateArgs: strings.Fields(*igArgs),
		Nginx: *nginx, NginxWorkers: *workers,
		HAProxy: hpBin, HAProxySkipped: hpSkipped, HAProxyThreads: *hpThreads,
		Callers: *callers, Bytes: n, Model: *model, Duration: *dur, Repeat: *repeat,
		CallTimeout: *timeout, Sample: *sample, KeepWorkDir: *keep, Log: stderr,
	}
	if err := cfg.Validate(); err != nil {
		return usageError{err}
	}
	rep, err := scenario.RunUploads(ctx, cfg)
	if err != nil {
		return err
	}
	md := rep.Markdown()
	fmt.Fprint(stdout, md)
	if *outDir != "" {
		if err := saveReport(*outDir, "uploads", rep, md); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "bench: uploads: wrote %s, %s\n", filepath.Join(*outDir, "uploads.json"), filepath.Join(*outDir, "uploads.md"))
	}
	return nil
}
