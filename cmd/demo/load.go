package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// maxLag is how far a stream may fall behind its arrival schedule before
// it skips ahead instead of bursting to catch up (after a suspended
// laptop, say).
const maxLag = time.Second

// stream is one open-loop request stream: Poisson arrivals at rate per
// second, each request built by newCall and run in its own goroutine.
type stream struct {
	name string
	rate float64
	// newCall builds one request from the stream's private rng and
	// returns the call that sends it.
	newCall func(rng *rand.Rand) func(ctx context.Context) error
}

// generator drives streams open-loop: arrivals never wait for responses,
// so a slow upstream shows up as latency rather than as fewer requests
// (no coordinated omission). In-flight calls are capped per stream, so a
// model that falls behind (the injected fault) cannot starve the others;
// an arrival over the cap is counted as shed and not sent.
type generator struct {
	streams []stream
	// callTimeout bounds each call; 0 means 10s.
	callTimeout time.Duration
	seed        uint64

	sems  []chan struct{} // one in-flight cap per stream
	wg    sync.WaitGroup
	stats loadStats
}

// newGenerator returns a generator for streams with at most maxInflight
// calls at once per stream (at least 1).
func newGenerator(streams []stream, maxInflight int, seed uint64) *generator {
	maxInflight = max(maxInflight, 1)
	g := &generator{streams: streams, seed: seed, sems: make([]chan struct{}, len(streams))}
	for i := range g.sems {
		g.sems[i] = make(chan struct{}, maxInflight)
	}
	return g
}

// run sends load until ctx ends, then waits for the calls in flight to
// finish (each within its own timeout) and returns.
func (g *generator) run(ctx context.Context) {
	var streams sync.WaitGroup
	for i, s := range g.streams {
		if s.rate <= 0 {
			continue
		}
		rng := rand.New(rand.NewPCG(g.seed, uint64(i)+1))
		streams.Go(func() { g.runStream(ctx, s, g.sems[i], rng) })
	}
	streams.Wait()
	g.wg.Wait()
}

// runStream schedules s's arrivals from intended send times, so the
// schedule does not drift with how long sending takes.
func (g *generator) runStream(ctx context.Context, s stream, sem chan struct{}, rng *rand.Rand) {
	next := time.Now()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		next = next.Add(time.Duration(rng.ExpFloat64() / s.rate * float64(time.Second)))
		now := time.Now()
		if d := next.Sub(now); d > 0 {
			timer.Reset(d)
			select {
			case <-ctx.Done():
				return
			case <-timer.C:
			}
		} else {
			if ctx.Err() != nil {
				return
			}
			if -d > maxLag {
				next = now
			}
		}
		call := s.newCall(rng)
		select {
		case sem <- struct{}{}:
		default:
			g.stats.shed.Add(1)
			continue
		}
		g.stats.sent.Add(1)
		g.wg.Go(func() { g.do(call, sem) })
	}
}

// do runs one call on a context of its own: stopping the load lets calls
// in flight finish rather than cancelling them into errors.
func (g *generator) do(call func(ctx context.Context) error, sem <-chan struct{}) {
	defer func() { <-sem }()
	timeout := g.callTimeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	g.stats.record(status.Code(call(ctx)))
}

// snapshot returns the totals so far.
func (g *generator) snapshot() loadSnapshot {
	s := g.stats.snapshot()
	for _, sem := range g.sems {
		s.InFlight += len(sem)
	}
	return s
}

// numCodes covers the gRPC codes defined today (OK through
// Unauthenticated); anything beyond is counted as Unknown.
const numCodes = int(codes.Unauthenticated) + 1

// loadStats counts what the generator did; safe for concurrent use.
type loadStats struct {
	sent  atomic.Uint64
	shed  atomic.Uint64
	codes [numCodes]atomic.Uint64
}

func (s *loadStats) record(c codes.Code) {
	if int(c) >= numCodes {
		c = codes.Unknown
	}
	s.codes[c].Add(1)
}

func (s *loadStats) snapshot() loadSnapshot {
	out := loadSnapshot{Sent: s.sent.Load(), Shed: s.shed.Load(), Errors: map[codes.Code]uint64{}}
	for c := range s.codes {
		n := s.codes[c].Load()
		if codes.Code(c) == codes.OK {
			out.OK = n
		} else if n > 0 {
			out.Errors[codes.Code(c)] = n
		}
	}
	return out
}

// loadSnapshot is the generator's totals at one moment.
type loadSnapshot struct {
	Sent, OK, Shed uint64
	InFlight       int
	Errors         map[codes.Code]uint64
}

// String renders the totals on one line, errors by code, e.g.
// "sent 1200  ok 1190  errors 10 (Unavailable 10)  shed 0  in flight 3".
func (s loadSnapshot) String() string {
	var total uint64
	cs := make([]codes.Code, 0, len(s.Errors))
	for c, n := range s.Errors {
		total += n
		cs = append(cs, c)
	}
	sort.Slice(cs, func(i, j int) bool { return cs[i] < cs[j] })
	var b strings.Builder
	fmt.Fprintf(&b, "sent %d  ok %d  errors %d", s.Sent, s.OK, total)
	if len(cs) > 0 {
		parts := make([]string, len(cs))
		for i, c := range cs {
			parts[i] = fmt.Sprintf("%s %d", c, s.Errors[c])
		}
		fmt.Fprintf(&b, " (%s)", strings.Join(parts, ", "))
	}
	fmt.Fprintf(&b, "  shed %d  in flight %d", s.Shed, s.InFlight)
	return b.String()
}
