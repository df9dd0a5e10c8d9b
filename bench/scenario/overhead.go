package scenario

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/infergate/infergate/bench/load"
)

// PayloadSpec is one payload size of the overhead scenario.
type PayloadSpec struct {
	// Name labels the payload in reports ("4KiB").
	Name string `json:"name"`
	// Shape is the input shape; the bytes follow from the datatype.
	Shape []int64 `json:"shape"`
	// Concurrency is the closed-loop concurrency of the max-throughput run.
	Concurrency int `json:"concurrency"`
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
	// Nginx is the nginx binary; empty leaves that path out.
	Nginx string
	// NginxWorkers is nginx's worker_processes; empty means "auto".
	NginxWorkers string

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
	// Conns is the number of client connections per run; zero means 2, so
	// that both nginx workers can take a share of the load.
	Conns int
	// Arrival is the open-loop gap distribution; zero is Fixed.
	Arrival load.Arrival
	// OpenBase picks the max throughput the open-loop rate is a fraction
	// of: "direct" (the default, the definition) or "slowest" (the
	// slowest path's, so that no path is saturated and added latency is
	// the proxy's own, not queueing).
	OpenBase string
	// OpenFraction is the open-loop rate as a fraction of OpenBase's max
	// throughput; zero means 0.5.
	OpenFraction float64

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
	if c.Conns == 0 {
		c.Conns = 2
	}
	if c.NginxWorkers == "" {
		c.NginxWorkers = "auto"
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
	for _, p := range c.Payloads {
		if p.Name == "" || len(p.Shape) == 0 || p.Concurrency <= 0 {
			errs = append(errs, fmt.Errorf("overhead: payload %q: needs a name, a shape and a positive concurrency", p.Name))
		}
	}
	for _, b := range []struct{ name, path string }{{"simserver", c.Simserver}, {"infergate", c.Infergate}, {"nginx", c.Nginx}} {
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
	infergateLine = regexp.MustCompile(`infergate: grpc=(\S+) admin=(\S+)`)
)

// RunOverhead starts simserver, infergate and nginx on loopback, measures
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

	sim, m, err := StartProcess(ctx, StartSpec{
		Name: "simserver", Bin: cfg.Simserver,
		Args:    []string{"--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0"},
		LogPath: filepath.Join(dir, "simserver.log"), ReadyLine: simserverLine,
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
	if cfg.Infergate != "" && len(cfg.InfergateBArgs) > 0 {
		args := append(slices.Clone(cfg.InfergateArgs), cfg.InfergateBArgs...)
		ig, listen, admin, err := startInfergate(ctx, cfg.Infergate, simAddr, filepath.Join(dir, "infergate-b.log"), args)
		if err != nil {
			return nil, fmt.Errorf("overhead: infergate-b: %w", err)
		}
		defer ig.Stop()
		paths = append(paths, Path{PathInfergateB, listen})
		fmt.Fprintf(cfg.Log, "bench: overhead: infergate-b pid %d grpc=%s admin=%s (%s)\n", ig.Pid(), listen, admin, strings.Join(cfg.InfergateBArgs, " "))
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
	return MeasureOverhead(ctx, cfg, paths)
}

// MeasureOverhead runs the overhead measurements against already running
// paths; the first path is the direct one the others are compared with.
// cfg must have passed Validate (binaries are not needed here).
func MeasureOverhead(ctx context.Context, cfg OverheadConfig, paths []Path) (*OverheadReport, error) {
	if len(paths) == 0 {
		return nil, errors.New("overhead: no paths")
	}
	payloads := make([]*load.Payload, len(cfg.Payloads))
	for i, ps := range cfg.Payloads {
		pl, err := load.NewPayload(cfg.Proto, cfg.Model, []load.Tensor{{Name: cfg.Input, Datatype: cfg.Datatype, Shape: ps.Shape}})
		if err != nil {
			return nil, fmt.Errorf("overhead: payload %s: %w", ps.Name, err)
		}
		payloads[i] = pl
		for _, p := range paths {
			if err := probe(ctx, p, pl); err != nil {
				return nil, fmt.Errorf("overhead: payload %s: %w", ps.Name, err)
			}
		}
	}

	rep := newOverheadReport(cfg, paths)
	for r := 1; r <= cfg.Repeat; r++ {
		for i, ps := range cfg.Payloads {
			var directMax, slowestMax float64
			for _, p := range paths {
				res, err := measure(ctx, cfg, p, payloads[i], fmt.Sprintf("%s/%s/closed#%d", ps.Name, p.Name, r), ps.Concurrency, 0)
				if err != nil {
					return nil, err
				}
				rep.add(i, res)
				if p.Name == paths[0].Name {
					directMax = res.Throughput
				}
				if slowestMax == 0 || res.Throughput < slowestMax {
					slowestMax = res.Throughput
				}
			}
			if directMax <= 0 {
				return nil, fmt.Errorf("overhead: payload %s: direct path completed no requests", ps.Name)
			}
			rate := directMax * cfg.OpenFraction
			if cfg.OpenBase == "slowest" {
				rate = slowestMax * cfg.OpenFraction
			}
			for _, p := range paths {
				res, err := measure(ctx, cfg, p, payloads[i], fmt.Sprintf("%s/%s/open#%d", ps.Name, p.Name, r), 0, rate)
				if err != nil {
					return nil, err
				}
				rep.add(i, res)
			}
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("overhead: %w", err)
			}
		}
	}
	rep.summarise()
	return rep, nil
}

// measure is one load run on one path.
func measure(ctx context.Context, cfg OverheadConfig, p Path, pl *load.Payload, label string, conc int, rate float64) (*load.Result, error) {
	res, err := load.Run(ctx, load.Config{
		Label: label, Target: p.Addr, Payload: pl,
		Concurrency: conc, Rate: rate, Arrival: cfg.Arrival,
		Duration: cfg.Duration, Warmup: cfg.Warmup, Conns: cfg.Conns,
	})
	if err != nil {
		return nil, fmt.Errorf("overhead: %s: %w", label, err)
	}
	fmt.Fprintf(cfg.Log, "bench: %-24s %8.0f rps  p50 %7.3f ms  p99 %7.3f ms  failed %d\n",
		label, res.Throughput, res.Latency.P50, res.Latency.P99, res.Failed)
	return res, nil
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
