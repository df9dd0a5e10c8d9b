package integration

import (
	"bufio"
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
	build := exec.Command("go", "build", "-o", dir+"/", "../cmd/infergate", "../examples/simserver")
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

// proc is a started binary and the addresses it announced.
type proc struct {
	cmd   *exec.Cmd
	log   *lockedBuffer
	grpc  string
	admin string
	done  chan struct{}
	err   error // exit status, valid after done
}

var startLine = regexp.MustCompile(`grpc=(\S+) admin=(\S+)`)

// start runs bin with args and waits for its start line on stderr.
func start(t *testing.T, bin string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(filepath.Join(binDir, bin), args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, log: &lockedBuffer{}, done: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	found := make(chan [2]string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sent := false
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(p.log, line)
			if m := startLine.FindStringSubmatch(line); m != nil && !sent && strings.Contains(line, bin+":") {
				found <- [2]string{m[1], m[2]}
				sent = true
			}
		}
		io.Copy(p.log, stderr)
	}()
	go func() { p.err = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		// A failed test shows what each process said, and whether it died
		// on its own: a client's "EOF" says nothing of why.
		if t.Failed() {
			exited := "running"
			select {
			case <-p.done:
				exited = fmt.Sprintf("exited by itself: %v", p.err)
			default:
			}
			t.Logf("%s %v (%s); its log:\n%s", bin, args, exited, headTail(p.log.String(), 8<<10, 2<<10))
		}
		p.kill()
	})
	select {
	case a := <-found:
		p.grpc, p.admin = a[0], a[1]
	case <-p.done:
		t.Fatalf("%s exited before serving: %v\n%s", bin, p.err, p.log)
	case <-time.After(60 * time.Second):
		t.Fatalf("%s did not announce its addresses\n%s", bin, p.log)
	}
	return p
}

func (p *proc) kill() {
	select {
	case <-p.done:
		return
	default:
	}
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// sigterm sends SIGTERM and returns the exit error once the process ends.
func (p *proc) sigterm(t *testing.T) error {
	t.Helper()
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return p.err
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
