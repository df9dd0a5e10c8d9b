package main

import (
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/infergate/infergate/batcher"
	"github.com/infergate/infergate/monitor"
	"github.com/infergate/infergate/monitor/gpu"
	"github.com/infergate/infergate/proxy"
)

func TestParseConfigDefaultsAndFlagsWin(t *testing.T) {
	c, err := parseConfig([]string{"--config", "testdata/config.good.yaml", "--listen", "127.0.0.1:7000"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Listen != "127.0.0.1:7000" {
		t.Errorf("listen = %q, want the flag's value", c.Listen)
	}
	if c.Upstream != "127.0.0.1:8001" {
		t.Errorf("upstream = %q, want the file's value", c.Upstream)
	}
	if c.Monitor.MaxSeries != 50 || c.MaxMessageBytes != 128<<20 || c.ShutdownTimeout != 5*time.Second {
		t.Errorf("file values not applied: %+v", c)
	}
	if c.Admin != defaultConfig().Admin || c.UpstreamConns != proxy.DefaultUpstreamConns || c.Log.Level != "warn" {
		t.Errorf("defaults not filled: %+v", c)
	}
}

func TestParseConfigErrorsNameTheField(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"missing upstream", []string{}, "config: upstream: required (the model server's gRPC address, e.g. 127.0.0.1:8001)"},
		{"bad listen", []string{"--upstream", "a:1", "--listen", "nonsense"}, `config: listen: "nonsense" is not host:port`},
		{"zero message size", []string{"--upstream", "a:1", "--max-message-bytes", "0"}, "config: --max-message-bytes: must be positive, got 0"},
		{"zero series flag", []string{"--upstream", "a:1", "--max-series", "0"}, "config: --max-series: must be positive, got 0"},
		{"zero batch size flag", []string{"--upstream", "a:1", "--batch-max-size", "0"}, "config: --batch-max-size: must be between 1 and 4096, got 0"},
		{"zero gpu interval flag", []string{"--upstream", "a:1", "--gpu-interval", "0s"}, "config: --gpu-interval: must be positive, got 0s"},
		{"bad log level", []string{"--upstream", "a:1", "--log-level", "loud"}, `config: log.level: must be debug, info, warn or error, got "loud"`},
		{"cert without key", []string{"--upstream", "a:1", "--tls-cert", "testdata/config.good.yaml"}, "config: tls: cert_file and key_file must be set together"},
		{"missing file", []string{"--upstream", "a:1", "--upstream-ca", "testdata/nope.pem"}, `config: upstream_tls.ca_file: cannot read "testdata/nope.pem": no such file or directory`},
		{"unknown yaml field", []string{"--config", "testdata/config.bad-unknown-field.yaml"}, `config: testdata/config.bad-unknown-field.yaml: line 1: unknown field "upstreem"`},
		{"unknown nested yaml field", []string{"--config", "testdata/config.bad-nested-field.yaml"}, `line 3: unknown field "max_seriez" in section monitor`},
		{"yaml type error", []string{"--config", "testdata/config.bad-duration.yaml"}, `line 2: drain_delay: a duration (e.g. 5s), got "soon"`},
		{"yaml list for a map", []string{"--config", "testdata/config.bad-models-list.yaml"}, "line 5: batching.models: a map of name to settings (a mapping), got a list"},
		{"size without a unit we know", []string{"--upstream", "a:1", "--max-buffered-bytes", "64XB"}, `unknown unit "XB"`},
		{"zero keepalive flag", []string{"--upstream", "a:1", "--upstream-keepalive-time", "0s"}, "config: --upstream-keepalive-time: must be at least 10s, got 0s"},
		{"short keepalive", []string{"--upstream", "a:1", "--upstream-keepalive-time", "1s"}, "config: upstream_keepalive_time: must be at least 10s, got 1s"},
		{"negative in flight", []string{"--upstream", "a:1", "--max-in-flight", "-1"}, "config: max_in_flight: must be 0 (no cap) or positive, got -1"},
		{"bad probe", []string{"--upstream", "a:1", "--readiness-probe", "ping"}, `config: readiness.probe: must be auto, health, kserve, tfserving or tcp, got "ping"`},
		{"label limit", []string{"--upstream", "a:1", "--max-label-bytes", "0"}, "config: --max-label-bytes: must be between 1 and 4096, got 0"},
		{"bad yaml value", []string{"--config", "testdata/config.bad-series.yaml"}, "config: monitor.max_series: must be positive, got -3"},
		{"reserved tenant header", []string{"--upstream", "a:1", "--flow-control", "--tenant-header", "grpc-tenant"},
			`config: flow_control.tenant_header: "grpc-tenant" is not a header a client sends as its own metadata`},
		{"unknown priority", []string{"--upstream", "a:1", "--default-priority", "urgent"},
			`config: flow_control.default_priority: must be critical, standard or sheddable, got "urgent"`},
		{"tenant weight", []string{"--config", "testdata/config.bad-tenant-weight.yaml"}, "config: flow_control.tenants.nightly.weight: must be above 0 and at most 1000, got 0"},
		{"critical share", []string{"--config", "testdata/config.bad-tenant-weight.yaml"}, "config: flow_control.min_share.critical: only standard and sheddable have a minimum share"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parseConfig(tc.args)
			if err == nil {
				err = c.readFiles() // as run does, after validation
			}
			if err == nil {
				t.Fatalf("no error, want %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not contain %q", err, tc.want)
			}
		})
	}
}

