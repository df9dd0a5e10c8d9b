package scenario

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/infergate/infergate/bench/load"
	"github.com/infergate/infergate/internal/childproc"
)

// PayloadSpec is one payload size of the overhead scenario.
type PayloadSpec struct {
	// Name labels the payload in reports ("4KiB").
	Name string `json:"name"`
	// Shape is the input shape; the bytes follow from the datatype.
	Shape []int64 `json:"shape"`
	// Concurrency is the closed-loop concurrency of the max-throughput
	// run, unless OverheadConfig.Callers replaces it.
	Concurrency int `json:"concurrency"`
	// Model and Inputs, when Inputs is set, are the request instead of
	// the scenario's model with one Input of Shape (e.g. simple's two
	// INT32 inputs).
	Model  string        `json:"model,omitempty"`
	Inputs []load.Tensor `json:"-"`
}

// DefaultPayloads are ~4 KiB and 1 MiB of FP32, the sizes the overhead
// scenario reports on.
func DefaultPayloads() []PayloadSpec {
	return []PayloadSpec{
		{Name: "4KiB", Shape: []int64{1, 1024}, Concurrency: 32},
		{Name: "1MiB", Shape: []int64{1, 262144}, Concurrency: 8},
	}
}

// Path names, in report order.
const (
	PathDirect    = "direct"
	PathInfergate = "infergate"
	// PathInfergateB is a second infergate with other arguments
	// (OverheadConfig.InfergateBArgs), measured in the same run: the cost
	// of a configuration against the plain proxy, e.g. routes with closed
	// breakers.
	PathInfergateB = "infergate-b"
	PathNginx      = "nginx"
	// PathByteRelay is a TCP byte relay (bench relay, package
	// byterelay): the floor of what a second hop costs on this machine.
	PathByteRelay = "tcp-relay"
	// PathHAProxy is HAProxy with h2 on both sides and http-reuse always
	// (HAProxyHTTP): a gRPC-aware peer faster than nginx for small calls.
	PathHAProxy = "haproxy"
	// PathHAProxyTCP is HAProxy in mode tcp (HAProxyTCP): a plain TCP
	// relay, the floor for big messages.
	PathHAProxyTCP = "haproxy-tcp"
)

// OverheadConfig configures RunOverhead. Zero values are documented
// defaults.
type OverheadConfig struct {
	// Simserver is the simserver binary; required.
	Simserver string
	// Infergate is the infergate binary; empty leaves that path out.
	Infergate string
	// InfergateArgs are extra arguments for infergate.
	InfergateArgs []string
	// InfergateBArgs, when set, start a second infergate (path
	// "infergate-b") with InfergateArgs and these.
	InfergateBArgs []string
	// InfergateB, when set, is the second infergate's binary (another
	// build, say the previous main's), started with InfergateArgs and
	// InfergateBArgs: two builds measured in the same run.
	InfergateB string
	// InfergateBEndpoints, when over 1, gives the second infergate the
	// simserver as an upstream of that many endpoints (the same address
	// each time): what a replica pool's pick costs a call.
	InfergateBEndpoints int
	// Nginx is the nginx binary; empty leaves that path out.
	Nginx string
	// NginxWorkers is nginx's worker_processes; empty means "auto".
	NginxWorkers string
	// ByteRelay is the bench binary, run as "bench relay" for the path
	// tcp-relay; empty leaves that path out.
	ByteRelay string
	// HAProxy is the haproxy binary for the path haproxy; empty leaves
	// HAProxy out, and HAProxySkipped says why in the report.
	HAProxy        string
	HAProxySkipped string
	// HAProxyTCP also measures HAProxy in mode tcp (path haproxy-tcp).
	HAProxyTCP bool
	// HAProxyThreads is HAProxy's nbthread; zero means 2.
	HAProxyThreads int

	// Proto is the protocol of every request; zero is KServe.
	Proto load.Protocol
	// Model is the model called; empty means "identity_fp32".
	Model string
	// Input is the input tensor name; empty means "INPUT0".
	Input string
	// Datatype is the input datatype; empty means "FP32".
	Datatype string
	// Payloads are the sizes measured; nil means DefaultPayloads.
	Payloads []PayloadSpec

	// Duration is the length of each measurement; zero means 5 s.
	Duration time.Duration
	// Warmup precedes each measurement, unrecorded; zero means 1 s,
	// negative means none.
	Warmup time.Duration
	// Repeat is the number of repetitions; zero means 1.
	Repeat int
	// Callers, when set, are the closed-loop caller counts measured for
	// every payload, instead of each payload's Concurrency.
	Callers []int
	// Conns are the client connection counts; every closed-loop caller
	// count and the open loop run on each. Nil means {2}, so that both
	// nginx workers can take a share of the load.
	Conns []int
	// Arrival is the open-loop gap distribution; zero is Fixed.
	Arrival load.Arrival
	// OpenBase picks the max throughput the open-loop rate is a fraction
	// of: "direct" (the default, the definition) or "slowest" (the
	// slowest path's, so that no path is saturated and added latency is
	// the proxy's own, not queueing). A path's max is its best closed-loop
	// throughput in the round; with ghz, the lower of the two clients'.
	OpenBase string
	// OpenFraction is the open-loop rate as a fraction of OpenBase's max
	// throughput; zero means 0.5.
	OpenFraction float64

	// Ghz is the ghz binary (github.com/bojand/ghz, GhzVersion), run on
	// every path and load right after the project's own run; empty leaves
	// it out, and GhzSkipped says why in the report.
	Ghz        string
	GhzSkipped string
	// ProtoDir holds the .proto definitions ghz reads (kserve/,
	// tensorflow_serving/); empty means "proto/defs".
	ProtoDir string

	// WorkDir holds logs and nginx files; empty means a new temporary
	// folder, removed afterwards unless KeepWorkDir is set.
	WorkDir     string
	KeepWorkDir bool
	// Log receives progress lines; nil means none.
	Log io.Writer
}

