// Package childproc starts a child process and waits until it is ready:
// the one helper with which the integration tests, the demo and bench
// start simserver, infergate and the peer proxies.
//
// A child is ready when a line of its output matches Spec.Ready (infergate
// and simserver print "name: grpc=ADDR admin=ADDR" once they listen, so
// the addresses come from the line, never from ports picked beforehand
// and raced for), or when Spec.ReadyAddr accepts a connection. Its stdout
// and stderr share one pipe, so lines keep their order; every line goes
// to the log file and the writer the caller gave, and its last lines are
// kept for the error that says why it died.
package childproc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Spec says how to start a child and how to tell it is ready.
type Spec struct {
	// Name is used in errors.
	Name string
	Path string
	Args []string
	// Env, when set, is the child's whole environment.
	Env []string
	// Ready, when set, must match a line of its output; its submatches
	// are Proc.Match.
	Ready *regexp.Regexp
	// ReadyAddr, when set, counts the child as ready once a TCP
	// connection to it succeeds (for programs with no start line).
	ReadyAddr string
	// Timeout bounds the wait for readiness; zero means 15 s.
	Timeout time.Duration
	// LogPath, when set, receives every line of its output.
	LogPath string
	// Output, when set, receives every line but the Ready line, each
	// with its newline.
	Output io.Writer
	// Grace is how long Stop waits after SIGTERM before SIGKILL; zero
	// means 5 s.
	Grace time.Duration
	// DieWithParent has the child sent SIGTERM should this process be
	// killed outright (Linux only): a demo killed by its terminal leaves
	// no server behind.
	DieWithParent bool
}

// tailLines is how many of a child's last lines are kept for errors.
const tailLines = 20

// Proc is a started child.
type Proc struct {
	Name string
	// Match is the Ready line's submatches.
	Match []string

	cmd      *exec.Cmd
	grace    time.Duration
	exited   chan struct{}
	read     chan struct{} // its output was read to the end
	err      error         // its exit, set before exited closes
	stopping atomic.Bool

	mu   sync.Mutex
	tail []string
}

// Start starts spec.Path and waits until it is ready, has exited, or the
// timeout or ctx ends; in the last cases the child is stopped and the
// error quotes its last lines.
func Start(ctx context.Context, spec Spec) (*Proc, error) {
	if spec.Timeout == 0 {
		spec.Timeout = 15 * time.Second
	}
	if spec.Grace == 0 {
		spec.Grace = 5 * time.Second
	}
	var logf *os.File
	if spec.LogPath != "" {
		var err error
		if logf, err = os.Create(spec.LogPath); err != nil {
			return nil, fmt.Errorf("%s: log: %w", spec.Name, err)
		}
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		closeFile(logf)
		return nil, fmt.Errorf("%s: pipe: %w", spec.Name, err)
	}
	cmd := exec.Command(spec.Path, spec.Args...)
	cmd.Stdout, cmd.Stderr = pw, pw
	if spec.Env != nil {
		cmd.Env = spec.Env
	}
	// Its own process group, so a forced stop also reaches what it forked.
	cmd.SysProcAttr = procAttr(spec.DieWithParent)
	if err := cmd.Start(); err != nil {
		_ = pr.Close()
		_ = pw.Close()
		closeFile(logf)
		return nil, fmt.Errorf("start %s (%s): %w", spec.Name, spec.Path, err)
	}
	_ = pw.Close() // the child holds its own copy; EOF comes when it exits
	p := &Proc{Name: spec.Name, cmd: cmd, grace: spec.Grace, exited: make(chan struct{}), read: make(chan struct{})}
	matched := make(chan []string, 1)
	go func() {
		defer close(p.read)
		p.scan(pr, logf, spec, matched)
		_ = pr.Close()
		closeFile(logf)
	}()
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()

	deadline := time.NewTimer(spec.Timeout)
	defer deadline.Stop()
	var poll <-chan time.Time
	if spec.ReadyAddr != "" {
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		poll = t.C
	}
	for {
		select {
		case m := <-matched:
			p.Match = m
			return p, nil
		case <-p.exited:
			return nil, fmt.Errorf("%s exited before it was ready (%v)%s", spec.Name, p.err, p.Tail())
		case <-deadline.C:
			p.Stop()
			return nil, fmt.Errorf("%s not ready after %s%s", spec.Name, spec.Timeout, p.Tail())
		case <-ctx.Done():
			p.Stop()
			return nil, fmt.Errorf("start %s: %w", spec.Name, ctx.Err())
		case <-poll:
			if canDial(spec.ReadyAddr) {
				return p, nil
			}
		}
	}
}

