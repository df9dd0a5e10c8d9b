package scenario

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/infergate/infergate/bench/load"
)

// GhzVersion is the ghz release the overhead scenario is written against
// and .ci/run installs; other versions may print other JSON.
const GhzVersion = "v0.120.0"

// ghzClient runs ghz (github.com/bojand/ghz) with the same request bytes
// the project's load generator sends, so that a standard client measures
// the same paths in the same run.
type ghzClient struct {
	bin         string
	proto       string // the service's .proto file
	importPaths []string
	call        string // package.Service/Method
	dataFile    string // the marshalled request, sent with -B
	dir         string // where ghz writes its JSON
	timeout     time.Duration
}

// ghzProtoFiles maps a protocol to its service's .proto file under the
// proto definitions folder (proto/defs).
var ghzProtoFiles = map[load.Protocol]string{
	load.KServe:    filepath.Join("kserve", "grpc_service.proto"),
	load.TFServing: filepath.Join("tensorflow_serving", "apis", "prediction_service.proto"),
}

// newGhzClient writes pl's bytes into dir as the binary request ghz sends
// (-B), so ghz's payload is byte for byte the load generator's.
func newGhzClient(bin, protoDir string, p load.Protocol, pl *load.Payload, dir, name string) (*ghzClient, error) {
	file, ok := ghzProtoFiles[p]
	if !ok {
		return nil, fmt.Errorf("ghz: no .proto for protocol %s", p)
	}
	data := filepath.Join(dir, "ghz-request-"+name+".bin")
	if err := os.WriteFile(data, pl.Body, 0o644); err != nil {
		return nil, fmt.Errorf("ghz: request file: %w", err)
	}
	return &ghzClient{
		bin:         bin,
		proto:       filepath.Join(protoDir, file),
		importPaths: []string{filepath.Dir(filepath.Join(protoDir, file)), protoDir},
		call:        strings.TrimPrefix(pl.Method, "/"),
		dataFile:    data,
		dir:         dir,
		timeout:     load.DefaultTimeout,
	}, nil
}

// ghzLoad is one ghz run: closed loop with callers workers, or open loop
// at rate (--async, so a slow answer does not hold the next send back).
type ghzLoad struct {
	label    string
	target   string
	callers  int
	conns    int
	rate     float64
	duration time.Duration
}

// args builds ghz's command line for l.
func (g *ghzClient) args(l ghzLoad, out string) []string {
	workers := l.callers
	if l.rate > 0 {
		// Open loop: workers only hand ticks to new goroutines; one per
		// connection spreads the calls over every connection.
		workers = l.conns
	}
	a := []string{
		"--insecure",
		"--proto", g.proto, "--import-paths", strings.Join(g.importPaths, ","),
		"--call", g.call, "--binary-file", g.dataFile,
		"--disable-template-functions", "--disable-template-data",
		// grpc-go's 4 MiB default would fail 16 MiB tensors; the
		// load generator allows the same.
		"--max-recv-message-size", strconv.Itoa(load.MaxMessageSize),
		"--max-send-message-size", strconv.Itoa(load.MaxMessageSize),
		"--timeout", g.timeout.String(),
		"--concurrency", strconv.Itoa(workers),
		"--connections", strconv.Itoa(l.conns),
		"--duration", l.duration.String(),
		// Calls still in flight when the time is up finish and count, as
		// in the project's load generator (ghz's default closes the
		// connections under them and counts each as Unavailable; a 16 MiB
		// call may be longer than a short window).
		"--duration-stop", "wait",
		"--format", "json", "--output", out,
	}
	if l.rate > 0 {
		a = append(a, "--rps", strconv.Itoa(max(1, int(l.rate+0.5))), "--async")
	}
	return append(a, l.target)
}

