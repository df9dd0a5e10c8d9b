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

// runBalance is "bench balance".
func runBalance(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench balance", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		simserver = fs.String("simserver", "bin/simserver", "simserver binary")
		infergate = fs.String("infergate", "bin/infergate", `infergate binary ("" leaves the path out)`)
		igArgs    = fs.String("infergate-args", "", "extra infergate arguments, space-separated")
		igB       = fs.String("infergate-b", "", "a second infergate binary (another build), path infergate-b, measured in the same run")
		nginx     = fs.String("nginx", "/usr/sbin/nginx", `nginx binary ("" leaves the path out)`)
		workers   = fs.String("nginx-workers", "auto", "nginx worker_processes")
		haproxy   = fs.String("haproxy", "auto", `haproxy binary; "auto" looks on PATH, then /usr/sbin/haproxy; "" leaves it out`)
		hpThreads = fs.Int("haproxy-threads", 2, "HAProxy nbthread")
		rr        = fs.Bool("roundrobin", false, "also measure HAProxy balance roundrobin")
		replicas  = fs.Int("replicas", 4, "simserver replicas")
		rate      = fs.Float64("rate", 400, "open-loop calls per second")
		inFlight  = fs.Int("workers", 64, "calls in flight at most (the open loop's workers)")
		conns     = fs.Int("conns", 1, "client connections")
		healthy   = fs.Duration("healthy", 8*time.Second, "healthy phase")
		slow      = fs.Duration("slow", 15*time.Second, "phase with one replica slow")
		slowdown  = fs.Float64("slowdown", 4, "the slow replica's factor")
		killRate  = fs.Float64("kill-rate", 200, "open-loop calls per second of the kill phase")
		killFor   = fs.Duration("kill", 10*time.Second, "kill phase: replica 2 killed a third of the way in, started again after (0: none)")
		rounds    = fs.Int("repeat", 2, "interleaved rounds")
		outDir    = fs.String("out", "", "write balance.json and balance.md into this folder")
		keep      = fs.Bool("keep", false, "keep the work folder")
	)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("balance: unexpected argument %q", fs.Arg(0))}
	}
	if *replicas < 2 || *rate <= 0 || *inFlight <= 0 || *conns <= 0 || *healthy <= 0 || *slow <= 0 || *slowdown <= 0 || *rounds <= 0 {
		return usageError{fmt.Errorf("balance: -replicas must be 2 or more, -rate, -workers, -conns, -healthy, -slow, -slowdown and -repeat positive")}
	}
	hpBin, hpSkipped := haproxyFlag(*haproxy)
	cfg := scenario.BalanceConfig{
		Simserver: *simserver, Infergate: *infergate, InfergateArgs: strings.Fields(*igArgs), InfergateB: *igB,
		Nginx: *nginx, NginxWorkers: *workers, HAProxy: hpBin, HAProxySkipped: hpSkipped, HAProxyThreads: *hpThreads,
		RoundRobin: *rr, Replicas: *replicas, Rate: *rate, Workers: *inFlight, Conns: *conns,
		Healthy: *healthy, Slow: *slow, Slowdown: *slowdown, KillRate: *killRate, KillFor: *killFor,
		Rounds: *rounds, KeepWorkDir: *keep, Log: stderr,
	}
	if err := cfg.Validate(); err != nil {
		return usageError{err}
	}
	res, err := scenario.RunBalance(ctx, cfg)
	if err != nil {
		return err
	}
	md := res.Markdown()
	fmt.Fprint(stdout, md)
	if *outDir != "" {
		if err := saveReport(*outDir, "balance", res, md); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "bench: balance: wrote %s\n", filepath.Join(*outDir, "balance.md"))
	}
	return nil
}