func closeFile(f *os.File) {
	if f != nil {
		_ = f.Close()
	}
}

// scan copies the child's output line by line and reports the first line
// matching Ready. It reads to the end, so the child never blocks on a
// full pipe.
func (p *Proc) scan(r io.Reader, logf *os.File, spec Spec, matched chan<- []string) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	found := false
	for sc.Scan() {
		line := sc.Text()
		if logf != nil {
			_, _ = io.WriteString(logf, line+"\n")
		}
		if !found && spec.Ready != nil {
			if m := spec.Ready.FindStringSubmatch(line); m != nil {
				found = true
				matched <- m
				continue // said by Match; the rest is the child's log
			}
		}
		if spec.Output != nil {
			_, _ = io.WriteString(spec.Output, line+"\n")
		}
		p.keep(line)
	}
	// After a line too long to scan, the rest goes on raw.
	var rest io.Writer = io.Discard
	if logf != nil {
		rest = logf
	}
	_, _ = io.Copy(rest, r)
}

func (p *Proc) keep(line string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.tail) == tailLines {
		copy(p.tail, p.tail[1:])
		p.tail = p.tail[:tailLines-1]
	}
	p.tail = append(p.tail, line)
}

func canDial(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
	if err != nil {
		return false
	}
	_ = c.Close()
	return true
}

// Tail is the child's last lines as an indented block that starts with a
// newline ("" when it printed none). It waits a moment for the output to
// be read to its end, so a dying child's last words are in it.
func (p *Proc) Tail() string {
	select {
	case <-p.read:
	case <-time.After(time.Second):
	}
	p.mu.Lock()
	lines := append([]string(nil), p.tail...)
	p.mu.Unlock()
	if len(lines) == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\nlast %d lines of %s:", len(lines), p.Name)
	for _, l := range lines {
		b.WriteString("\n  ")
		b.WriteString(l)
	}
	return b.String()
}

// Pid is the child's process ID.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Done is closed once the child exited.
func (p *Proc) Done() <-chan struct{} { return p.exited }

// Err is how the child exited; valid once Done is closed.
func (p *Proc) Err() error { return p.err }

// Exited says whether the child exited.
func (p *Proc) Exited() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// ExitedUnasked says whether the child exited without Stop or Kill.
func (p *Proc) ExitedUnasked() bool { return p.Exited() && !p.stopping.Load() }

// Signal sends sig to the child.
func (p *Proc) Signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }

// Wait waits up to d for the child to exit and returns how it exited, or
// an error saying it did not.
func (p *Proc) Wait(d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.exited:
		return p.err
	case <-t.C:
		return fmt.Errorf("%s still running after %s%s", p.Name, d, p.Tail())
	}
}

// Stop asks the child to exit (SIGTERM), waits up to its grace, then kills
// its process group, and waits for it to exit. It is safe to call more
// than once, and on a nil Proc.
func (p *Proc) Stop() {
	if p == nil {
		return
	}
	p.stopping.Store(true)
	if p.Exited() {
		return
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		p.Kill()
		return
	}
	t := time.NewTimer(p.grace)
	defer t.Stop()
	select {
	case <-p.exited:
	case <-t.C:
		p.Kill()
	}
}

// Kill sends SIGKILL to the child's process group, as a crash would end
// it, and waits for it to exit. It is safe on an exited or nil Proc.
func (p *Proc) Kill() {
	if p == nil {
		return
	}
	p.stopping.Store(true)
	if p.Exited() {
		return
	}
	killGroup(p.cmd.Process.Pid)
	<-p.exited
}