func TestZeroMeansNoneWhereDocumented(t *testing.T) {
	c, err := parseConfig([]string{"--upstream", "a:1", "--upstream-timeout", "0s", "--max-in-flight", "0", "--drain-delay", "0s"})
	if err != nil {
		t.Fatal(err)
	}
	if c.UpstreamTimeout != 0 || c.MaxInFlight != 0 || c.DrainDelay != 0 {
		t.Errorf("explicit 0 must mean none: timeout %s, in flight %d, drain %s", c.UpstreamTimeout, c.MaxInFlight, c.DrainDelay)
	}
	c, err = parseConfig([]string{"--upstream", "a:1"})
	if err != nil {
		t.Fatal(err)
	}
	if c.UpstreamTimeout != proxy.DefaultUpstreamTimeout || c.MaxInFlight != proxy.DefaultMaxInFlight || c.DrainDelay != defaultConfig().DrainDelay ||
		c.UpstreamKeepaliveTime != proxy.DefaultKeepaliveTime || c.Monitor.SeriesIdleTimeout != monitor.DefaultIdleTimeout ||
		c.Monitor.MaxLabelBytes != monitor.DefaultMaxLabelBytes || c.Readiness.Probe != "auto" {
		t.Errorf("defaults not filled: %+v", c)
	}
}

// Sizes in bytes take units, on the command line and in the file.
func TestSizesTakeUnits(t *testing.T) {
	c, err := parseConfig([]string{"--config", "testdata/config.sizes.yaml"})
	if err != nil {
		t.Fatal(err)
	}
	if c.MaxMessageBytes != 16<<20 || c.FrontDoor.MaxBufferedBytes != 96<<20 || c.Monitor.MaxLabelBytes != 1024 {
		t.Errorf("file sizes: message %d, buffered %d, label %d; want 16MiB, 96MiB, 1KiB", c.MaxMessageBytes, c.FrontDoor.MaxBufferedBytes, c.Monitor.MaxLabelBytes)
	}
	c, err = parseConfig([]string{"--upstream", "a:1", "--max-buffered-bytes", "64MiB", "--max-message-bytes", "1GiB", "--max-label-bytes", "256"})
	if err != nil {
		t.Fatal(err)
	}
	if c.FrontDoor.MaxBufferedBytes != 64<<20 || c.MaxMessageBytes != 1<<30 || c.Monitor.MaxLabelBytes != 256 {
		t.Errorf("flag sizes: buffered %d, message %d, label %d", c.FrontDoor.MaxBufferedBytes, c.MaxMessageBytes, c.Monitor.MaxLabelBytes)
	}
}

func TestYAMLZeroMeansNone(t *testing.T) {
	c, err := parseConfig([]string{"--config", "testdata/config.hardening.yaml"})
	if err != nil {
		t.Fatal(err)
	}
	if c.UpstreamTimeout != 0 || c.MaxInFlight != 50 || c.DrainDelay != 2*time.Second ||
		c.Monitor.SeriesIdleTimeout != 20*time.Minute || c.Readiness.Probe != "tfserving" || c.Readiness.Model != "half_plus_two" {
		t.Errorf("file values not applied: %+v", c)
	}
}

