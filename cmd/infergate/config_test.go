package main

import (
	"strings"
	"testing"
	"time"
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
	if c.Admin != defaultAdmin || c.UpstreamConns != defaultUpstreamConns || c.Log.Level != "warn" {
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
		{"unknown yaml field", []string{"--config", "testdata/config.bad-unknown-field.yaml"}, "field upstreem not found"},
		{"bad yaml value", []string{"--config", "testdata/config.bad-series.yaml"}, "config: monitor.max_series: must be positive, got -3"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseConfig(tc.args)
			if err == nil {
				t.Fatalf("no error, want %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not contain %q", err, tc.want)
			}
		})
	}
}
