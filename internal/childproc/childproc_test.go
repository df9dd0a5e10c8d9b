package childproc

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// script is a child: a shell script with body.
func script(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "fake.sh")
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

var startLine = regexp.MustCompile(`^fake: grpc=(\S+) admin=(\S+)`)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A child that prints its start line is ready with the line's
// addresses; its other lines, stdout and stderr in order, go to the log
// file, the Output and its tail; a stopped child exited as asked.
func TestStartReadsTheStartLine(t *testing.T) {
	bin := script(t, `trap 'exit 0' TERM
echo loading >&2
echo 'fake: grpc=127.0.0.1:4321 admin=127.0.0.1:4322 tls=false' >&2
echo serving
while :; do sleep 1; done
`)
	var out syncBuffer
	logPath := filepath.Join(t.TempDir(), "log")
	p, err := Start(t.Context(), Spec{Name: "fake", Path: bin, Ready: startLine, LogPath: logPath, Output: &out, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if p.Match[1] != "127.0.0.1:4321" || p.Match[2] != "127.0.0.1:4322" {
		t.Errorf("match %q", p.Match)
	}
	// The line after the start line may come after Start returns (it
	// returns on the start line): stopped before it, the child never
	// printed it (once under make test's load).
	for end := time.Now().Add(10 * time.Second); !strings.Contains(out.String(), "serving") && time.Now().Before(end); {
		time.Sleep(10 * time.Millisecond)
	}
	p.Stop()
	p.Stop() // again: nothing
	if p.ExitedUnasked() {
		t.Error("a stopped child counts as exited unasked")
	}
	if err := p.Err(); err != nil {
		t.Errorf("exit after SIGTERM: %v", err)
	}
	if got := out.String(); got != "loading\nserving\n" {
		t.Errorf("Output got %q, want the lines but the start line", got)
	}
	if tail := p.Tail(); !strings.Contains(tail, "loading\n  serving") {
		t.Errorf("tail %q", tail)
	}
	logged, _ := os.ReadFile(logPath)
	if !strings.Contains(string(logged), "loading\nfake: grpc=") {
		t.Errorf("log file %q", logged)
	}
}

// A child that dies before it is ready: the error says so, with its exit
// and its last words.
func TestStartSaysWhyTheChildDied(t *testing.T) {
	bin := script(t, "echo starting >&2\necho 'fake: --listen: bind: address already in use' >&2\nexit 2\n")
	_, err := Start(t.Context(), Spec{Name: "fake", Path: bin, Ready: startLine, Timeout: time.Minute})
	if err == nil {
		t.Fatal("want an error")
	}
	for _, want := range []string{"fake exited before it was ready", "exit status 2", "address already in use"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
}

func TestStartCancelledAndMissing(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	go cancel()
	bin := script(t, "exec sleep 60\n")
	if _, err := Start(ctx, Spec{Name: "fake", Path: bin, Ready: startLine, Timeout: time.Minute}); err == nil || !strings.Contains(err.Error(), "context canceled") {
		t.Errorf("cancelled: %v", err)
	}
	if _, err := Start(t.Context(), Spec{Name: "nope", Path: filepath.Join(t.TempDir(), "nope")}); err == nil || !strings.Contains(err.Error(), "start nope") {
		t.Errorf("missing: %v", err)
	}
}

// A child that ignores SIGTERM ends at Kill (and at Stop, after its
// grace).
func TestKillEndsAChildThatIgnoresTerm(t *testing.T) {
	bin := script(t, "trap '' TERM\necho ready\nwhile :; do sleep 1; done\n")
	p, err := Start(t.Context(), Spec{Name: "fake", Path: bin, Ready: regexp.MustCompile(`ready`), Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	p.Kill()
	if !p.Exited() {
		t.Fatal("Kill returned before the child exited")
	}
	p.Kill()
	p.Stop()
}
