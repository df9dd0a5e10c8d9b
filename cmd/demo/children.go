package main

import (
	"context"
	"fmt"
	"io"
	"regexp"
	"time"

	"github.com/infergate/infergate/internal/childproc"
)

// killGrace is how long a child gets between SIGTERM and SIGKILL.
const killGrace = 5 * time.Second

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
	*childproc.Proc
	grpcAddr  string
	adminAddr string
}

// startLine reads the bound addresses from the start line of the child
// called name, e.g. "simserver: grpc=127.0.0.1:8001 admin=127.0.0.1:8002".
func startLine(name string) *regexp.Regexp {
	return regexp.MustCompile(`^` + regexp.QuoteMeta(name) + `: .*?grpc=(\S+) admin=(\S+)`)
}

// startChild starts spec and waits for its start line. If the child exits
// first, or prints nothing in time, it is killed and the error carries its
// last log lines.
func startChild(ctx context.Context, spec childSpec) (*child, error) {
	timeout := spec.startTimeout
	if timeout <= 0 {
		timeout = 15 * time.Second
	}
	var out io.Writer
	if spec.verbose && spec.logOut != nil {
		out = &prefixWriter{prefix: "[" + spec.name + "] ", w: spec.logOut}
	}
	p, err := childproc.Start(ctx, childproc.Spec{
		Name: spec.name, Path: spec.path, Args: spec.args, Ready: startLine(spec.name),
		Timeout: timeout, Output: out, Grace: killGrace, DieWithParent: true,
	})
	if err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	return &child{Proc: p, grpcAddr: p.Match[1], adminAddr: p.Match[2]}, nil
}

// prefixWriter writes each line it is given (childproc writes whole
// lines) after prefix.
type prefixWriter struct {
	prefix string
	w      io.Writer
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	if _, err := io.WriteString(p.w, p.prefix+string(b)); err != nil {
		return 0, err
	}
	return len(b), nil
}
