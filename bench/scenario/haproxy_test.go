package scenario

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/infergate/infergate/bench/load"
	"github.com/infergate/infergate/internal/stubserver"
)

func TestHAProxyConfigRender(t *testing.T) {
	text, err := HAProxyConfig{Dir: "/tmp/x", Listen: "127.0.0.1:9001", Upstream: "127.0.0.1:9000"}.Render()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"global\n    nbthread 2\n",
		"defaults\n    mode http\n",
		"timeout client 300s",
		"bind 127.0.0.1:9001 proto h2\n",
		"backend be\n    http-reuse always\n    server s1 127.0.0.1:9000 proto h2\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("config lacks %q:\n%s", want, text)
		}
	}
	text, err = HAProxyConfig{Dir: "/d", Listen: "127.0.0.1:1", Upstream: "127.0.0.1:2", Mode: HAProxyTCP, Threads: 1}.Render()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"nbthread 1\n", "mode tcp\n", "bind 127.0.0.1:1\n", "server s1 127.0.0.1:2\n"} {
		if !strings.Contains(text, want) {
			t.Errorf("tcp config lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "h2") || strings.Contains(text, "http-") {
		t.Errorf("tcp config speaks http:\n%s", text)
	}
}

func TestHAProxyConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		c    HAProxyConfig
		want string
	}{
		{HAProxyConfig{Listen: "127.0.0.1:1"}, "scenario: haproxy config: dir, upstream required"},
		{HAProxyConfig{Dir: "/d", Listen: "a:1", Upstream: "a:2", Mode: "udp"}, `scenario: haproxy config: mode "udp": want http or tcp`},
		{HAProxyConfig{Dir: "/d", Listen: "a:1", Upstream: "a:2", Threads: -1}, "scenario: haproxy config: threads -1: must be positive"},
	} {
		if _, err := tc.c.Render(); err == nil || err.Error() != tc.want {
			t.Errorf("Render(%+v) error = %v, want %q", tc.c, err, tc.want)
		}
	}
}

// TestHAProxyProxiesGRPC has Debian's HAProxy check both rendered configs,
// then carries a small and a 1 MiB call to the stub in each mode.
func TestHAProxyProxiesGRPC(t *testing.T) {
	bin := FindHAProxy()
	if bin == "" {
		t.Skip("haproxy not installed")
	}
	if testing.Short() {
		t.Skip("starts processes")
	}
	up, err := stubserver.Start(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer up.Stop()
	for _, mode := range []string{HAProxyHTTP, HAProxyTCP} {
		t.Run(mode, func(t *testing.T) {
			dir := t.TempDir()
			listen, err := FreeAddr()
			if err != nil {
				t.Fatal(err)
			}
			c := HAProxyConfig{Dir: dir, Listen: listen, Upstream: up.Addr, Mode: mode}
			text, err := c.Render()
			if err != nil {
				t.Fatal(err)
			}
			conf := filepath.Join(dir, "check.cfg")
			if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
			if out, err := exec.Command(bin, "-c", "-f", conf).CombinedOutput(); err != nil {
				t.Fatalf("haproxy -c: %v\n%s", err, out)
			}
			hp, err := StartHAProxy(t.Context(), bin, c)
			if err != nil {
				t.Fatal(err)
			}
			defer hp.Stop()
			for _, shape := range [][]int64{{1, 16}, {1, 262144}} {
				pl, err := load.NewPayload(load.KServe, "identity_fp32", []load.Tensor{{Name: "INPUT0", Datatype: "FP32", Shape: shape}})
				if err != nil {
					t.Fatal(err)
				}
				res, err := load.Run(t.Context(), load.Config{Target: listen, Payload: pl, Requests: 4, Concurrency: 2, Timeout: 5 * time.Second})
				if err != nil {
					t.Fatal(err)
				}
				if res.Completed != 4 || res.Failed != 0 {
					t.Errorf("shape %v: %d ok, %d failed %v; log: %s", shape, res.Completed, res.Failed, res.Errors, hp.Tail())
				}
			}
		})
	}
}
