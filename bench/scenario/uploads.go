package scenario

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/infergate/infergate/bench/load"
	"github.com/infergate/infergate/internal/childproc"
)

// UploadsConfig configures RunUploads: Callers honest gRPC clients, each
// on its own connection, sending Bytes-byte ModelInfer requests to an
// identity model in a closed loop for Duration, through each proxy in
// turn. Zero values are documented defaults.
type UploadsConfig struct {
	// Simserver is the simserver binary; required.
	Simserver string
	// Infergate is the infergate binary; empty leaves that path out.
	Infergate string
	// InfergateArgs are extra infergate arguments; none means its
	// defaults, which is what the scenario is about.
	InfergateArgs []string
	// Nginx is the nginx binary; empty leaves that path out.
	Nginx string
	// NginxWorkers is worker_processes; empty means "auto".
	NginxWorkers string
	// HAProxy is the haproxy binary; empty leaves that path out, and
	// HAProxySkipped says why in the report.
	HAProxy        string
	HAProxySkipped string
	// HAProxyThreads is nbthread; zero means 2.
	HAProxyThreads int

	// Callers is the number of callers, each on its own connection; zero
	// means 100.
	Callers int
	// Bytes is the size of the request's tensor; zero means 4 MiB. The
	// model echoes it, so as many bytes come back.
	Bytes int
	// Model is an identity model of simserver; empty means
	// "identity_fp32".
	Model string
	// Duration is the length of each run; zero means 10 s. Calls still in
	// flight at the end finish and are counted.
	Duration time.Duration
	// Repeat is the number of rounds, each running every path once; zero
	// means 3.
	Repeat int
	// CallTimeout bounds each call; zero means 30 s.
	CallTimeout time.Duration
	// Sample is the RSS sampling interval; zero means 100 ms.
	Sample time.Duration

	// WorkDir holds logs and configs; empty means a new temporary folder,
	// removed afterwards unless KeepWorkDir is set.
	WorkDir     string
	KeepWorkDir bool
	// Log receives progress lines; nil means none.
	Log io.Writer
}

