package scenario

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/infergate/infergate/bench/load"
)

// ghzSample is ghz v0.120.0's -O json output, trimmed: 10 calls in 5 ms,
// 8 OK and 2 Unavailable.
const ghzSample = `{"date":"2026-12-03T12:22:34Z","endReason":"timeout","count":10,"total":5000000,
"average":1104702,"fastest":373340,"slowest":1684947,"rps":2000,
"errorDistribution":{"rpc error: code = Unavailable desc = x":2},
"statusCodeDistribution":{"OK":8,"Unavailable":2},
"latencyDistribution":[{"percentage":10,"latency":373340},{"percentage":50,"latency":1338789},
{"percentage":90,"latency":1600000},{"percentage":99,"latency":1684947}],
"details":[{"timestamp":"2026-12-03T12:22:34Z","latency":373340,"error":"","status":"OK"}]}`

func TestParseGhz(t *testing.T) {
	res, err := parseGhz([]byte(ghzSample))
	if err != nil {
		t.Fatal(err)
	}
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
	// Throughput counts OK calls only: 8 in 5 ms, not ghz's 2000 rps.
	if res.Completed != 8 || res.Failed != 2 || res.Errors["Unavailable"] != 2 || !near(res.Throughput, 1600) {
		t.Errorf("counts: completed %d failed %d errors %v rps %g", res.Completed, res.Failed, res.Errors, res.Throughput)
	}
	if !near(res.Latency.P50, 1.338789) || !near(res.Latency.P99, 1.684947) || !near(res.Latency.P90, 1.6) || !near(res.Latency.Max, 1.684947) {
		t.Errorf("latency = %+v", res.Latency)
	}
	for _, bad := range []string{`not json`, `{"count":1}`, `{"count":1,"total":5,"statusCodeDistribution":{"OK":1}}`} {
		if _, err := parseGhz([]byte(bad)); err == nil || !strings.Contains(err.Error(), "ghz json") {
			t.Errorf("parseGhz(%s) = %v, want an error naming ghz json", bad, err)
		}
	}
}

// TestGhzArgs: ghz gets the project load's callers and connections in the
// closed loop, and an open loop (--rps --async) spread over as many
// connections.
func TestGhzArgs(t *testing.T) {
	pl, err := load.NewPayload(load.KServe, "simple", []load.Tensor{{Name: "INPUT0", Datatype: "INT32", Shape: []int64{1, 16}}})
	if err != nil {
		t.Fatal(err)
	}
	g, err := newGhzClient("ghz", "defs", load.KServe, pl, t.TempDir(), "0")
	if err != nil {
		t.Fatal(err)
	}
	if body, err := os.ReadFile(g.dataFile); err != nil || !bytes.Equal(body, pl.Body) {
		t.Errorf("ghz request file differs from the load generator's request (%v)", err)
	}
	flag := func(args []string, name string) string {
		i := slices.Index(args, name)
		if i < 0 || i+1 >= len(args) {
			return ""
		}
		return args[i+1]
	}
	closed := g.args(ghzLoad{target: "127.0.0.1:1", callers: 32, conns: 4, duration: 2 * time.Second}, "out.json")
	for name, want := range map[string]string{
		"--concurrency": "32", "--connections": "4", "--duration": "2s", "--call": "inference.GRPCInferenceService/ModelInfer",
		"--proto": "defs/kserve/grpc_service.proto", "--import-paths": "defs/kserve,defs", "--binary-file": g.dataFile,
		"--format": "json", "--max-recv-message-size": "268435456",
	} {
		if got := flag(closed, name); got != want {
			t.Errorf("closed loop: %s %q, want %q (args %v)", name, got, want, closed)
		}
	}
	if slices.Contains(closed, "--async") || flag(closed, "--rps") != "" || closed[len(closed)-1] != "127.0.0.1:1" {
		t.Errorf("closed loop args: %v", closed)
	}
	open := g.args(ghzLoad{target: "127.0.0.1:1", conns: 4, rate: 1234.4, duration: time.Second}, "out.json")
	if flag(open, "--rps") != "1234" || !slices.Contains(open, "--async") || flag(open, "--concurrency") != "4" || flag(open, "--connections") != "4" {
		t.Errorf("open loop args: %v", open)
	}
}

// TestGhzPinnedInCI: CI installs the ghz release the JSON parser is
// written against.
func TestGhzPinnedInCI(t *testing.T) {
	ci, err := os.ReadFile(filepath.Join("..", "..", ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "github.com/bojand/ghz/cmd/ghz@" + GhzVersion; !strings.Contains(string(ci), want) {
		t.Errorf(".ci/run does not install %s", want)
	}
}

func TestOverheadValidateGhz(t *testing.T) {
	cfg := OverheadConfig{Simserver: os.Args[0], Ghz: os.Args[0], ProtoDir: filepath.Join("..", "..", "proto", "defs"), Callers: []int{2, 8}, Conns: []int{1, 4}}
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "2 callers on 4 conns: ghz needs at least one caller per connection") {
		t.Errorf("Validate() = %v", err)
	}
	cfg = OverheadConfig{Simserver: os.Args[0], Ghz: os.Args[0], ProtoDir: t.TempDir()}
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "ghz needs") || !strings.Contains(err.Error(), "grpc_service.proto") {
		t.Errorf("Validate() without the .proto = %v", err)
	}
	cfg = OverheadConfig{Simserver: os.Args[0], Ghz: os.Args[0], ProtoDir: filepath.Join("..", "..", "proto", "defs"), Callers: []int{8}, Conns: []int{1, 4}}
	if err := cfg.Validate(); err != nil {
		t.Errorf("Validate() = %v", err)
	}
}
