package integration

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// quickstartMarker precedes the README's quick-start block: the commands a
// new user copies from a fresh clone, which this test runs.
const quickstartMarker = "<!-- quickstart -->"

// quickstartBlock returns the lines of the sh block after the marker.
func quickstartBlock(readme string) ([]string, bool) {
	i := strings.Index(readme, quickstartMarker)
	if i < 0 {
		return nil, false
	}
	rest := strings.TrimLeft(readme[i+len(quickstartMarker):], "\n")
	if !strings.HasPrefix(rest, "```sh\n") {
		return nil, false
	}
	rest = strings.TrimPrefix(rest, "```sh\n")
	end := strings.Index(rest, "\n```")
	if end < 0 {
		return nil, false
	}
	return strings.Split(rest[:end], "\n"), true
}

// quickstartPromises are what the README's prose says each command shows:
// a command whose text holds the key must print every one of the values.
var quickstartPromises = map[string][]string{
	"/metrics":       {`model="resnet50"`, `window="1m",quantile="0.99"`},
	"/api/v1/faults": {`"error_rate": 0.2`},
	"/api/v1/alerts": {`"name": "ModelErrorRatio"`, `"state": "firing"`, `"model": "resnet50"`},
}

var (
	loopbackAddr = regexp.MustCompile(`127\.0\.0\.1:\d+`)
	sleepLine    = regexp.MustCompile(`^sleep \d+$`)
)

// TestQuickStart runs the README's quick-start block as a user would, with
// the binaries TestMain built and free ports instead of the block's fixed
// ones (other tests run beside it): the servers start, the p99 line
// appears on /metrics and the error fault fires ModelErrorRatio. A `sleep`
// in the block becomes polling: each later command is run again until it
// succeeds and prints what the README promises, within a generous
// deadline.
func TestQuickStart(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatal("curl not installed (.ci/run installs it)")
	}
	data, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	lines, ok := quickstartBlock(string(data))
	if !ok {
		t.Fatalf("README.md has no ```sh block right after %q", quickstartMarker)
	}
	ports := map[string]string{}
	rewrite := func(line string) string {
		line = loopbackAddr.ReplaceAllStringFunc(line, func(a string) string {
			if ports[a] == "" {
				ports[a] = freePort(t)
			}
			return ports[a]
		})
		return strings.ReplaceAll(line, "bin/", binDir+"/")
	}

	kept := map[string]bool{}
	poll := false
	for _, raw := range lines {
		line := strings.TrimSpace(raw)
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
			continue
		case line == "make build":
			continue // TestMain built bin/'s binaries
		case sleepLine.MatchString(line):
			poll = true
			continue
		}
		cmdline := rewrite(line)
		if bg, ok := strings.CutSuffix(cmdline, "&"); ok {
			startBackground(t, strings.TrimSpace(bg))
			continue
		}
		var want []string
		for key, values := range quickstartPromises {
			if strings.Contains(line, key) {
				want = values
				kept[key] = true
			}
		}
		runUntil(t, line, cmdline, want, poll)
	}
	for key := range quickstartPromises {
		if !kept[key] {
			t.Errorf("the quick-start block has no command with %q any more: update quickstartPromises and the README's prose together", key)
		}
	}
}

// startBackground runs a command line in its own process group, killed
// with its children when the test ends.
func startBackground(t *testing.T, cmdline string) {
	t.Helper()
	cmd := exec.Command("bash", "-c", "exec "+cmdline)
	cmd.Dir = ".."
	log := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s: %v", cmdline, err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		if t.Failed() {
			t.Logf("%s; its output:\n%s", cmdline, headTail(log.String(), 4<<10, 2<<10))
		}
	})
}

// runUntil runs a foreground command line from the repository root; it
// must exit 0 and print every string of want. With poll set (a sleep came
// before it in the block) it is run again until it does, for up to a
// minute.
func runUntil(t *testing.T, shown, cmdline string, want []string, poll bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cmd := exec.CommandContext(ctx, "bash", "-c", cmdline)
		cmd.Dir = ".."
		out, err := cmd.CombinedOutput()
		cancel()
		missing := ""
		for _, w := range want {
			if !bytes.Contains(out, []byte(w)) {
				missing = w
				break
			}
		}
		if err == nil && missing == "" {
			return
		}
		if !poll || time.Now().After(deadline) {
			t.Fatalf("quick start: %s\nexit: %v; missing %q in its output:\n%s", shown, err, missing, headTail(string(out), 4<<10, 2<<10))
		}
		time.Sleep(200 * time.Millisecond)
	}
}
