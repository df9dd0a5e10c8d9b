package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/infergate/infergate/proto/kservepb"
	"github.com/infergate/infergate/proto/tfservingpb"
)

// The demo's fixed addresses, Triton's usual ports for simserver; a busy
// one is replaced by a free port.
const (
	simGRPC   = "127.0.0.1:8001"
	simAdmin  = "127.0.0.1:8002"
	gateGRPC  = "127.0.0.1:9001"
	gateAdmin = "127.0.0.1:9091"
)

// The fault the demo injects, and the shortest run that shows it for a
// while (-seconds 0, run until stopped, always does).
var (
	demoFault       = faultPlan{model: "resnet50", slowdown: 1.6, at: 45 * time.Second, dur: 15 * time.Second}
	minFaultSeconds = 50
	// storySeconds is the shortest run that shows the fault's whole
	// story: alert, route to the fallback, heal, resolution and the
	// route back. The alert keeps firing 30s after its last bad 5s
	// window, which is at the heal (60s) at the latest: it resolves by
	// 95s, and the route goes back with it (measured: 84s, issue 49).
	storySeconds = 100
)

// maxMsgSize raises gRPC's 4 MiB default, as Triton clients must.
const maxMsgSize = 64 << 20

// errChildDied is returned when simserver or infergate exits on its own.
var errChildDied = errors.New("demo: a child process died")

func main() {
	o, err := parseFlags(os.Args[1:], os.Stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if err := run(context.Background(), o, os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, errChildDied) {
			fmt.Fprintln(os.Stderr, err)
		}
		os.Exit(1)
	}
}

// options are the parsed flags.
type options struct {
	seconds     int
	rateScale   float64
	noFault     bool
	verbose     bool
	binDir      string
	interval    time.Duration
	maxInflight int
	seed        uint64
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&o.seconds, "seconds", 0, "stop after this many seconds; 0 runs until Ctrl-C or SIGTERM")
	fs.Float64Var(&o.rateScale, "rate-scale", 1, "multiply every load stream's request rate by this")
	fs.BoolVar(&o.noFault, "no-fault", false, "do not inject the resnet50 slowdown fault")
	fs.BoolVar(&o.verbose, "v", false, "forward the children's log lines, prefixed [simserver] / [infergate]")
	fs.StringVar(&o.binDir, "bin", "", "directory holding simserver and infergate (default: this program's directory)")
	fs.DurationVar(&o.interval, "interval", 2*time.Second, "table refresh interval")
	fs.IntVar(&o.maxInflight, "max-inflight", 256, "cap on load requests in flight per stream; arrivals over it are shed")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of the load's arrival times and payloads")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	switch {
	case fs.NArg() > 0:
		return o, fmt.Errorf("demo: unexpected arguments: %v", fs.Args())
	case o.seconds < 0:
		return o, fmt.Errorf("demo: -seconds: must be >= 0, got %d", o.seconds)
	case o.rateScale < 0:
		return o, fmt.Errorf("demo: -rate-scale: must be >= 0, got %g", o.rateScale)
	case o.interval <= 0:
		return o, fmt.Errorf("demo: -interval: must be > 0, got %s", o.interval)
	case o.maxInflight < 1:
		return o, fmt.Errorf("demo: -max-inflight: must be >= 1, got %d", o.maxInflight)
	}
	return o, nil
}

