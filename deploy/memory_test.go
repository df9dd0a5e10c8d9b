package deploy_test

import (
	"math"
	"os"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// infergate's memory rules (cmd/infergate/frontdoor.go, internal/memlimit),
// which the files here must agree with: an auto budget is a quarter of the
// container's memory limit, at least 32 MiB, else 64 MiB; Go's soft limit
// is 90% of the limit unless GOMEMLIMIT is set.
const (
	minAutoBudget     = 32 << 20
	defaultBudget     = 128 << 20
	maxBudgetOfLimit  = 2 // a budget set by hand above limit/2 is warned about at start
	autoBudgetOfLimit = 4
)

// memorySettings are what a deployment gives infergate about memory.
type memorySettings struct {
	where      string
	limit      int64 // the container's memory limit; 0 = none
	args       []string
	configPath string // the --config file, "" if none
	gomemlimit string // the GOMEMLIMIT environment variable; "" = unset
}

// checkMemory: a budget set by flag or file fits the limit as the start
// warning wants it, and so does an auto budget; GOMEMLIMIT, where set, is
// a size below the limit (above it the kernel kills the process before
// the collector tries); without a limit GOMEMLIMIT alone bounds nothing
// the budget follows, so it is refused as a hand-set value that drifts.
func checkMemory(t *testing.T, m memorySettings) {
	t.Helper()
	budget, source := int64(0), ""
	if v, ok := flagValue(m.args, "max-buffered-bytes"); ok {
		budget, source = parseInt(t, m.where+": --max-buffered-bytes", v), "--max-buffered-bytes"
	} else if n, ok := configBudget(t, m.configPath); ok {
		budget, source = n, "front_door.max_buffered_bytes"
	}
	switch {
	case budget > 0 && m.limit > 0 && budget > m.limit/maxBudgetOfLimit:
		t.Errorf("%s: %s %d is more than half the memory limit %d: leave it auto (a quarter) or lower it", m.where, source, budget, m.limit)
	case budget > 0:
		t.Logf("%s: memory budget %d (%s), memory limit %d", m.where, budget, source, m.limit)
	case m.limit > 0:
		auto := max(m.limit/autoBudgetOfLimit, minAutoBudget)
		if auto > m.limit/maxBudgetOfLimit {
			t.Errorf("%s: memory limit %d is too small for the auto budget (%d, at least %d): raise it", m.where, m.limit, auto, minAutoBudget)
		}
		t.Logf("%s: memory budget auto: %d (a quarter of the limit %d), GOMEMLIMIT %d", m.where, auto, m.limit, m.limit-m.limit/10)
	default:
		t.Logf("%s: no memory limit: budget %d, no soft limit", m.where, defaultBudget)
	}
	if m.gomemlimit == "" {
		return
	}
	soft, ok := parseGoMemLimit(m.gomemlimit)
	switch {
	case !ok:
		t.Errorf("%s: GOMEMLIMIT=%s is not a size Go reads (e.g. 900MiB) or off", m.where, m.gomemlimit)
	case m.limit == 0:
		t.Errorf("%s: GOMEMLIMIT=%s without a memory limit: set the limit instead, and infergate sets GOMEMLIMIT to 90%% of it", m.where, m.gomemlimit)
	case soft >= m.limit:
		t.Errorf("%s: GOMEMLIMIT=%s is not below the memory limit %d: the kernel kills the process before Go's collector tries", m.where, m.gomemlimit, m.limit)
	}
}

func parseInt(t *testing.T, what, v string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		t.Fatalf("%s %q: %v", what, v, err)
	}
	return n
}

// configBudget reads front_door.max_buffered_bytes from a config file.
func configBudget(t *testing.T, path string) (int64, bool) {
	t.Helper()
	if path == "" {
		return 0, false
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		FrontDoor struct {
			MaxBufferedBytes int64 `yaml:"max_buffered_bytes"`
		} `yaml:"front_door"`
	}
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return cfg.FrontDoor.MaxBufferedBytes, cfg.FrontDoor.MaxBufferedBytes > 0
}

// parseGoMemLimit reads GOMEMLIMIT as the Go runtime does: a byte count
// with an optional B, KiB, MiB, GiB or TiB suffix, or "off"
// (math.MaxInt64).
func parseGoMemLimit(s string) (int64, bool) {
	if s == "off" {
		return math.MaxInt64, true
	}
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40}, {"B", 1}} {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			s, mult = n, u.mult
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > math.MaxInt64/mult {
		return 0, false
	}
	return n * mult, true
}

