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

	"github.com/infergate/infergate/bench/scenario"
)

// errFailoverFailed is returned after a run whose verdict is FAIL, once
// the report has been printed and written.
var errFailoverFailed = errors.New("failover: verdict FAIL")

// runFailover is "bench failover".
func runFailover(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench failover", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		simserver = fs.String("simserver", "bin/simserver", "simserver binary (the primary and the edge)")
		infergate = fs.String("infergate", "bin/infergate", "infergate binary")
		igArgs    = fs.String("infergate-args", "", "extra infergate arguments, space-separated")
		flagsOnly = fs.Bool("flags-only", false, "start infergate with --upstream/--fallback instead of a --config file naming the upstreams (breaker and hedge flags unused)")
		rate      = fs.Float64("rate", 200, "open-loop calls per second (KServe ModelInfer on resnet50), latency from intended send times")
		timeout   = fs.Duration("timeout", time.Second, "deadline of every call")
		faultTime = fs.Duration("fault", 20*time.Second, "how long each fault is held")
		recovery  = fs.Duration("recovery", 20*time.Second, "recovery after each heal")
		lead      = fs.Duration("lead", 5*time.Second, "steady load before the first fault")
		faults    = fs.String("faults", strings.Join(scenario.FailoverFaults, ","), "faults to inject, in order")
		conns     = fs.Int("conns", 4, "client connections")
		slots     = fs.Int("primary-slots", 4, "resnet50's execution slots on the primary")
		consec    = fs.Int("consecutive-failures", 5, "breaker: consecutive failures that open it")
		ratio     = fs.Float64("failure-ratio", 0.5, "breaker: failure ratio over -window that opens it")
		minCalls  = fs.Int("min-calls", 20, "breaker: calls in -window before the ratio counts")
		window    = fs.Duration("window", 10*time.Second, "breaker: window of the failure ratio")
		slowCall  = fs.Duration("slow-call", 250*time.Millisecond, "breaker: a call slower than this counts as failed")
		openFor   = fs.Duration("open-for", 2*time.Second, "breaker: time open before probing")
		probes    = fs.Int("probes", 5, "breaker: calls let through half-open")
		hedge     = fs.Duration("hedge-after", 100*time.Millisecond, "route: send to the fallback too after this long without an answer")
		outDir    = fs.String("out", "", "write failover.json, failover.md, failover.png, failover.svg and calls.csv into this folder")
		keep      = fs.Bool("keep", false, "keep the work folder (process logs, config files)")
	)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("failover: unexpected argument %q", fs.Arg(0))}
	}
	if *rate <= 0 || *timeout <= 0 || *faultTime <= 0 || *recovery <= 0 || *lead < 0 || *hedge <= 0 {
		return usageError{errors.New("failover: -rate, -timeout, -fault, -recovery and -hedge-after must be positive")}
	}
	leadD := *lead
	if leadD == 0 {
		leadD = time.Nanosecond // the config reads zero as its default
	}
	cfg := scenario.FailoverConfig{
		Simserver: *simserver, Infergate: *infergate, InfergateArgs: strings.Fields(*igArgs), FlagsOnly: *flagsOnly,
		Rate: *rate, Timeout: *timeout, FaultTime: *faultTime, Recovery: *recovery, Lead: leadD,
		Faults: strings.Split(*faults, ","), Conns: *conns, PrimarySlots: *slots, HedgeAfter: *hedge,
		Breaker: scenario.FailoverBreaker{ConsecutiveFailures: *consec, FailureRatio: *ratio, MinCalls: *minCalls,
			Window: *window, SlowCall: *slowCall, OpenFor: *openFor, Probes: *probes},
		KeepWorkDir: *keep, Log: stderr,
	}
	if err := cfg.Validate(); err != nil {
		return usageError{err}
	}
	rep, err := scenario.RunFailover(ctx, cfg)
	if err != nil {
		return err
	}
	md := rep.Markdown()
	fmt.Fprint(stdout, md)
	if *outDir != "" {
		if err := saveReport(*outDir, "failover", rep, md); err != nil {
			return err
		}
		if err := rep.WritePlots(*outDir); err != nil {
			return err
		}
		if err := rep.WriteCallsCSV(filepath.Join(*outDir, "calls.csv")); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "bench: failover: wrote failover.json, failover.md, failover.png, failover.svg, calls.csv in %s\n", *outDir)
	}
	if rep.Verdict == scenario.SoakFail {
		return errFailoverFailed
	}
	return nil
}