// Validate fills defaults and reports every problem, joined.
func (c *OverheadConfig) Validate() error {
	if c.Model == "" {
		c.Model = "identity_fp32"
	}
	if c.OpenBase == "" {
		c.OpenBase = "direct"
	}
	if c.OpenFraction == 0 {
		c.OpenFraction = 0.5
	}
	if c.Input == "" {
		c.Input = "INPUT0"
	}
	if c.Datatype == "" {
		c.Datatype = "FP32"
	}
	if c.Payloads == nil {
		c.Payloads = DefaultPayloads()
	}
	if c.Duration == 0 {
		c.Duration = 5 * time.Second
	}
	if c.Warmup == 0 {
		c.Warmup = time.Second
	} else if c.Warmup < 0 {
		c.Warmup = 0
	}
	if c.Repeat == 0 {
		c.Repeat = 1
	}
	if c.Conns == nil {
		c.Conns = []int{2}
	}
	if c.ProtoDir == "" {
		c.ProtoDir = filepath.Join("proto", "defs")
	}
	if c.NginxWorkers == "" {
		c.NginxWorkers = "auto"
	}
	if c.HAProxyThreads == 0 {
		c.HAProxyThreads = 2
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
	var errs []error
	if c.OpenBase != "direct" && c.OpenBase != "slowest" {
		errs = append(errs, fmt.Errorf("overhead: open base %q: must be direct or slowest", c.OpenBase))
	}
	if c.OpenFraction <= 0 || c.OpenFraction > 1 {
		errs = append(errs, fmt.Errorf("overhead: open fraction %g: must be in (0, 1]", c.OpenFraction))
	}
	if c.Duration < 0 {
		errs = append(errs, fmt.Errorf("overhead: duration %s: must be positive", c.Duration))
	}
	if c.Repeat < 0 {
		errs = append(errs, fmt.Errorf("overhead: repeat %d: must be positive", c.Repeat))
	}
	if c.HAProxyThreads < 0 {
		errs = append(errs, fmt.Errorf("overhead: haproxy threads %d: must be positive", c.HAProxyThreads))
	}
	if c.HAProxyTCP && c.HAProxy == "" {
		errs = append(errs, errors.New("overhead: haproxy-tcp: needs the haproxy binary"))
	}
	for _, p := range c.Payloads {
		if p.Name == "" || (len(p.Shape) == 0 && len(p.Inputs) == 0) || (p.Concurrency <= 0 && len(c.Callers) == 0) {
			errs = append(errs, fmt.Errorf("overhead: payload %q: needs a name, a shape and a positive concurrency", p.Name))
		}
	}
	for _, n := range c.Callers {
		if n <= 0 {
			errs = append(errs, fmt.Errorf("overhead: callers %d: must be positive", n))
		}
	}
	for _, n := range c.Conns {
		if n <= 0 {
			errs = append(errs, fmt.Errorf("overhead: conns %d: must be positive", n))
		}
	}
	if c.Ghz != "" {
		if _, err := os.Stat(c.Ghz); err != nil {
			errs = append(errs, fmt.Errorf("overhead: ghz %s: %w", c.Ghz, errMissingBinary))
		}
		if f := filepath.Join(c.ProtoDir, ghzProtoFiles[c.Proto]); !fileExists(f) {
			errs = append(errs, fmt.Errorf("overhead: proto dir %s: ghz needs %s", c.ProtoDir, f))
		}
		// ghz refuses more connections than callers.
		fewest := math.MaxInt
		for _, ps := range c.Payloads {
			fewest = min(fewest, slices.Min(c.callers(ps)))
		}
		if conns := slices.Max(c.Conns); len(c.Payloads) > 0 && fewest < conns {
			errs = append(errs, fmt.Errorf("overhead: %d callers on %d conns: ghz needs at least one caller per connection", fewest, conns))
		}
	}
	for _, b := range []struct{ name, path string }{{"simserver", c.Simserver}, {"infergate", c.Infergate}, {"nginx", c.Nginx}, {"haproxy", c.HAProxy}, {"byte relay (bench)", c.ByteRelay}} {
		if b.name == "simserver" && b.path == "" {
			errs = append(errs, errors.New("overhead: simserver: binary path required"))
			continue
		}
		if b.path == "" {
			continue
		}
		if _, err := os.Stat(b.path); err != nil {
			errs = append(errs, fmt.Errorf("overhead: %s %s: %w", b.name, b.path, errMissingBinary))
		}
	}
	return errors.Join(errs...)
}

// Path is one way to reach the model server.
type Path struct {
	Name string `json:"name"`
	Addr string `json:"addr"`
}

var (
	simserverLine = regexp.MustCompile(`simserver: grpc=(\S+) admin=(\S+)`)
	byteRelayLine = regexp.MustCompile(`bench: relay: listen=(\S+)`)
	infergateLine = regexp.MustCompile(`infergate: grpc=(\S+) admin=(\S+)`)
)

// RunOverhead starts simserver, infergate, nginx and HAProxy on loopback, measures
// every path for every payload and returns the summary. The processes are
// stopped before it returns.
func RunOverhead(ctx context.Context, cfg OverheadConfig) (*OverheadReport, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	dir, cleanup, err := workDir("overhead", cfg.WorkDir, cfg.KeepWorkDir)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	fmt.Fprintf(cfg.Log, "bench: overhead: work dir %s\n", dir)

	sim, m, err := StartProcess(ctx, childproc.Spec{
		Name: "simserver", Path: cfg.Simserver,
		Args:    []string{"--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0"},
		LogPath: filepath.Join(dir, "simserver.log"), Ready: simserverLine,
	})
	if err != nil {
		return nil, fmt.Errorf("overhead: %w", err)
	}
	defer sim.Stop()
	simAddr := m[1]
	paths := []Path{{PathDirect, simAddr}}
	fmt.Fprintf(cfg.Log, "bench: overhead: simserver pid %d grpc=%s\n", sim.Pid(), simAddr)

	if cfg.Infergate != "" {
		ig, listen, admin, err := startInfergate(ctx, cfg.Infergate, simAddr, filepath.Join(dir, "infergate.log"), cfg.InfergateArgs)
		if err != nil {
			return nil, fmt.Errorf("overhead: %w", err)
		}
		defer ig.Stop()
		paths = append(paths, Path{PathInfergate, listen})
		fmt.Fprintf(cfg.Log, "bench: overhead: infergate pid %d grpc=%s admin=%s\n", ig.Pid(), listen, admin)
	}
	if cfg.Infergate != "" && (len(cfg.InfergateBArgs) > 0 || cfg.InfergateB != "" || cfg.InfergateBEndpoints > 1) {
		args := append(slices.Clone(cfg.InfergateArgs), cfg.InfergateBArgs...)
		bin := cfg.Infergate
		if cfg.InfergateB != "" {
			bin = cfg.InfergateB
		}
		upstream := simAddr
		for range cfg.InfergateBEndpoints - 1 {
			upstream += "," + simAddr
		}
		ig, listen, admin, err := startInfergate(ctx, bin, upstream, filepath.Join(dir, "infergate-b.log"), args)
		if err != nil {
			return nil, fmt.Errorf("overhead: infergate-b: %w", err)
		}
		defer ig.Stop()
		paths = append(paths, Path{PathInfergateB, listen})
		fmt.Fprintf(cfg.Log, "bench: overhead: infergate-b pid %d grpc=%s admin=%s (%s %s)\n", ig.Pid(), listen, admin, bin, strings.Join(cfg.InfergateBArgs, " "))
	}
	if cfg.Nginx != "" {
		listen, err := FreeAddr()
		if err != nil {
			return nil, fmt.Errorf("overhead: %w", err)
		}
		ndir := filepath.Join(dir, "nginx")
		if err := os.MkdirAll(ndir, 0o755); err != nil {
			return nil, fmt.Errorf("overhead: nginx dir: %w", err)
		}
		ng, err := StartNginx(ctx, cfg.Nginx, NginxConfig{Dir: ndir, Listen: listen, Upstream: simAddr, Workers: cfg.NginxWorkers})
		if err != nil {
			return nil, fmt.Errorf("overhead: %w", err)
		}
		defer ng.Stop()
		paths = append(paths, Path{PathNginx, listen})
		fmt.Fprintf(cfg.Log, "bench: overhead: nginx pid %d grpc=%s workers=%s\n", ng.Pid(), listen, cfg.NginxWorkers)
	}
	if cfg.HAProxy != "" {
		modes := []struct{ path, mode string }{{PathHAProxy, HAProxyHTTP}}
		if cfg.HAProxyTCP {
			modes = append(modes, struct{ path, mode string }{PathHAProxyTCP, HAProxyTCP})
		}
		for _, m := range modes {
			hp, listen, err := startHAProxyIn(ctx, cfg.HAProxy, filepath.Join(dir, m.path), simAddr, m.mode, cfg.HAProxyThreads)
			if err != nil {
				return nil, fmt.Errorf("overhead: %w", err)
			}
			defer hp.Stop()
			paths = append(paths, Path{m.path, listen})
			fmt.Fprintf(cfg.Log, "bench: overhead: %s pid %d grpc=%s mode %s nbthread %d\n", m.path, hp.Pid(), listen, m.mode, cfg.HAProxyThreads)
		}
	}
	if cfg.ByteRelay != "" {
		br, m, err := StartProcess(ctx, childproc.Spec{
			Name: "tcp-relay", Path: cfg.ByteRelay,
			Args:    []string{"relay", "-listen", "127.0.0.1:0", "-upstream", simAddr},
			LogPath: filepath.Join(dir, "tcp-relay.log"), Ready: byteRelayLine,
		})
		if err != nil {
			return nil, fmt.Errorf("overhead: %w", err)
		}
		defer br.Stop()
		paths = append(paths, Path{PathByteRelay, m[1]})
		fmt.Fprintf(cfg.Log, "bench: overhead: tcp-relay pid %d grpc=%s\n", br.Pid(), m[1])
	}
	cfg.WorkDir = dir // ghz writes its request file and reports there
	return MeasureOverhead(ctx, cfg, paths)
}

// startHAProxyIn starts HAProxy in mode in front of upstream, its files
// in dir (created), on a port picked just before.
func startHAProxyIn(ctx context.Context, bin, dir, upstream, mode string, threads int) (*childproc.Proc, string, error) {
	listen, err := FreeAddr()
	if err != nil {
		return nil, "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, "", fmt.Errorf("haproxy dir: %w", err)
	}
	hp, err := StartHAProxy(ctx, bin, HAProxyConfig{Dir: dir, Listen: listen, Upstream: upstream, Mode: mode, Threads: threads})
	if err != nil {
		return nil, "", err
	}
	return hp, listen, nil
}

// MeasureOverhead runs the overhead measurements against already running
// paths; the first path is the direct one the others are compared with.
// cfg must have passed Validate (binaries are not needed here).
//
// Each repetition measures, per payload: every closed-loop load (callers x
// conns) on every path, then the open loop on every path at each conns.
// With ghz, each of the project's runs is followed at once by ghz's run on
// the same path and load, so both clients see the machine in the same
// state.
func MeasureOverhead(ctx context.Context, cfg OverheadConfig, paths []Path) (*OverheadReport, error) {
	if len(paths) == 0 {
		return nil, errors.New("overhead: no paths")
	}
	if cfg.Ghz != "" && cfg.WorkDir == "" {
		dir, err := os.MkdirTemp("", "infergate-overhead-ghz-")
		if err != nil {
			return nil, fmt.Errorf("overhead: %w", err)
		}
		defer os.RemoveAll(dir)
		cfg.WorkDir = dir
	}
	payloads := make([]*load.Payload, len(cfg.Payloads))
	ghzs := make([]*ghzClient, len(cfg.Payloads))
	for i, ps := range cfg.Payloads {
		pl, err := newOverheadPayload(cfg, ps)
		if err != nil {
			return nil, fmt.Errorf("overhead: payload %s: %w", ps.Name, err)
		}
		payloads[i] = pl
		for _, p := range paths {
			if err := probe(ctx, p, pl); err != nil {
				return nil, fmt.Errorf("overhead: payload %s: %w", ps.Name, err)
			}
		}
		if cfg.Ghz != "" {
			g, err := newGhzClient(cfg.Ghz, cfg.ProtoDir, cfg.Proto, pl, cfg.WorkDir, fmt.Sprint(i))
			if err != nil {
				return nil, fmt.Errorf("overhead: payload %s: %w", ps.Name, err)
			}
			ghzs[i] = g
		}
	}

	rep := newOverheadReport(cfg, paths)
	for r := 1; r <= cfg.Repeat; r++ {
		for i, ps := range cfg.Payloads {
			// best[tool][path] is the path's best closed-loop throughput
			// this round: its capacity, which sets the open-loop rate.
			best := map[string]map[string]float64{}
			run := func(tool string, p Path, k cellKey, rate float64) error {
				label := runLabel(ps.Name, tool, p.Name, k, r)
				var res *load.Result
				var err error
				if tool == ToolGhz {
					res, err = ghzs[i].run(ctx, ghzLoad{label: label, target: p.Addr, callers: k.Callers, conns: k.Conns, rate: rate, duration: cfg.Duration}, cfg.Warmup, payloads[i])
				} else {
					res, err = measure(ctx, cfg, p, payloads[i], label, k.Callers, k.Conns, rate)
				}
				if err != nil {
					return err
				}
				if tool == ToolGhz {
					logRun(cfg, res)
				}
				rep.add(i, runKey{tool, p.Name, k, r}, res)
				if k.Mode == load.Closed {
					if best[tool] == nil {
						best[tool] = map[string]float64{}
					}
					best[tool][p.Name] = max(best[tool][p.Name], res.Throughput)
				}
				return nil
			}
			tools := rep.tools
			for _, conns := range cfg.Conns {
				for _, callers := range cfg.callers(ps) {
					k := cellKey{Mode: load.Closed, Callers: callers, Conns: conns}
					for _, p := range paths {
						for _, tool := range tools {
							if err := run(tool, p, k, 0); err != nil {
								return nil, err
							}
						}
					}
				}
			}
			rate, err := openRate(cfg, paths, best)
			if err != nil {
				return nil, fmt.Errorf("overhead: payload %s: %w", ps.Name, err)
			}
			for _, conns := range cfg.Conns {
				k := cellKey{Mode: load.Open, Conns: conns}
				for _, p := range paths {
					for _, tool := range tools {
						if err := run(tool, p, k, rate); err != nil {
							return nil, err
						}
					}
				}
			}
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("overhead: %w", err)
			}
		}
	}
	rep.summarise()
	return rep, nil
}

