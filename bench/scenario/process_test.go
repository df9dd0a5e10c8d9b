package scenario

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

func script(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "fake.sh")
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestStartProcessParsesReadyLine(t *testing.T) {
	bin := script(t, "echo starting\necho 'simserver: grpc=127.0.0.1:4321 admin=127.0.0.1:4322' >&2\nexec sleep 60\n")
	p, m, err := StartProcess(t.Context(), StartSpec{
		Name: "fake", Bin: bin, LogPath: filepath.Join(t.TempDir(), "log"),
		ReadyLine: regexp.MustCompile(`simserver: grpc=(\S+) admin=(\S+)`),
	})
	if err != nil {
		t.Fatal(err)
	}
	if m[1] != "127.0.0.1:4321" || m[2] != "127.0.0.1:4322" {
		t.Errorf("submatches = %q", m)
	}
	p.Stop()
	p.Stop() // idempotent
	if tail := p.LogTail(); !strings.Contains(tail, "starting") {
		t.Errorf("log tail = %q", tail)
	}
}

func TestStartProcessReportsEarlyExit(t *testing.T) {
	bin := script(t, "echo 'flag provided but not defined: -admin' >&2\nexit 2\n")
	_, _, err := StartProcess(t.Context(), StartSpec{
		Name: "fake", Bin: bin, LogPath: filepath.Join(t.TempDir(), "log"),
		ReadyLine: regexp.MustCompile(`never`),
	})
	if err == nil || !strings.Contains(err.Error(), "exited before it was ready") || !strings.Contains(err.Error(), "flag provided but not defined") {
		t.Errorf("error = %v", err)
	}
}

func TestFreeAddr(t *testing.T) {
	a, err := FreeAddr()
	if err != nil || !strings.HasPrefix(a, "127.0.0.1:") || strings.HasSuffix(a, ":0") {
		t.Errorf("FreeAddr() = %q, %v", a, err)
	}
}

func TestOverheadValidateMissingBinary(t *testing.T) {
	cfg := OverheadConfig{Simserver: filepath.Join(t.TempDir(), "nope")}
	err := cfg.Validate()
	if err == nil || !strings.Contains(err.Error(), "overhead: simserver") || !strings.Contains(err.Error(), "binary not found") {
		t.Errorf("Validate() = %v", err)
	}
	if cfg.Model != "identity_fp32" || cfg.Input != "INPUT0" || len(cfg.Payloads) != 2 || !slices.Equal(cfg.Conns, []int{2}) {
		t.Errorf("defaults not filled: %+v", cfg)
	}
}

func TestProcessKill(t *testing.T) {
	// The script ignores SIGTERM: only SIGKILL ends it.
	bin := script(t, "trap '' TERM\necho ready\nwhile :; do sleep 1; done\n")
	p, _, err := StartProcess(t.Context(), StartSpec{
		Name: "fake", Bin: bin, LogPath: filepath.Join(t.TempDir(), "log"), ReadyLine: regexp.MustCompile(`ready`),
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { p.Kill(); close(done) }()
	select {
	case <-done:
	case <-time.After(3 * time.Second):
		t.Fatal("Kill did not end the process")
	}
	p.Kill() // idempotent
	p.Stop()
}
