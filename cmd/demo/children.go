package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// killGrace is how long a child gets between SIGTERM and SIGKILL.
const killGrace = 5 * time.Second

// logLines is how many of a child's recent log lines are kept, to show
// when it dies.
const logLines = 20

// startLineRE reads the bound addresses from a child's start line, e.g.
// "simserver: grpc=127.0.0.1:8001 admin=127.0.0.1:8002".
var startLineRE = regexp.MustCompile(`grpc=(\S+) admin=(\S+)`)

// parseStartLine reports the gRPC and admin addresses in line when it is
// the start line of the child called name ("name: grpc=... admin=...").
func parseStartLine(name, line string) (grpcAddr, adminAddr string, ok bool) {
	if !strings.HasPrefix(line, name+": ") {
		return "", "", false
	}
	m := startLineRE.FindStringSubmatch(line)
	if m == nil {
		return "", "", false
	}
	return m[1], m[2], true
}

// childSpec says how to start one child process.
type childSpec struct {
	name string
	path string
	args []string
	// verbose forwards the child's log lines, prefixed "[name] ", to logOut.
	verbose bool
	logOut  io.Writer
	// startTimeout bounds the wait for the start line.
	startTimeout time.Duration
}

// child is a started child process whose start line has been read.
type child struct {
	name      string
	grpcAddr  string
	adminAddr string

	cmd        *exec.Cmd
	logs       *ringLog
	done       chan struct{} // closed once the process has exited
	readerDone chan struct{} // closed once its output has been read to EOF
	waitErr    error         // set before done is closed
	stopping   atomic.Bool
}

// startChild starts spec and waits for its start line. If the child exits
// first, or prints nothing in time, it is killed and the error carries its
// last log lines.
func startChild(ctx context.Context, spec childSpec) (*child, error) {
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("demo: %s: pipe: %w", spec.name, err)
	}
	cmd := exec.Command(spec.path, spec.args...)
	// stdout and stderr share one pipe so log lines keep their order.
	cmd.Stdout, cmd.Stderr = pw, pw
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		pr.Close()
		pw.Close()
		return nil, fmt.Errorf("demo: start %s: %w", spec.name, err)
	}
	pw.Close() // the child holds its own copy; EOF comes when it exits
	c := &child{
		name:       spec.name,
		cmd:        cmd,
		logs:       newRingLog(logLines),
		done:       make(chan struct{}),
		readerDone: make(chan struct{}),
	}
	started := make(chan [2]string, 1)
	go c.readLogs(pr, spec, started)
	go c.wait()

	timeout := spec.startTimeout
	if timeout <= 0 {
		timeout = 15 * time.Second
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case addrs := <-started:
		c.grpcAddr, c.adminAddr = addrs[0], addrs[1]
		return c, nil
	case <-c.done:
		return nil, fmt.Errorf("demo: %s exited before it started (%v)%s", spec.name, c.waitErr, c.lastLines())
	case <-t.C:
		c.stop()
		return nil, fmt.Errorf("demo: %s printed no start line within %s%s", spec.name, timeout, c.lastLines())
	case <-ctx.Done():
		c.stop()
		return nil, fmt.Errorf("demo: start %s: %w", spec.name, ctx.Err())
	}
}

// readLogs reads the child's output line by line until EOF: the first
// start line goes to started, every other line to the ring (and, verbose,
// to the screen).
func (c *child) readLogs(r io.ReadCloser, spec childSpec, started chan<- [2]string) {
	defer close(c.readerDone)
	defer r.Close()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	seen := false
	for sc.Scan() {
		line := sc.Text()
		if !seen {
			if g, a, ok := parseStartLine(spec.name, line); ok {
				seen = true
				started <- [2]string{g, a}
				continue
			}
		}
		c.logs.add(line)
		if spec.verbose && spec.logOut != nil {
			fmt.Fprintf(spec.logOut, "[%s] %s\n", spec.name, line)
		}
	}
	// Drain anything left (a too-long line) so the child never blocks on
	// a full pipe.
	io.Copy(io.Discard, r)
}

func (c *child) wait() {
	c.waitErr = c.cmd.Wait()
	close(c.done)
}

// exitedUnexpectedly reports whether the child exited without stop being
// called.
func (c *child) exitedUnexpectedly() bool {
	select {
	case <-c.done:
		return !c.stopping.Load()
	default:
		return false
	}
}

// stop sends SIGTERM, then SIGKILL after killGrace, and waits for the
// process to exit. It is safe to call more than once.
func (c *child) stop() {
	c.stopping.Store(true)
	select {
	case <-c.done:
		return
	default:
	}
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		c.cmd.Process.Kill()
	}
	t := time.NewTimer(killGrace)
	defer t.Stop()
	select {
	case <-c.done:
	case <-t.C:
		c.cmd.Process.Kill()
		<-c.done
	}
}

// lastLines returns the child's recent log lines as an indented block
// that starts with a newline and ends without one (empty when there are
// none). It waits briefly for the output to be read
// to the end, so the last words of a dying child are included.
func (c *child) lastLines() string {
	select {
	case <-c.readerDone:
	case <-time.After(time.Second):
	}
	lines := c.logs.lines()
	if len(lines) == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\nlast %d log lines of %s:", len(lines), c.name)
	for _, l := range lines {
		b.WriteString("\n  ")
		b.WriteString(l)
	}
	return b.String()
}

// ringLog keeps the last n lines written to it.
type ringLog struct {
	mu  sync.Mutex
	n   int
	buf []string
}

func newRingLog(n int) *ringLog { return &ringLog{n: n} }

func (r *ringLog) add(line string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.buf) == r.n {
		copy(r.buf, r.buf[1:])
		r.buf = r.buf[:r.n-1]
	}
	r.buf = append(r.buf, line)
}

func (r *ringLog) lines() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.buf...)
}