func TestVersionAndCheckConfigModes(t *testing.T) {
	c, err := parseConfig([]string{"--version"})
	if err != nil || !c.PrintVersion {
		t.Fatalf("--version: %+v, %v", c, err)
	}
	c, err = parseConfig([]string{"--check-config", "--upstream", "a:1"})
	if err != nil || !c.CheckOnly {
		t.Fatalf("--check-config: %+v, %v", c, err)
	}
	if code := run([]string{"--check-config", "--upstream", "nonsense"}); code != 2 {
		t.Errorf("--check-config with a bad value exits %d, want 2", code)
	}
	if code := run([]string{"--check-config", "--upstream", "a:1"}); code != 0 {
		t.Errorf("--check-config with a good config exits %d, want 0", code)
	}
}

// writeYAML writes a config file of the lines given and returns its path.
func writeYAML(t *testing.T, lines ...string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "infergate.yaml")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// yamlOf spells field (a dotted path such as monitor.max_series) set to v.
func yamlOf(field, v string) string {
	parts := strings.Split(field, ".")
	var b strings.Builder
	for i, p := range parts {
		b.WriteString(strings.Repeat("  ", i) + p + ":")
		if i < len(parts)-1 {
			b.WriteString("\n")
		}
	}
	return b.String() + " " + v
}

// TestExplicitZeroSameInFileAndFlag checks every numeric flag: its 0 and
// the file's 0 for its field are refused alike, with the same reason (the
// message names the flag or the field), and --check-config exits 2; where
// 0 means "none" both are accepted.
func TestExplicitZeroSameInFileAndFlag(t *testing.T) {
	zeroMeansNone := map[string]bool{"drain-delay": true, "upstream-timeout": true, "max-in-flight": true, "batch-max-delay": true,
		"max-buffered-bytes": true, "max-connections": true, "idle-timeout": true} // auto, no cap, the default
	var path string
	var errs []error
	d := defaultConfig()
	fs := newFlagSet(&d, &path, &errs)
	checked := 0
	for _, r := range flags {
		zero := ""
		if g, ok := fs.Lookup(r.name).Value.(flag.Getter); ok {
			switch g.Get().(type) {
			case int, int64:
				zero = "0"
			case time.Duration:
				zero = "0s"
			}
		}
		if zero == "" || r.field == "" {
			continue
		}
		checked++
		t.Run(r.name, func(t *testing.T) {
			_, flagErr := parseConfig([]string{"--upstream", "a:1", "--" + r.name, zero})
			file := writeYAML(t, "upstream: a:1", yamlOf(r.field, zero))
			_, fileErr := parseConfig([]string{"--config", file})
			if zeroMeansNone[r.name] {
				if flagErr != nil || fileErr != nil {
					t.Fatalf("0 means none here: flag %v, file %v", flagErr, fileErr)
				}
				return
			}
			if flagErr == nil || fileErr == nil {
				t.Fatalf("an explicit 0 must be refused: flag %v, file %v", flagErr, fileErr)
			}
			flagWhy, ok := strings.CutPrefix(flagErr.Error(), "config: --"+r.name+": ")
			if !ok {
				t.Fatalf("flag error %q does not name --%s", flagErr, r.name)
			}
			fileWhy, ok := strings.CutPrefix(fileErr.Error(), "config: "+r.field+": ")
			if !ok {
				t.Fatalf("file error %q does not name %s", fileErr, r.field)
			}
			if flagWhy != fileWhy || !strings.HasSuffix(fileWhy, "got "+zero) {
				t.Errorf("reasons differ: flag %q, file %q", flagWhy, fileWhy)
			}
			if code := run([]string{"--check-config", "--config", file}); code != 2 {
				t.Errorf("--check-config with %s: 0 exits %d, want 2", r.field, code)
			}
		})
	}
	if checked < 15 {
		t.Errorf("only %d numeric flags checked", checked)
	}
}