// Validate fills defaults and reports every problem, joined.
func (c *UploadsConfig) Validate() error {
	if c.NginxWorkers == "" {
		c.NginxWorkers = "auto"
	}
	if c.HAProxyThreads == 0 {
		c.HAProxyThreads = 2
	}
	if c.Callers == 0 {
		c.Callers = 100
	}
	if c.Bytes == 0 {
		c.Bytes = 4 << 20
	}
	if c.Model == "" {
		c.Model = "identity_fp32"
	}
	if c.Duration == 0 {
		c.Duration = 10 * time.Second
	}
	if c.Repeat == 0 {
		c.Repeat = 3
	}
	if c.CallTimeout == 0 {
		c.CallTimeout = 30 * time.Second
	}
	if c.Sample == 0 {
		c.Sample = 100 * time.Millisecond
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
	var errs []error
	if c.Callers < 0 {
		errs = append(errs, fmt.Errorf("uploads: callers %d: must be positive", c.Callers))
	}
	if c.Bytes < 0 || c.Bytes%4 != 0 {
		errs = append(errs, fmt.Errorf("uploads: bytes %d: must be a positive multiple of 4 (FP32)", c.Bytes))
	}
	if c.Duration < 0 || c.CallTimeout < 0 || c.Sample < 0 {
		errs = append(errs, errors.New("uploads: duration, call timeout and sample must be positive"))
	}
	if c.Repeat < 0 {
		errs = append(errs, fmt.Errorf("uploads: repeat %d: must be positive", c.Repeat))
	}
	if c.HAProxyThreads < 0 {
		errs = append(errs, fmt.Errorf("uploads: haproxy threads %d: must be positive", c.HAProxyThreads))
	}
	if c.Infergate == "" && c.Nginx == "" && c.HAProxy == "" {
		errs = append(errs, errors.New("uploads: no proxy to measure: infergate, nginx and haproxy are all left out"))
	}
	for _, b := range []struct{ name, path string }{{"simserver", c.Simserver}, {"infergate", c.Infergate}, {"nginx", c.Nginx}, {"haproxy", c.HAProxy}} {
		if b.name == "simserver" && b.path == "" {
			errs = append(errs, errors.New("uploads: simserver: binary path required"))
			continue
		}
		if b.path == "" {
			continue
		}
		if _, err := os.Stat(b.path); err != nil {
			errs = append(errs, fmt.Errorf("uploads: %s %s: %w", b.name, b.path, errMissingBinary))
		}
	}
	return errors.Join(errs...)
}

// RSS methods of UploadsRSS.Method.
const (
	// RSSHWM is VmHWM of the proxy's one process, reset at the start of
	// the run (clear_refs): the kernel's exact peak.
	RSSHWM = "VmHWM"
	// RSSSampledWorkers is the peak of the summed VmRSS of the proxy's
	// worker processes (nginx's children of its master), sampled.
	RSSSampledWorkers = "sampled sum of workers' VmRSS"
)

// uploadsTarget is one proxy under test: where to call it and which
// processes hold its memory.
type uploadsTarget struct {
	Path
	// pid is the process started; for nginx, the master.
	pid int
	// workers, when set, are the processes whose RSS is summed instead
	// of pid's VmHWM (nginx's workers).
	workers func() []int
}

var infergateBudgetLine = regexp.MustCompile(`memory_limit=(\S+) buffer_budget=(\S+)`)

// RunUploads starts simserver and every configured proxy in front of it on
// loopback, runs the upload load through each proxy in interleaved rounds
// and returns the summary. The processes are stopped before it returns.
func RunUploads(ctx context.Context, cfg UploadsConfig) (*UploadsReport, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	dir, cleanup, err := workDir("uploads", cfg.WorkDir, cfg.KeepWorkDir)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	fmt.Fprintf(cfg.Log, "bench: uploads: work dir %s\n", dir)

	sim, m, err := StartProcess(ctx, childproc.Spec{
		Name: "simserver", Path: cfg.Simserver,
		Args:    []string{"--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0"},
		LogPath: filepath.Join(dir, "simserver.log"), Ready: simserverLine,
	})
	if err != nil {
		return nil, fmt.Errorf("uploads: %w", err)
	}
	defer sim.Stop()
	simAddr := m[1]
	fmt.Fprintf(cfg.Log, "bench: uploads: simserver pid %d grpc=%s\n", sim.Pid(), simAddr)

	var targets []uploadsTarget
	var igStart string
	if cfg.Infergate != "" {
		logPath := filepath.Join(dir, "infergate.log")
		ig, listen, _, err := startInfergate(ctx, cfg.Infergate, simAddr, logPath, cfg.InfergateArgs)
		if err != nil {
			return nil, fmt.Errorf("uploads: %w", err)
		}
		defer ig.Stop()
		targets = append(targets, uploadsTarget{Path: Path{PathInfergate, listen}, pid: ig.Pid()})
		if data, err := os.ReadFile(logPath); err == nil {
			if mm := infergateBudgetLine.FindStringSubmatch(string(data)); mm != nil {
				igStart = fmt.Sprintf("memory_limit=%s buffer_budget=%s", mm[1], mm[2])
			}
		}
		fmt.Fprintf(cfg.Log, "bench: uploads: infergate pid %d grpc=%s %s\n", ig.Pid(), listen, igStart)
	}
	if cfg.Nginx != "" {
		listen, err := FreeAddr()
		if err != nil {
			return nil, fmt.Errorf("uploads: %w", err)
		}
		ndir := filepath.Join(dir, "nginx")
		if err := os.MkdirAll(ndir, 0o755); err != nil {
			return nil, fmt.Errorf("uploads: nginx dir: %w", err)
		}
		ng, err := StartNginx(ctx, cfg.Nginx, NginxConfig{Dir: ndir, Listen: listen, Upstream: simAddr, Workers: cfg.NginxWorkers})
		if err != nil {
			return nil, fmt.Errorf("uploads: %w", err)
		}
		defer ng.Stop()
		master := ng.Pid()
		targets = append(targets, uploadsTarget{Path: Path{PathNginx, listen}, pid: master, workers: func() []int { return childPids(master) }})
		fmt.Fprintf(cfg.Log, "bench: uploads: nginx pid %d grpc=%s workers=%s\n", master, listen, cfg.NginxWorkers)
	}
	if cfg.HAProxy != "" {
		hp, listen, err := startHAProxyIn(ctx, cfg.HAProxy, filepath.Join(dir, PathHAProxy), simAddr, HAProxyHTTP, cfg.HAProxyThreads)
		if err != nil {
			return nil, fmt.Errorf("uploads: %w", err)
		}
		defer hp.Stop()
		targets = append(targets, uploadsTarget{Path: Path{PathHAProxy, listen}, pid: hp.Pid()})
		fmt.Fprintf(cfg.Log, "bench: uploads: haproxy pid %d grpc=%s nbthread %d\n", hp.Pid(), listen, cfg.HAProxyThreads)
	}
	rep, err := measureUploads(ctx, cfg, targets)
	if err != nil {
		return nil, err
	}
	rep.Setup.InfergateStart = igStart
	return rep, nil
}

// measureUploads runs every round: each target once, in order.
func measureUploads(ctx context.Context, cfg UploadsConfig, targets []uploadsTarget) (*UploadsReport, error) {
	pl, err := load.NewPayload(load.KServe, cfg.Model, []load.Tensor{{Name: "INPUT0", Datatype: "FP32", Shape: []int64{1, int64(cfg.Bytes / 4)}}})
	if err != nil {
		return nil, fmt.Errorf("uploads: %w", err)
	}
	small, err := load.NewPayload(load.KServe, cfg.Model, []load.Tensor{{Name: "INPUT0", Datatype: "FP32", Shape: []int64{1, 16}}})
	if err != nil {
		return nil, fmt.Errorf("uploads: %w", err)
	}
	paths := make([]Path, len(targets))
	for i, t := range targets {
		if err := probe(ctx, t.Path, small); err != nil {
			return nil, fmt.Errorf("uploads: %w", err)
		}
		paths[i] = t.Path
	}
	rep := newUploadsReport(cfg, paths)
	for r := 1; r <= cfg.Repeat; r++ {
		for _, t := range targets {
			run, err := uploadsRun(ctx, cfg, t, pl, r)
			if err != nil {
				return nil, err
			}
			rep.Runs = append(rep.Runs, run)
			res := run.Result
			fmt.Fprintf(cfg.Log, "bench: %-22s %6d ok %4d failed %7.1f calls/s %8.1f MB/s  p50 %8.1f ms  p99 %8.1f ms  peak RSS %6.1f MiB (%s)\n",
				res.Label, res.Completed, res.Failed, res.Throughput, run.MBps, res.Latency.P50, res.Latency.P99, mib(run.RSS.PeakBytes), run.RSS.Method)
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("uploads: %w", err)
			}
		}
	}
	rep.summarise()
	return rep, nil
}

