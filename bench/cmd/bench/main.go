package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run dispatches to a subcommand and returns the exit code: 0 success,
// 1 failure, 2 usage error.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	var err error
	switch args[0] {
	case "load":
		err = runLoad(ctx, args[1:], stdout, stderr)
	case "overhead":
		err = runOverhead(ctx, args[1:], stdout, stderr)
	case "batching":
		err = runBatching(ctx, args[1:], stdout, stderr)
	case "soak":
		err = runSoak(ctx, args[1:], stdout, stderr)
	case "detect":
		err = runDetect(ctx, args[1:], stdout, stderr)
	case "failover":
		err = runFailover(ctx, args[1:], stdout, stderr)
	case "relay":
		err = runRelay(ctx, args[1:], stdout, stderr)
	case "attack":
		err = runAttack(ctx, args[1:], stdout, stderr)
	case "uploads":
		err = runUploads(ctx, args[1:], stdout, stderr)
	case "balance":
		err = runBalance(ctx, args[1:], stdout, stderr)
	case "fairness":
		err = runFairness(ctx, args[1:], stdout, stderr)
	case "release":
		err = runRelease(ctx, args[1:], stdout, stderr)
	case "-h", "-help", "--help", "help":
		usage(stdout)
		return 0
	default:
		fmt.Fprintf(stderr, "bench: unknown command %q\n", args[0])
		usage(stderr)
		return 2
	}
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, new(usageError)):
		fmt.Fprintln(stderr, "bench:", err)
		return 2
	default:
		fmt.Fprintln(stderr, "bench:", err)
		return 1
	}
}

// usageError marks bad flags, reported with exit code 2.
type usageError struct{ err error }

func (u usageError) Error() string { return u.err.Error() }
func (u usageError) Unwrap() error { return u.err }

func usage(w io.Writer) {
	fmt.Fprint(w, `usage: bench <command> [flags]

commands:
  load      one closed- or open-loop run against a loopback gRPC target
  overhead  direct vs infergate vs nginx vs HAProxy, small and 1 MiB
            payloads (-byte-relay, -haproxy-tcp: and vs TCP byte relays,
            the floor of any proxy)
  batching  batching off vs static vs adaptive under open-loop load
  soak      a long production-like mix through infergate: RSS, goroutines,
            /metrics and latency sampled over time, with a leak verdict
  detect    compressed days of diurnal load, then injected incidents: time
            from injection to firing of the default alert rules, false
            alerts, and what a Prometheus p99 rule would have done
  failover  a primary and an edge model server behind infergate, five faults
            injected on the primary (hang, errors, slowdown, dropped
            connections, kill): time to fall over and back, failed calls,
            route flips
  relay     a TCP byte relay (splice, parses nothing): the path
            tcp-relay of bench overhead
  attack    one misbehaving HTTP/2 client against a loopback server or
            proxy (rapid-reset, empty-headers, hold-streams, never-read,
            huge-length, malformed-neighbour, big-uploads); prints what it
            sent and how the server answered
  uploads   100 callers on 100 connections sending 4 MiB requests through
            infergate, nginx and HAProxy in interleaved rounds: calls,
            throughput, p50/p99 and each proxy's peak RSS
  balance   N simserver replicas behind infergate, HAProxy leastconn and
            nginx least_conn in interleaved rounds, healthy then with one
            replica made slow: p99 and the share of calls on the slow one
  fairness  tenants with their own rates and priorities saturating one
            model, through infergate's flow control and HAProxy's
            set-priority-class: each tenant's goodput and p99, and Jain's
            index against the max-min fair shares
  release   a canary of resnet50 version 2 (A/A, 1.3x slower, +2 points of
            errors, 0.8x faster, a shadow that disagrees on 3%) judged by
            infergate and by Flagger's rule on the same calls, on both doors

Run "bench <command> -h" for the flags of a command.
`)
}
