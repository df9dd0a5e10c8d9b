package main

import (
	"strings"
	"testing"
	"time"

	"github.com/infergate/infergate/monitor"
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
		{"yaml type error", []string{"--config", "testdata/config.bad-duration.yaml"}, "line 2: cannot unmarshal !!str `soon` into a duration (e.g. 5s)"},
		{"zero keepalive flag", []string{"--upstream", "a:1", "--upstream-keepalive-time", "0s"}, "config: --upstream-keepalive-time: must be at least 10s, got 0s"},
		{"short keepalive", []string{"--upstream", "a:1", "--upstream-keepalive-time", "1s"}, "config: upstream_keepalive_time: must be at least 10s, got 1s"},
		{"negative in flight", []string{"--upstream", "a:1", "--max-in-flight", "-1"}, "config: max_in_flight: must be 0 (no cap) or positive, got -1"},
		{"bad probe", []string{"--upstream", "a:1", "--readiness-probe", "ping"}, `config: readiness.probe: must be auto, health, kserve, tfserving or tcp, got "ping"`},
		{"label limit", []string{"--upstream", "a:1", "--max-label-bytes", "0"}, "config: --max-label-bytes: must be between 1 and 4096, got 0"},
		{"bad yaml value", []string{"--config", "testdata/config.bad-series.yaml"}, "config: monitor.max_series: must be positive, got -3"},
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
