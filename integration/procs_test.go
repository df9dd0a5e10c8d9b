package integration

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/infergate/infergate/internal/childproc"
)

// binDir holds binaries built once by TestMain.
var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "infergate-it-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	build := exec.Command("go", "build", "-o", dir+"/", "../cmd/infergate", "../examples/simserver", "../cmd/demo")
	// bench is a module of its own: built from its folder.
	buildBench := exec.Command("go", "build", "-o", dir+"/", "./cmd/bench")
	buildBench.Dir = "../bench"
	for _, b := range []*exec.Cmd{build, buildBench} {
		b.Stdout, b.Stderr = os.Stdout, os.Stderr
		if err := b.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "build:", err)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// lockedBuffer collects a process's stderr for failure messages.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// proc is a started binary, the addresses it announced and its whole
// log.
type proc struct {
	*childproc.Proc
	log   *lockedBuffer
	grpc  string
	admin string
}

// start runs bin with args and waits for its start line.
func start(t *testing.T, bin string, args ...string) *proc {
	t.Helper()
	p := &proc{log: &lockedBuffer{}}
	cp, err := childproc.Start(context.Background(), childproc.Spec{
		Name: bin, Path: filepath.Join(binDir, bin), Args: args, Output: p.log, Timeout: 60 * time.Second,
		Ready: regexp.MustCompile(`^` + regexp.QuoteMeta(bin) + `: .*?grpc=(\S+) admin=(\S+)`),
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, p.log)
	}
	p.Proc, p.grpc, p.admin = cp, cp.Match[1], cp.Match[2]
	t.Cleanup(func() {
		// A failed test shows what each process said, and whether it died
		// on its own: a client's "EOF" says nothing of why.
		if t.Failed() {
			exited := "running"
			if p.Exited() {
				exited = fmt.Sprintf("exited by itself: %v", p.Err())
			}
			t.Logf("%s %v (%s); its log:\n%s", bin, args, exited, headTail(p.log.String(), 8<<10, 2<<10))
		}
		p.Kill()
	})
	return p
}

// sigterm sends SIGTERM and returns the exit error once the process ends.
func (p *proc) sigterm(t *testing.T) error {
	t.Helper()
	_ = p.Signal(syscall.SIGTERM)
	select {
	case <-p.Done():
		return p.Err()
	case <-time.After(60 * time.Second):
		t.Fatalf("process did not exit after SIGTERM\n%s", p.log)
		return nil
	}
}

func startSim(t *testing.T, args ...string) *proc {
	return start(t, "simserver", append([]string{"--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0"}, args...)...)
}

func startProxy(t *testing.T, upstream string, args ...string) *proc {
	return start(t, "infergate", append([]string{"--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--upstream", upstream}, args...)...)
}

// httpGet fetches an admin URL and returns status and body.
func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// httpDo sends a request with a JSON body to an admin URL.
func httpDo(t *testing.T, method, url, body string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// headTail is s, or its first head and last tail bytes when it is longer:
// a crash says why at its head (after the last log lines), a slow death at
// its tail.
func headTail(s string, head, tail int) string {
	if len(s) <= head+tail {
		return s
	}
	return s[:head] + "\n…\n" + s[len(s)-tail:]
}
