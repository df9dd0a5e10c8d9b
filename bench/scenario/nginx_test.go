package scenario

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const nginxBin = "/usr/sbin/nginx"

func TestNginxConfigRender(t *testing.T) {
	text, err := NginxConfig{Dir: "/tmp/x", Listen: "127.0.0.1:9001", Upstream: "127.0.0.1:9000", Workers: "2", User: "root"}.Render()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"daemon off;\nuser root;\nworker_processes 2;\npid /tmp/x/nginx.pid;\nerror_log /tmp/x/error.log warn;\n",
		"client_body_temp_path /tmp/x/client_body;",
		"proxy_temp_path /tmp/x/proxy;",
		"fastcgi_temp_path /tmp/x/fastcgi;",
		"uwsgi_temp_path /tmp/x/uwsgi;",
		"scgi_temp_path /tmp/x/scgi;",
		"client_max_body_size 0;",
		"    keepalive_requests 1000000;\n    keepalive_timeout 300s;\n",
		"upstream up {\n        server 127.0.0.1:9000;\n        keepalive 32;\n        keepalive_requests 1000000;\n",
		"listen 127.0.0.1:9001 http2;",
		"grpc_pass grpc://up;",
		"grpc_read_timeout 300s;",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("config lacks %q:\n%s", want, text)
		}
	}
}

func TestNginxConfigDefaultsAndErrors(t *testing.T) {
	text, err := NginxConfig{Dir: "/d", Listen: "127.0.0.1:1", Upstream: "127.0.0.1:2"}.Render()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text, "daemon off;\nworker_processes auto;\n") || strings.Contains(text, "user ") {
		t.Errorf("defaults not applied:\n%s", text)
	}
	_, err = NginxConfig{Listen: "127.0.0.1:1"}.Render()
	if err == nil || err.Error() != "scenario: nginx config: dir, upstream required" {
		t.Errorf("Render() error = %v", err)
	}
}

// TestNginxConfigAccepted has Debian's nginx check the rendered config.
func TestNginxConfigAccepted(t *testing.T) {
	if _, err := os.Stat(nginxBin); err != nil {
		t.Skip("nginx not installed")
	}
	dir := t.TempDir()
	c := NginxConfig{Dir: dir, Listen: "127.0.0.1:1", Upstream: "127.0.0.1:2"}
	if os.Geteuid() == 0 {
		c.User = "root"
	}
	text, err := c.Render()
	if err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(nginxBin, "-t", "-p", dir, "-c", conf, "-e", filepath.Join(dir, "error.log")).CombinedOutput()
	if err != nil {
		t.Fatalf("nginx -t: %v\n%s", err, out)
	}
}
