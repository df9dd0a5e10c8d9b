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

// runFairness is "bench fairness".
func runFairness(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench fairness", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		simserver = fs.String("simserver", "bin/simserver", "simserver binary")
		infergate = fs.String("infergate", "bin/infergate", `infergate binary ("" leaves the path out)`)
		igArgs    = fs.String("infergate-args", "", "extra infergate arguments, space-separated (--flow-control is always given)")
		noFlow    = fs.Bool("no-flow", true, "also measure infergate without flow control")
		haproxy   = fs.String("haproxy", "auto", `haproxy binary; "auto" looks on PATH, then /usr/sbin/haproxy; "" leaves it out`)
		hpThreads = fs.Int("haproxy-threads", 2, "HAProxy nbthread")
		hpMaxConn = fs.Int("haproxy-maxconn", 2, "HAProxy's server maxconn: calls over it wait in HAProxy's queue, in priority class order")
		capacity  = fs.Float64("capacity", 0, "the model's saturated calls/s (0: measured first)")
		duration  = fs.Duration("duration", 15*time.Second, "each case's measured time (and the first tenant's alone)")
		timeout   = fs.Duration("timeout", 2*time.Second, "each call's deadline")
		rounds    = fs.Int("repeat", 2, "interleaved rounds")
		cases     = fs.String("cases", "", "comma-separated cases to run (overload, critical-heavy, unsaturated; default all)")
		outDir    = fs.String("out", "", "write fairness.json and fairness.md into this folder")
		keep      = fs.Bool("keep", false, "keep the work folder")
	)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("fairness: unexpected argument %q", fs.Arg(0))}
	}
	if *capacity < 0 || *duration <= 0 || *timeout <= 0 || *rounds <= 0 || *hpMaxConn <= 0 {
		return usageError{fmt.Errorf("fairness: -duration, -timeout, -repeat and -haproxy-maxconn must be positive, -capacity not negative")}
	}
	hpBin, hpSkipped := haproxyFlag(*haproxy)
	cfg := scenario.FairnessConfig{
		Simserver: *simserver, Infergate: *infergate, InfergateArgs: strings.Fields(*igArgs), NoFlow: *noFlow,
		HAProxy: hpBin, HAProxySkipped: hpSkipped, HAProxyThreads: *hpThreads, HAProxyMaxConn: *hpMaxConn,
		Capacity: *capacity, Only: strings.FieldsFunc(*cases, func(r rune) bool { return r == ',' }), Duration: *duration, Timeout: *timeout, Rounds: *rounds, KeepWorkDir: *keep, Log: stderr,
	}
	if err := cfg.Validate(); err != nil {
		return usageError{err}
	}
	res, err := scenario.RunFairness(ctx, cfg)
	if err != nil {
		return err
	}
	md := res.Markdown()
	fmt.Fprint(stdout, md)
	if *outDir != "" {
		if err := saveReport(*outDir, "fairness", res, md); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "bench: fairness: wrote %s\n", filepath.Join(*outDir, "fairness.md"))
	}
	return nil
}