// uploadsRun is one path's run in round r, with the proxy's memory
// watched from just before the callers connect until the last call ends.
func uploadsRun(ctx context.Context, cfg UploadsConfig, t uploadsTarget, pl *load.Payload, r int) (UploadsRun, error) {
	label := fmt.Sprintf("uploads/%s#%d", t.Name, r)
	pids := t.workers
	method := RSSSampledWorkers
	if pids == nil {
		pids = func() []int { return []int{t.pid} }
		method = RSSHWM
	}
	rss := UploadsRSS{Method: method}
	rss.StartBytes, _ = sumRSS(pids())
	hwmReset := t.workers == nil && resetHWM(t.pid) == nil
	s := startRSSSampler(pids, cfg.Sample)
	res, err := load.Run(ctx, load.Config{
		Label: label, Target: t.Addr, Payload: pl,
		Concurrency: cfg.Callers, Conns: cfg.Callers,
		Duration: cfg.Duration, Timeout: cfg.CallTimeout,
	})
	s.stop()
	if err != nil {
		return UploadsRun{}, fmt.Errorf("uploads: %s: %w", label, err)
	}
	rss.SampledPeakBytes, rss.Samples, rss.Processes = s.peak, s.samples, s.procs
	rss.PeakBytes = rss.SampledPeakBytes
	if t.workers == nil {
		if hwm, err := procStatusField(t.pid, "VmHWM"); err == nil {
			rss.HWMBytes = hwm
			rss.HWMSinceStart = !hwmReset
			rss.PeakBytes = max(hwm, rss.SampledPeakBytes)
		} else {
			rss.Method = "sampled VmRSS" // no VmHWM to read: fall back
		}
	}
	run := UploadsRun{Path: t.Name, Round: r, Result: res, RSS: rss}
	if res.Seconds > 0 {
		run.MBps = float64(res.Completed) * float64(res.RequestBytes) / res.Seconds / 1e6
	}
	return run, nil
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// uploadsPathNote says how a path was set up and how its RSS was read.
func uploadsPathNote(cfg UploadsConfig, path string) string {
	switch path {
	case PathInfergate:
		args := "its defaults"
		if len(cfg.InfergateArgs) > 0 {
			args = strings.Join(cfg.InfergateArgs, " ")
		}
		return "infergate: " + args + "; peak RSS is VmHWM of its process, reset at the start of each run (`5` to /proc/PID/clear_refs)."
	case PathNginx:
		return fmt.Sprintf("nginx: worker_processes %s, grpc_pass with upstream keepalive 32, keepalive_requests 1000000, client_max_body_size 0 (no limit); peak RSS is the sum of its workers' VmRSS sampled every %s (the master holds no call; pages the workers share count in each).", cfg.NginxWorkers, cfg.Sample)
	case PathHAProxy:
		return fmt.Sprintf("haproxy: one process, nbthread %d, h2 on both sides, http-reuse always, its default buffers and h2 windows; peak RSS is VmHWM of its process, reset at the start of each run.", cfg.HAProxyThreads)
	}
	return ""
}
