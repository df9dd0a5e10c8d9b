package scenario

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"

	"github.com/infergate/infergate/internal/childproc"
)

// StartProcess starts a child of a scenario (package childproc) and
// returns its Ready line's submatches too.
func StartProcess(ctx context.Context, spec childproc.Spec) (*childproc.Proc, []string, error) {
	p, err := childproc.Start(ctx, spec)
	if err != nil {
		return nil, nil, fmt.Errorf("scenario: %w", err)
	}
	return p, p.Match, nil
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
func startInfergate(ctx context.Context, bin, upstream, logPath string, extra []string) (p *childproc.Proc, grpcAddr, adminAddr string, err error) {
	return startInfergateArgs(ctx, bin, logPath, append([]string{"--upstream", upstream}, extra...))
}

// startInfergateArgs is startInfergate with every argument but the
// listeners given (a config file may name the upstreams instead).
func startInfergateArgs(ctx context.Context, bin, logPath string, extra []string) (p *childproc.Proc, grpcAddr, adminAddr string, err error) {
	args := append([]string{"--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0"}, extra...)
	p, m, err := StartProcess(ctx, childproc.Spec{
		Name: "infergate", Path: bin, Args: args, LogPath: logPath, Ready: infergateLine,
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

// getJSON GETs url and decodes its JSON body into v.
func getJSON(ctx context.Context, url string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}