// callers returns the closed-loop caller counts measured for ps.
func (c *OverheadConfig) callers(ps PayloadSpec) []int {
	if len(c.Callers) > 0 {
		return c.Callers
	}
	return []int{ps.Concurrency}
}

// openRate is OpenFraction of the OpenBase path's capacity: its best
// closed-loop throughput this round, the lower of the clients' when ghz
// ran too, so that neither client's open loop saturates that path.
func openRate(cfg OverheadConfig, paths []Path, best map[string]map[string]float64) (float64, error) {
	base := math.Inf(1)
	for _, byPath := range best {
		for _, p := range paths {
			if cfg.OpenBase == "direct" && p.Name != paths[0].Name {
				continue
			}
			// A path that completed nothing this round (a peer that
			// stalled, a client that had no time to start on a loaded
			// machine) shows as 0 in its row; it sets no open-loop rate.
			if v := byPath[p.Name]; v > 0 {
				base = min(base, v)
			}
		}
	}
	if math.IsInf(base, 1) {
		return 0, errors.New("no path completed any closed-loop request")
	}
	return base * cfg.OpenFraction, nil
}

// newOverheadPayload marshals ps's request once.
func newOverheadPayload(cfg OverheadConfig, ps PayloadSpec) (*load.Payload, error) {
	if len(ps.Inputs) > 0 {
		model := ps.Model
		if model == "" {
			model = cfg.Model
		}
		return load.NewPayload(cfg.Proto, model, ps.Inputs)
	}
	return load.NewPayload(cfg.Proto, cfg.Model, []load.Tensor{{Name: cfg.Input, Datatype: cfg.Datatype, Shape: ps.Shape}})
}