// run is the whole demo: children up, load, live table, orderly stop.
func run(ctx context.Context, o options, stdout, stderr io.Writer) error {
	ctx, stopSignals := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stopSignals()

	binDir := o.binDir
	if binDir == "" {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("demo: find bin directory: %w", err)
		}
		if exe, err = filepath.EvalSymlinks(exe); err != nil {
			return fmt.Errorf("demo: find bin directory: %w", err)
		}
		binDir = filepath.Dir(exe)
	}
	spec := func(name string) childSpec {
		return childSpec{name: name, path: filepath.Join(binDir, name), verbose: o.verbose, logOut: stderr}
	}

	sim, err := startOnFreePorts(ctx, spec("simserver"), simGRPC, simAdmin, stderr, func(g, a string) []string {
		return []string{"--listen", g, "--admin", a}
	})
	if err != nil {
		return err
	}
	defer sim.Stop()
	tmp, err := os.MkdirTemp("", "infergate-demo-")
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	defer os.RemoveAll(tmp)
	rules, err := writeDemoRules(tmp)
	if err != nil {
		return err
	}
	gate, err := startOnFreePorts(ctx, spec("infergate"), gateGRPC, gateAdmin, stderr, func(g, a string) []string {
		return []string{"--listen", g, "--admin", a, "--upstream", sim.grpcAddr, "--log-level", "info",
			"--gpu-source", "prometheus", "--gpu-metrics-url", "http://" + sim.adminAddr + "/metrics",
			"--fallback", fmt.Sprintf(demoFallback, sim.grpcAddr), "--rules", rules}
	})
	if err != nil {
		return err
	}
	defer gate.Stop() // deferred last, so it stops before simserver

	hc := &http.Client{Timeout: 2 * time.Second}
	if err := waitReady(ctx, hc, gate, sim, stderr); err != nil {
		return err
	}

	cc, err := grpc.NewClient(gate.grpcAddr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMsgSize), grpc.MaxCallSendMsgSize(maxMsgSize)))
	if err != nil {
		return fmt.Errorf("demo: dial infergate: %w", err)
	}
	defer cc.Close()
	gen := newGenerator(demoStreams(kservepb.NewGRPCInferenceServiceClient(cc), tfservingpb.NewPredictionServiceClient(cc), o.rateScale),
		o.maxInflight, o.seed)

	tty := isTerminal(stdout)
	guide := guideText(gate.grpcAddr, gate.adminAddr, sim.grpcAddr, sim.adminAddr) + streamsText(gen.streams, o) + "\n" + legend
	if !tty {
		fmt.Fprintln(stdout, guide)
	}

	start := time.Now()
	events := &eventLog{}
	announce := func(msg string) {
		events.add(fmt.Sprintf("[%s] %s", time.Since(start).Truncate(time.Second), msg))
	}
	loadCtx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	var bg sync.WaitGroup
	bg.Go(func() { gen.run(loadCtx) })
	if !o.noFault && (o.seconds == 0 || o.seconds >= minFaultSeconds) {
		bg.Go(func() { runFault(loadCtx, httpFaults{hc: hc, admin: sim.adminAddr}, demoFault, announce) })
	}
	bg.Go(func() { watchAlerts(loadCtx, hc, gate.adminAddr, announce) })
	bg.Go(func() { watchRoutes(loadCtx, hc, gate.adminAddr, announce) })

	draw := func(final bool) {
		// A context of its own: the final frame is drawn after ctx ends.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		f := frame{elapsed: time.Since(start), now: time.Now(), final: final, load: gen.snapshot()}
		f.series, f.seriesErr = fetchSeries(dctx, hc, gate.adminAddr)
		f.gpu, f.gpuErr = fetchGPU(dctx, hc, gate.adminAddr)
		f.alerts, f.alertsErr = fetchAlerts(dctx, hc, gate.adminAddr)
		if tty {
			f.guide = guide
			f.events = events.last(6)
			io.WriteString(stdout, clearScreen)
		} else {
			f.events = events.unseen()
			io.WriteString(stdout, "\n")
		}
		renderFrame(stdout, f)
	}

	var deadline <-chan time.Time
	if o.seconds > 0 {
		t := time.NewTimer(time.Duration(o.seconds) * time.Second)
		defer t.Stop()
		deadline = t.C
	}
	tick := time.NewTicker(o.interval)
	defer tick.Stop()
	var died *child
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case <-deadline:
			break loop
		case <-sim.Done():
			died = sim
			break loop
		case <-gate.Done():
			died = gate
			break loop
		case <-tick.C:
			draw(false)
		}
	}
	// A second Ctrl-C now kills the demo at once (the children follow
	// through their death signal).
	stopSignals()
	stopLoad()
	bg.Wait()

	if died != nil {
		fmt.Fprintf(stderr, "demo: %s exited unexpectedly (%v)%s\n", died.Name, died.Err(), died.Tail())
		return errChildDied
	}
	draw(true)
	fmt.Fprintln(stdout, "\nstopping infergate and simserver ...")
	gate.Stop()
	sim.Stop()
	fmt.Fprintln(stdout, "done")
	return nil
}

// startOnFreePorts starts a child on grpcAddr and adminAddr, or on free
// ports (":0") for whichever is busy; if the child still fails to start
// on a fixed port (it was taken meanwhile), it retries once on free ports.
func startOnFreePorts(ctx context.Context, spec childSpec, grpcAddr, adminAddr string, stderr io.Writer, args func(g, a string) []string) (*child, error) {
	g, a := freeOr(grpcAddr), freeOr(adminAddr)
	for _, p := range [][2]string{{grpcAddr, g}, {adminAddr, a}} {
		if p[0] != p[1] {
			fmt.Fprintf(stderr, "demo: %s is busy; %s takes a free port\n", p[0], spec.name)
		}
	}
	spec.args = args(g, a)
	c, err := startChild(ctx, spec)
	if err == nil || ctx.Err() != nil || (g == anyPort && a == anyPort) {
		return c, err
	}
	fmt.Fprintf(stderr, "demo: %v\ndemo: retrying %s on free ports\n", err, spec.name)
	spec.args = args(anyPort, anyPort)
	return startChild(ctx, spec)
}

