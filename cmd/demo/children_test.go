package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fakeChildEnv makes the test binary act as a child process (see
// TestMain), so startChild is tested against a real process.
const fakeChildEnv = "DEMO_FAKE_CHILD"

func TestMain(m *testing.M) {
	switch os.Getenv(fakeChildEnv) {
	case "":
		os.Exit(m.Run())
	case "serve":
		// Like simserver: a log line, the start line, then serve until
		// SIGTERM.
		term := make(chan os.Signal, 1)
		signal.Notify(term, syscall.SIGTERM)
		fmt.Fprintln(os.Stderr, "level=INFO msg=loading")
		fmt.Fprintln(os.Stderr, "fake: grpc=127.0.0.1:4321 admin=127.0.0.1:4322 upstream=x tls=false")
		fmt.Println("level=INFO msg=serving")
		select {
		case <-term:
			os.Exit(0)
		case <-time.After(time.Minute):
			os.Exit(4) // never linger if the test forgot us
		}
	case "fail":
		// Like a child whose port is taken: dies before its start line.
		fmt.Fprintln(os.Stderr, "level=INFO msg=starting")
		fmt.Fprintln(os.Stderr, "fake: --listen: listen tcp 127.0.0.1:8001: bind: address already in use")
		os.Exit(2)
	case "silent":
		time.Sleep(time.Minute)
		os.Exit(4)
	}
}

func fakeSpec(t *testing.T, mode string) childSpec {
	t.Helper()
	t.Setenv(fakeChildEnv, mode)
	// Under -race a process sleeps 1s at exit by default; the parent read
	// GORACE at its own start, so this reaches only the child.
	t.Setenv("GORACE", "atexit_sleep_ms=0")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return childSpec{name: "fake", path: exe, startTimeout: 30 * time.Second}
}

func TestStartLine(t *testing.T) {
	cases := []struct {
		name, child, line string
		grpc, admin       string
		ok                bool
	}{
		{"simserver", "simserver", "simserver: grpc=127.0.0.1:8001 admin=127.0.0.1:8002", "127.0.0.1:8001", "127.0.0.1:8002", true},
		{"infergate", "infergate", "infergate: grpc=127.0.0.1:41234 admin=127.0.0.1:9091 upstream=127.0.0.1:8001 tls=false", "127.0.0.1:41234", "127.0.0.1:9091", true},
		{"ipv6", "infergate", "infergate: grpc=[::1]:9001 admin=[::1]:9091 upstream=x tls=true", "[::1]:9001", "[::1]:9091", true},
		{"other child's line", "infergate", "simserver: grpc=127.0.0.1:8001 admin=127.0.0.1:8002", "", "", false},
		{"log line", "simserver", `time=2026-11-01T10:00:00Z level=INFO msg="simserver: shutting down"`, "", "", false},
		{"no admin", "simserver", "simserver: grpc=127.0.0.1:8001", "", "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := startLine(tc.child).FindStringSubmatch(tc.line)
			if ok := m != nil; ok != tc.ok || ok && (m[1] != tc.grpc || m[2] != tc.admin) {
				t.Errorf("startLine(%q) on %q = %q; want %q, %q, %v", tc.child, tc.line, m, tc.grpc, tc.admin, tc.ok)
			}
		})
	}
}

func TestStartChildServes(t *testing.T) {
	c, err := startChild(context.Background(), fakeSpec(t, "serve"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	if c.grpcAddr != "127.0.0.1:4321" || c.adminAddr != "127.0.0.1:4322" {
		t.Errorf("addresses %q %q", c.grpcAddr, c.adminAddr)
	}
	c.Stop()
	if c.ExitedUnasked() {
		t.Error("a stopped child counts as unexpectedly exited")
	}
	if err := c.Err(); err != nil {
		t.Errorf("child exit after SIGTERM: %v", err)
	}
	// The start line is consumed; the other lines (stdout too) are kept.
	if got := c.Tail(); !strings.HasSuffix(got, "level=INFO msg=loading\n  level=INFO msg=serving") {
		t.Errorf("kept log lines %q", got)
	}
}

func TestStartChildVerboseForwards(t *testing.T) {
	spec := fakeSpec(t, "serve")
	var out syncBuffer
	spec.verbose, spec.logOut = true, &out
	c, err := startChild(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	c.Stop()
	_ = c.Tail() // waits for the output to be read to its end
	if got := out.String(); !strings.Contains(got, "[fake] level=INFO msg=loading\n") || strings.Contains(got, "grpc=") {
		t.Errorf("forwarded %q", got)
	}
}

func TestStartChildDiesBeforeStartLine(t *testing.T) {
	_, err := startChild(context.Background(), fakeSpec(t, "fail"))
	if err == nil {
		t.Fatal("want an error")
	}
	for _, want := range []string{"fake exited before it was ready", "exit status 2", "address already in use"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
}

func TestStartChildCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	spec := fakeSpec(t, "silent")
	go cancel()
	if _, err := startChild(ctx, spec); err == nil || !strings.Contains(err.Error(), "context canceled") {
		t.Errorf("got %v", err)
	}
}

func TestStartChildMissingBinary(t *testing.T) {
	spec := childSpec{name: "nope", path: t.TempDir() + "/nope"}
	if _, err := startChild(context.Background(), spec); err == nil || !strings.Contains(err.Error(), "demo: start nope") {
		t.Errorf("got %v", err)
	}
}