// run runs ghz once, unrecorded for warmup first, and returns its figures
// in the load generator's terms.
func (g *ghzClient) run(ctx context.Context, l ghzLoad, warmup time.Duration, pl *load.Payload) (*load.Result, error) {
	if warmup > 0 {
		w := l
		w.duration = warmup
		if _, err := g.exec(ctx, w); err != nil {
			return nil, err
		}
	}
	data, err := g.exec(ctx, l)
	if err != nil {
		return nil, err
	}
	res, err := parseGhz(data)
	if err != nil {
		return nil, fmt.Errorf("ghz: %s: %w", l.label, err)
	}
	res.Label, res.Target, res.Method, res.Model = l.label, l.target, pl.Method, pl.Model
	res.Conns, res.RequestBytes = l.conns, len(pl.Body)
	if l.rate > 0 {
		res.Mode, res.Rate, res.Arrival = load.Open, l.rate, "fixed"
	} else {
		res.Mode, res.Concurrency = load.Closed, l.callers
	}
	return res, nil
}

// exec runs ghz and returns its JSON report.
func (g *ghzClient) exec(ctx context.Context, l ghzLoad) ([]byte, error) {
	out := filepath.Join(g.dir, "ghz-out.json")
	_ = os.Remove(out)
	// ghz stops itself after the duration; the margin covers its start
	// and the proto parse.
	ctx, cancel := context.WithTimeout(ctx, l.duration+g.timeout+30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, g.bin, g.args(l, out)...)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("ghz: %s: %w: %s", l.label, err, strings.TrimSpace(stderr.String()))
	}
	data, err := os.ReadFile(out)
	if err != nil {
		return nil, fmt.Errorf("ghz: %s: %w", l.label, err)
	}
	return data, nil
}

// ghzReport is the part of ghz's JSON output (-O json) the scenario reads.
// Durations are nanoseconds; latencies cover successful calls only (ghz
// leaves errors out unless --count-errors).
type ghzReport struct {
	Count       int64            `json:"count"`
	Total       int64            `json:"total"`
	Average     int64            `json:"average"`
	Slowest     int64            `json:"slowest"`
	StatusCodes map[string]int64 `json:"statusCodeDistribution"`
	Latencies   []struct {
		Percentage float64 `json:"percentage"`
		Latency    int64   `json:"latency"`
	} `json:"latencyDistribution"`
}

// parseGhz reads ghz's JSON report into a load.Result: Completed counts
// OK calls, Errors the others by code, Throughput is OK calls per second
// (ghz's own "rps" counts errors too). ghz reports no p99.9, so it is 0.
func parseGhz(data []byte) (*load.Result, error) {
	var r ghzReport
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("ghz json: %w", err)
	}
	if r.Total <= 0 {
		return nil, errors.New("ghz json: no total duration")
	}
	res := &load.Result{Seconds: float64(r.Total) / 1e9}
	codes := make([]string, 0, len(r.StatusCodes))
	for c := range r.StatusCodes {
		codes = append(codes, c)
	}
	sort.Strings(codes)
	for _, c := range codes {
		n := r.StatusCodes[c]
		if c == "OK" {
			res.Completed = n
			continue
		}
		if res.Errors == nil {
			res.Errors = map[string]int64{}
		}
		res.Errors[c] = n
		res.Failed += n
	}
	if r.StatusCodes == nil {
		res.Completed = r.Count // no calls at all, or an older ghz
	}
	res.Throughput = float64(res.Completed) / res.Seconds
	ms := func(ns int64) float64 { return float64(ns) / 1e6 }
	for _, l := range r.Latencies {
		switch l.Percentage {
		case 50:
			res.Latency.P50 = ms(l.Latency)
		case 90:
			res.Latency.P90 = ms(l.Latency)
		case 99:
			res.Latency.P99 = ms(l.Latency)
		}
	}
	if res.Completed > 0 && len(r.Latencies) == 0 {
		return nil, errors.New("ghz json: calls succeeded but no latency distribution")
	}
	res.Latency.Max, res.Latency.Mean = ms(r.Slowest), ms(r.Average)
	return res, nil
}

// FindGhz returns the ghz to use when the flag is left at its default:
// ghz on PATH, else ~/go/bin/ghz (where go install puts it), else "".
func FindGhz() string {
	if p, err := exec.LookPath("ghz"); err == nil {
		return p
	}
	if home, err := os.UserHomeDir(); err == nil {
		if p := filepath.Join(home, "go", "bin", "ghz"); fileExists(p) {
			return p
		}
	}
	return ""
}

func fileExists(path string) bool {
	st, err := os.Stat(path)
	return err == nil && !st.IsDir()
}