// anyPort asks the child to bind a free loopback port.
const anyPort = "127.0.0.1:0"

// freeOr returns addr if it can be bound now, otherwise anyPort.
func freeOr(addr string) string {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return anyPort
	}
	l.Close()
	return addr
}

// readyTimeout bounds the wait for infergate's /readyz.
const readyTimeout = 10 * time.Second

// waitReady polls infergate's /readyz until it answers 200. A child that
// dies meanwhile is an error; a gate that stays unready only earns a
// warning, because the table shows what happens anyway.
func waitReady(ctx context.Context, hc *http.Client, gate, sim *child, stderr io.Writer) error {
	deadline := time.Now().Add(readyTimeout)
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		body, err := httpGet(ctx, hc, "http://"+gate.adminAddr+"/readyz")
		if err == nil {
			body.Close()
			return nil
		}
		if time.Now().After(deadline) {
			fmt.Fprintf(stderr, "demo: infergate not ready after %s (%v); going on\n", readyTimeout, err)
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("demo: wait for infergate: %w", ctx.Err())
		case <-gate.Done():
			return fmt.Errorf("demo: infergate exited (%v)%s", gate.Err(), gate.Tail())
		case <-sim.Done():
			return fmt.Errorf("demo: simserver exited (%v)%s", sim.Err(), sim.Tail())
		case <-t.C:
		}
	}
}

// streamsText lists the load and the fault plan under the guide, saying
// plainly when the fault starts and ends.
func streamsText(streams []stream, o options) string {
	list := make([]string, len(streams))
	for i, st := range streams {
		list[i] = fmt.Sprintf("%s %.0f/s", st.name, st.rate)
	}
	s := fmt.Sprintf("load: open loop, Poisson arrivals, at most %d in flight per stream\n", o.maxInflight)
	if len(list) > 0 {
		s += wrap("  ", strings.Join(list, "; "), "; ")
	}
	s += faultText(demoFault, o)
	if o.seconds > 0 {
		s += fmt.Sprintf("ends after %ds (or Ctrl-C)\n", o.seconds)
	} else {
		s += "Ctrl-C to stop\n"
	}
	return s
}

// faultText says when the demo injects p and heals it (times after load
// start, the clock in the table's title), or why it does not.
func faultText(p faultPlan, o options) string {
	switch {
	case o.noFault:
		return "fault: off (-no-fault)\n"
	case o.seconds != 0 && o.seconds < minFaultSeconds:
		return fmt.Sprintf("fault: off (runs shorter than %ds)\n", minFaultSeconds)
	}
	end := p.at + p.dur
	heal := fmt.Sprintf("at %s", end)
	if o.seconds > 0 && time.Duration(o.seconds)*time.Second < end {
		heal = fmt.Sprintf("when the demo ends at %ds", o.seconds)
	}
	s := fmt.Sprintf("fault: at %s the demo slows %s down %gx in simserver; it heals it %s\n", p.at, p.model, p.slowdown, heal) +
		fmt.Sprintf("       watch %s's P99 and UP P99 rise while OVH stays small: the slowness is upstream;\n", p.model) +
		fmt.Sprintf("       its latency alert sends it to its fallback mobilenet_v3 (a ROUTE line, rows\n"+
			"       \"%s (fallback)\") until the alert resolves after the heal: back on its primary\n", p.model)
	if o.seconds > 0 && o.seconds < storySeconds {
		s += fmt.Sprintf("       (the route goes back by about %ds: this run may end first; -seconds %d shows it all)\n",
			storySeconds, storySeconds)
	}
	return s
}

// isTerminal reports whether w is a character device (a terminal), where
// frames redraw in place; elsewhere they are appended.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// eventLog keeps the announcements; safe for concurrent use.
type eventLog struct {
	mu    sync.Mutex
	all   []string
	shown int
}

func (e *eventLog) add(s string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.all = append(e.all, s)
}

// last returns the n most recent events.
func (e *eventLog) last(n int) []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.all[max(0, len(e.all)-n):]...)
}

// unseen returns the events added since the previous call.
func (e *eventLog) unseen() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := append([]string(nil), e.all[e.shown:]...)
	e.shown = len(e.all)
	return out
}