func TestDefaultsAreTheLibraries(t *testing.T) {
	c, err := parseConfig([]string{"--upstream", "a:1"})
	if err != nil {
		t.Fatal(err)
	}
	got := []any{c.MaxMessageBytes, c.UpstreamConns, c.UpstreamTimeout, c.UpstreamKeepaliveTime, c.MaxInFlight,
		c.Monitor.MaxSeries, c.Monitor.SeriesIdleTimeout, c.Monitor.MaxLabelBytes, c.Log.Interval,
		c.Batching.MaxSize, c.Batching.MaxDelay, c.Batching.QueueSize, c.Batching.SLO, c.Batching.Slots, c.GPU.Interval}
	want := []any{proxy.DefaultMaxMsgSize, proxy.DefaultUpstreamConns, proxy.DefaultUpstreamTimeout, proxy.DefaultKeepaliveTime, proxy.DefaultMaxInFlight,
		monitor.DefaultMaxSeries, monitor.DefaultIdleTimeout, monitor.DefaultMaxLabelBytes, proxy.DefaultLogInterval,
		batcher.DefaultMaxSize, batcher.DefaultMaxDelay, batcher.DefaultQueueSize, batcher.DefaultSLO, batcher.DefaultSlots, gpu.DefaultInterval}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("default %d = %v, want %v", i, got[i], want[i])
		}
	}
	// -help shows the same defaults: the flags are bound to them.
	var path string
	var errs []error
	d := defaultConfig()
	fs := newFlagSet(&d, &path, &errs)
	for name, want := range map[string]string{
		"max-message-bytes": strconv.Itoa(proxy.DefaultMaxMsgSize), "max-series": strconv.Itoa(monitor.DefaultMaxSeries),
		"upstream-keepalive-time": proxy.DefaultKeepaliveTime.String(), "batch-slo": batcher.DefaultSLO.String(),
		"gpu-interval": gpu.DefaultInterval.String(), "log-level": "warn", "batching": "off",
		"max-concurrent-streams": strconv.Itoa(proxy.DefaultMaxConcurrentStreams), "idle-timeout": proxy.DefaultIdleTimeout.String(),
		"max-buffered-bytes": "0",
	} {
		if got := fs.Lookup(name).DefValue; got != want {
			t.Errorf("-help default of --%s = %q, want %q", name, got, want)
		}
	}
}

func TestFlagsWinOverFile(t *testing.T) {
	file := writeYAML(t, "upstream: a:1", "upstream_conns: 4", "max_in_flight: 7", "drain_delay: 9s",
		"monitor:", "  max_series: 11", "log:", "  level: error", "batching:", "  slots: 3", "gpu:", "  interval: 3s")
	c, err := parseConfig([]string{"--config", file})
	if err != nil {
		t.Fatal(err)
	}
	if c.UpstreamConns != 4 || c.MaxInFlight != 7 || c.DrainDelay != 9*time.Second || c.Monitor.MaxSeries != 11 ||
		c.Log.Level != "error" || c.Batching.Slots != 3 || c.GPU.Interval != 3*time.Second {
		t.Fatalf("file values not applied: %+v", c)
	}
	c, err = parseConfig([]string{"--config", file, "--upstream-conns", "5", "--max-in-flight", "0", "--drain-delay", "0s",
		"--max-series", "12", "--log-level", "DEBUG", "--batch-slots", "2", "--gpu-interval", "4s"})
	if err != nil {
		t.Fatal(err)
	}
	if c.UpstreamConns != 5 || c.MaxInFlight != 0 || c.DrainDelay != 0 || c.Monitor.MaxSeries != 12 ||
		c.Log.Level != "debug" || c.Batching.Slots != 2 || c.GPU.Interval != 4*time.Second {
		t.Errorf("flags must win: %+v", c)
	}
}

func TestCheckConfigReadsTLSFiles(t *testing.T) {
	args := []string{"--check-config", "--upstream", "a:1", "--tls-cert", "testdata/nope.pem", "--tls-key", "testdata/nope.pem"}
	c, err := parseConfig(args)
	if err != nil {
		t.Fatalf("validation must not read files: %v", err)
	}
	want := `config: tls.cert_file: cannot read "testdata/nope.pem": no such file or directory`
	if err := c.readFiles(); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("readFiles: %v, want %q", err, want)
	}
	if code := run(args); code != 2 {
		t.Errorf("--check-config with a missing TLS file exits %d, want 2", code)
	}
}