// parseQuantity reads a Kubernetes memory quantity: a number with an
// optional binary (Ki, Mi, Gi, Ti, Pi, Ei) or decimal (k, M, G, T, P, E)
// suffix.
func parseQuantity(t *testing.T, what, q string) int64 {
	t.Helper()
	num, mult := q, 1.0
	for _, u := range []struct {
		suffix string
		mult   float64
	}{{"Ki", 1 << 10}, {"Mi", 1 << 20}, {"Gi", 1 << 30}, {"Ti", 1 << 40}, {"Pi", 1 << 50}, {"Ei", 1 << 60},
		{"k", 1e3}, {"M", 1e6}, {"G", 1e9}, {"T", 1e12}, {"P", 1e15}, {"E", 1e18}} {
		if n, ok := strings.CutSuffix(q, u.suffix); ok {
			num, mult = n, u.mult
			break
		}
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || f <= 0 {
		t.Fatalf("%s: %q is not a memory quantity", what, q)
	}
	return int64(math.Ceil(f * mult))
}

// parseSystemdBytes reads a systemd size (MemoryMax=): bytes with an
// optional K, M, G or T suffix (base 1024); "infinity" or a percentage
// is 0 (no fixed limit the test can check).
func parseSystemdBytes(t *testing.T, v string) int64 {
	t.Helper()
	if v == "" || v == "infinity" || strings.HasSuffix(v, "%") {
		return 0
	}
	mult := int64(1)
	if i := strings.IndexAny(v, "KMGT"); i == len(v)-1 {
		mult = map[byte]int64{'K': 1 << 10, 'M': 1 << 20, 'G': 1 << 30, 'T': 1 << 40}[v[i]]
		v = v[:i]
	}
	return parseInt(t, "MemoryMax", v) * mult
}

// checkK8sMemory: the infergate container has a memory limit (without one
// a client could grow the pod until the node evicts it, and infergate
// would size itself by the node), and its args, file and env agree with it.
func checkK8sMemory(t *testing.T, s *k8sSetup) {
	c := s.infergate
	q, ok := c.Resources.Limits["memory"]
	if !ok {
		t.Fatal("container infergate: no resources.limits.memory; infergate's memory budget and Go's soft limit follow it")
	}
	m := memorySettings{where: "container infergate", limit: parseQuantity(t, "resources.limits.memory", q), args: s.args, configPath: s.configPath}
	for _, e := range c.Env {
		if e.Name == "GOMEMLIMIT" {
			m.gomemlimit = e.Value
		}
	}
	checkMemory(t, m)
}

// TestSystemdMemory: the unit's MemoryMax=, ExecStart and Environment=
// agree as checkMemory wants.
func TestSystemdMemory(t *testing.T) {
	const path = "systemd/infergate.service"
	u := parseUnit(t, path)
	_, args := systemdArgs(t, u)
	cfgPath, _ := flagValue(args, "config")
	m := memorySettings{where: path, limit: parseSystemdBytes(t, u.get("Service", "MemoryMax")), args: args, configPath: cfgPath}
	for _, env := range u.keys["Service"]["Environment"] {
		for _, kv := range splitExec(env) {
			if v, ok := strings.CutPrefix(kv, "GOMEMLIMIT="); ok {
				m.gomemlimit = v
			}
		}
	}
	checkMemory(t, m)
}

// TestDockerfileMemory: no image sets GOMEMLIMIT or a budget: the limit
// comes with `docker run --memory`, and infergate follows it.
func TestDockerfileMemory(t *testing.T) {
	_, stages := parseDockerfile(t, "Dockerfile")
	for _, st := range stages {
		for _, in := range st.ins {
			if in.cmd == "ENV" && strings.Contains(in.rest, "GOMEMLIMIT") {
				t.Errorf("Dockerfile line %d: ENV GOMEMLIMIT fixes Go's soft limit whatever `docker run --memory` gives; leave it to infergate", in.line)
			}
			if (in.cmd == "CMD" || in.cmd == "ENTRYPOINT") && strings.Contains(in.rest, "max-buffered-bytes") {
				t.Errorf("Dockerfile line %d: a fixed --max-buffered-bytes in the image ignores the container's memory limit; leave it auto", in.line)
			}
		}
	}
}

func TestMemoryParsers(t *testing.T) {
	for q, want := range map[string]int64{"1Gi": 1 << 30, "512Mi": 512 << 20, "1G": 1e9, "1.5Gi": 3 << 29, "268435456": 1 << 28} {
		if got := parseQuantity(t, "test", q); got != want {
			t.Errorf("parseQuantity(%q) = %d, want %d", q, got, want)
		}
	}
	for v, want := range map[string]int64{"900MiB": 900 << 20, "1GiB": 1 << 30, "1000": 1000, "5B": 5, "off": math.MaxInt64} {
		if got, ok := parseGoMemLimit(v); !ok || got != want {
			t.Errorf("parseGoMemLimit(%q) = %d, %v; want %d", v, got, ok, want)
		}
	}
	if _, ok := parseGoMemLimit("1GB"); ok {
		t.Error(`parseGoMemLimit("1GB") accepted: Go reads only binary units`)
	}
	for v, want := range map[string]int64{"1G": 1 << 30, "512M": 512 << 20, "infinity": 0, "50%": 0, "1048576": 1 << 20} {
		if got := parseSystemdBytes(t, v); got != want {
			t.Errorf("parseSystemdBytes(%q) = %d, want %d", v, got, want)
		}
	}
}
