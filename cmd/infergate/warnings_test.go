package main

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestStartWarnings(t *testing.T) {
	dir := t.TempDir()
	open, closed := filepath.Join(dir, "open"), filepath.Join(dir, "closed")
	for path, mode := range map[string]os.FileMode{open: 0o644, closed: 0o600} {
		if err := os.WriteFile(path, []byte("s3cret\n"), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, mode); err != nil { // past the umask
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name string
		cfg  Config
		want []string // substrings of WARN lines; none: no warning
	}{
		{"pprof on 0.0.0.0", Config{Admin: "0.0.0.0:9091", Pprof: true}, []string{"level=WARN", "pprof", "admin=0.0.0.0:9091"}},
		{"pprof on all interfaces", Config{Admin: ":9091", Pprof: true}, []string{"level=WARN", "pprof"}},
		{"pprof on loopback", Config{Admin: "127.0.0.1:9091", Pprof: true}, nil},
		{"pprof on ::1", Config{Admin: "[::1]:9091", Pprof: true}, nil},
		{"pprof on localhost", Config{Admin: "localhost:9091", Pprof: true}, nil},
		{"0.0.0.0 without pprof", Config{Admin: "0.0.0.0:9091"}, nil},
		{"token file 0644", Config{Admin: "127.0.0.1:0", AdminTokenFile: open}, []string{"level=WARN", "readable by group or others", "mode=0644"}},
		{"token file 0600", Config{Admin: "127.0.0.1:0", AdminTokenFile: closed}, nil},
	} {
		var buf bytes.Buffer
		startWarnings(tc.cfg, slog.New(slog.NewTextHandler(&buf, nil)))
		out := buf.String()
		if tc.want == nil && out != "" {
			t.Errorf("%s: unexpected warning %q", tc.name, out)
		}
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("%s: log %q lacks %q", tc.name, out, w)
			}
		}
	}
}
