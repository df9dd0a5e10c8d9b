package scenario

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
	"syscall"
	"time"
)

// Process is a child process started by a scenario. Its stdout and stderr
// go to a log file.
type Process struct {
	// Name is used in errors and logs.
	Name string
	// LogPath is the file holding the process's output.
	LogPath string

	cmd    *exec.Cmd
	exited chan struct{}
	err    error // set before exited is closed
}

// StartSpec says how to start a process and how to tell it is ready.
type StartSpec struct {
	Name string
	Bin  string
	Args []string
	// LogPath receives stdout and stderr; required.
	LogPath string
	// ReadyLine, when set, must match a line of stderr or stdout; its
	// submatches are returned by Start.
	ReadyLine *regexp.Regexp
	// ReadyAddr, when set, counts the process as ready once a TCP connection
	// to it succeeds (used when ReadyLine is unset, or as an alternative to
	// it for programs whose start line may differ).
	ReadyAddr string
	// Timeout bounds the wait for readiness; zero means 15 s.
	Timeout time.Duration
}

// StartProcess starts spec.Bin and waits until it is ready, has exited, or
// the timeout passes; in the last two cases the process is stopped and the
// error quotes the end of its log.
func StartProcess(ctx context.Context, spec StartSpec) (*Process, []string, error) {
	if spec.Timeout == 0 {
		spec.Timeout = 15 * time.Second
	}
	logf, err := os.Create(spec.LogPath)
	if err != nil {
		return nil, nil, fmt.Errorf("scenario: %s: log: %w", spec.Name, err)
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		_ = logf.Close()
		return nil, nil, fmt.Errorf("scenario: %s: pipe: %w", spec.Name, err)
	}
	cmd := exec.Command(spec.Bin, spec.Args...)
	cmd.Stdout, cmd.Stderr = pw, pw
	// Own process group, so a forced stop also reaches workers it forked.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = pr.Close()
		_ = pw.Close()
		_ = logf.Close()
		return nil, nil, fmt.Errorf("scenario: start %s (%s): %w", spec.Name, spec.Bin, err)
	}
	_ = pw.Close() // the child holds its own copy
	p := &Process{Name: spec.Name, LogPath: spec.LogPath, cmd: cmd, exited: make(chan struct{})}

	matched := make(chan []string, 1)
	var copyDone sync.WaitGroup
	copyDone.Go(func() { scanOutput(pr, logf, spec.ReadyLine, matched) })
	go func() {
		p.err = cmd.Wait()
		copyDone.Wait()
		_ = pr.Close()
		_ = logf.Close()
		close(p.exited)
	}()

	deadline := time.NewTimer(spec.Timeout)
	defer deadline.Stop()
	poll := time.NewTicker(50 * time.Millisecond)
	defer poll.Stop()
	for {
		select {
		case m := <-matched:
			return p, m, nil
		case <-p.exited:
			return nil, nil, fmt.Errorf("scenario: %s exited before it was ready (%v): %s", spec.Name, p.err, p.LogTail())
		case <-deadline.C:
			p.Stop()
			return nil, nil, fmt.Errorf("scenario: %s not ready after %s: %s", spec.Name, spec.Timeout, p.LogTail())
		case <-ctx.Done():
			p.Stop()
			return nil, nil, fmt.Errorf("scenario: start %s: %w", spec.Name, ctx.Err())
		case <-poll.C:
			if spec.ReadyAddr != "" && canDial(spec.ReadyAddr) {
				return p, nil, nil
			}
		}
	}
}

// scanOutput copies the child's output to the log and reports the first
// line matching ready. It keeps draining afterwards so the child never
// blocks on a full pipe.
func scanOutput(r io.Reader, log io.Writer, ready *regexp.Regexp, matched chan<- []string) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	found := false
	for sc.Scan() {
		line := sc.Text()
		_, _ = io.WriteString(log, line+"\n")
		if !found && ready != nil {
			if m := ready.FindStringSubmatch(line); m != nil {
				found = true
				matched <- m
			}
		}
	}
	_, _ = io.Copy(log, r) // after a too-long line, keep the rest raw
}

func canDial(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
	if err != nil {
		return false
	}
	_ = c.Close()
	return true
}

// Stop asks the process to exit (SIGTERM), waits up to five seconds, then
// kills its process group. It is safe to call more than once.
func (p *Process) Stop() {
	if p == nil {
		return
	}
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(5 * time.Second)
	defer t.Stop()
	select {
	case <-p.exited:
	case <-t.C:
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.exited
	}
}

// Kill sends SIGKILL to the process's group, as a crash would end it,
// and waits for it to exit. It is safe to call on an exited process.
func (p *Process) Kill() {
	if p == nil {
		return
	}
	select {
	case <-p.exited:
		return
	default:
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.exited
}

// Pid returns the process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// LogTail returns the last lines of the process's log, for error messages.
func (p *Process) LogTail() string {
	data, err := os.ReadFile(p.LogPath)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > 10 {
		lines = lines[len(lines)-10:]
	}
	if len(lines) == 1 && lines[0] == "" {
		return "(empty log)"
	}
	return strings.Join(lines, " | ")
}

// FreeAddr returns a loopback address with a port that was free a moment
// ago: it listens on 127.0.0.1:0 and closes the listener.
func FreeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("scenario: free port: %w", err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		return "", fmt.Errorf("scenario: free port: %w", err)
	}
	return addr, nil
}

// errMissingBinary reports a binary that does not exist, with a hint.
var errMissingBinary = errors.New("binary not found (build it with: make build)")

// startInfergate starts infergate in front of upstream on ports the kernel
// picks (127.0.0.1:0) and reads the bound addresses from its start line.
// Picking ports first and passing them (FreeAddr) races: two picks can
// return the same port, and another process can take it meanwhile.
func startInfergate(ctx context.Context, bin, upstream, logPath string, extra []string) (p *Process, grpcAddr, adminAddr string, err error) {
	return startInfergateArgs(ctx, bin, logPath, append([]string{"--upstream", upstream}, extra...))
}

// startInfergateArgs is startInfergate with every argument but the
// listeners given (a config file may name the upstreams instead).
func startInfergateArgs(ctx context.Context, bin, logPath string, extra []string) (p *Process, grpcAddr, adminAddr string, err error) {
	args := append([]string{"--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0"}, extra...)
	p, m, err := StartProcess(ctx, StartSpec{
		Name: "infergate", Bin: bin, Args: args, LogPath: logPath, ReadyLine: infergateLine,
	})
	if err != nil {
		return nil, "", "", fmt.Errorf("%w (args: %s)", err, strings.Join(args, " "))
	}
	return p, m[1], m[2], nil
}

// workDir returns dir, or a new temporary folder when dir is "", with the
// cleanup that removes a temporary folder unless keep.
func workDir(scenario, dir string, keep bool) (string, func(), error) {
	if dir != "" {
		return dir, func() {}, nil
	}
	d, err := os.MkdirTemp("", "infergate-bench-")
	if err != nil {
		return "", nil, fmt.Errorf("%s: work dir: %w", scenario, err)
	}
	if keep {
		return d, func() {}, nil
	}
	return d, func() { os.RemoveAll(d) }, nil
}