// measure is one load run of the project's generator on one path.
func measure(ctx context.Context, cfg OverheadConfig, p Path, pl *load.Payload, label string, conc, conns int, rate float64) (*load.Result, error) {
	res, err := load.Run(ctx, load.Config{
		Label: label, Target: p.Addr, Payload: pl,
		Concurrency: conc, Rate: rate, Arrival: cfg.Arrival,
		Duration: cfg.Duration, Warmup: cfg.Warmup, Conns: conns,
	})
	if err != nil {
		return nil, fmt.Errorf("overhead: %s: %w", label, err)
	}
	logRun(cfg, res)
	return res, nil
}

func logRun(cfg OverheadConfig, res *load.Result) {
	fmt.Fprintf(cfg.Log, "bench: %-34s %8.0f rps  p50 %7.3f ms  p99 %7.3f ms  failed %d\n",
		res.Label, res.Throughput, res.Latency.P50, res.Latency.P99, res.Failed)
}

// probe sends a few requests until they succeed, so that a proxy still
// connecting upstream or a model still loading does not count as overhead.
func probe(ctx context.Context, p Path, pl *load.Payload) error {
	var last *load.Result
	for attempt := 0; attempt < 50; attempt++ {
		res, err := load.Run(ctx, load.Config{Target: p.Addr, Payload: pl, Requests: 2, Timeout: 5 * time.Second})
		if err != nil {
			return fmt.Errorf("probe %s: %w", p.Name, err)
		}
		if res.Failed == 0 {
			return nil
		}
		last = res
		t := time.NewTimer(200 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("probe %s: %w", p.Name, ctx.Err())
		case <-t.C:
		}
	}
	return fmt.Errorf("probe %s (%s): requests keep failing: %s", p.Name, p.Addr, errorSummary(last.Errors))
}

func errorSummary(m map[string]int64) string {
	parts := make([]string, 0, len(m))
	for k, v := range m {
		parts = append(parts, fmt.Sprintf("%s=%d", k, v))
	}
	return strings.Join(parts, " ")
}
