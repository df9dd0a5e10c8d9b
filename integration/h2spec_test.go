package integration

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// h2specInstall is how CI (.ci/run) installs h2spec; the version is pinned
// so that both servers' counts mean the same tests from run to run.
const h2specInstall = "GOBIN=$HOME/go/bin go install github.com/summerwind/h2spec/cmd/h2spec@v2.2.1+incompatible"

// TestH2spec runs h2spec, the HTTP/2 conformance suite (all its sections:
// generic, http2, hpack), against infergate with its defaults (the relay is
// its front door) and against simserver directly (grpc-go's own server) in
// the same run. infergate must pass at least as many tests as grpc-go's
// server, and http2/5.1/6 (HEADERS on a half-closed stream: STREAM_CLOSED).
func TestH2spec(t *testing.T) {
	bin := h2specBin(t)
	sim := startSim(t)
	gate := startProxy(t, sim.grpc)

	dir := t.ArtifactDir()
	targets := []struct{ name, addr string }{{"infergate", gate.grpc}, {"grpc-go", sim.grpc}}
	reports := make([]*h2specReport, len(targets))
	errs := make([]error, len(targets))
	var wg sync.WaitGroup
	for i, tg := range targets {
		wg.Go(func() {
			reports[i], errs[i] = runH2spec(bin, tg.addr, filepath.Join(dir, tg.name+".xml"))
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("h2spec against %s: %v", targets[i].name, err)
		}
	}
	gateR, simR := reports[0], reports[1]
	for i, r := range reports {
		t.Logf("h2spec against %s: %d passed, %d failed, %d skipped of %d (report: %s)",
			targets[i].name, r.passed(), len(r.failed()), r.skipped(), len(r.cases), filepath.Join(dir, targets[i].name+".xml"))
	}
	if len(gateR.cases) < 100 || len(gateR.cases) != len(simR.cases) {
		t.Fatalf("h2spec ran %d tests against infergate and %d against grpc-go: its report is not what this test reads",
			len(gateR.cases), len(simR.cases))
	}
	for _, c := range gateR.failed() {
		t.Logf("infergate fails %s (%s): %s", c.id, c.desc, oneLine(c.msg))
	}
	for _, c := range gateR.failed() {
		if s, ok := simR.byID[c.id]; ok && s.result == "passed" {
			t.Logf("grpc-go passes %s, infergate does not", c.id)
		}
	}
	for _, c := range simR.failed() {
		t.Logf("grpc-go fails %s (%s): %s", c.id, c.desc, oneLine(c.msg))
	}
	for i, r := range reports {
		var ids []string
		for _, c := range r.cases {
			if c.result == "skipped" {
				ids = append(ids, c.id)
			}
		}
		t.Logf("h2spec skipped against %s: %s", targets[i].name, strings.Join(ids, " "))
	}

	if gateR.passed() < simR.passed() {
		t.Errorf("infergate passes %d h2spec tests, grpc-go's server %d", gateR.passed(), simR.passed())
	}
	const halfClosed = "http2/5.1/6"
	if c, ok := gateR.byID[halfClosed]; !ok {
		t.Errorf("h2spec ran no %s", halfClosed)
	} else if c.result != "passed" {
		t.Errorf("infergate fails %s (%s): %s", halfClosed, c.desc, oneLine(c.msg))
	}
}

// h2specBin finds h2spec on PATH or where .ci/run installs it.
func h2specBin(t *testing.T) string {
	t.Helper()
	if bin, err := exec.LookPath("h2spec"); err == nil {
		return bin
	}
	if home, err := os.UserHomeDir(); err == nil {
		bin := filepath.Join(home, "go", "bin", "h2spec")
		if st, err := os.Stat(bin); err == nil && !st.IsDir() {
			return bin
		}
	}
	t.Fatalf("h2spec is not installed (CI installs it): %s", h2specInstall)
	return ""
}

// h2specCase is one test of a report: its id as h2spec names it on the
// command line ("http2/5.1/6"), and how it ended.
type h2specCase struct {
	id, desc string
	result   string // passed, failed, skipped
	msg      string
}

type h2specReport struct {
	cases []*h2specCase
	byID  map[string]*h2specCase
}

func (r *h2specReport) passed() int {
	n := 0
	for _, c := range r.cases {
		if c.result == "passed" {
			n++
		}
	}
	return n
}

func (r *h2specReport) skipped() int {
	n := 0
	for _, c := range r.cases {
		if c.result == "skipped" {
			n++
		}
	}
	return n
}

func (r *h2specReport) failed() []*h2specCase {
	var f []*h2specCase
	for _, c := range r.cases {
		if c.result == "failed" {
			f = append(f, c)
		}
	}
	return f
}

// runH2spec runs every section of h2spec against addr and reads its JUnit
// report. h2spec exits non-zero when a test fails; only a missing report
// is an error.
func runH2spec(bin, addr, report string) (*h2specReport, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-h", host, "-p", port, "-o", "2", "-j", report)
	out, runErr := cmd.CombinedOutput()
	b, err := os.ReadFile(report)
	if err != nil {
		return nil, fmt.Errorf("no report (%v, %v): %s", runErr, err, headTail(string(out), 4<<10, 4<<10))
	}
	r, err := parseH2specJUnit(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", report, err)
	}
	return r, nil
}

// parseH2specJUnit reads h2spec's JUnit report: a testsuite per group of
// tests (package "http2/5.1"), a testcase per test that ran, in the order
// h2spec numbers them (a test's id is its group's and its number: all of
// a group's tests run but its strict ones, which come last).
func parseH2specJUnit(b []byte) (*h2specReport, error) {
	var doc struct {
		Suites []struct {
			Package string `xml:"package,attr"`
			Cases   []struct {
				Desc    string    `xml:"classname,attr"`
				Failure *xmlInner `xml:"failure"`
				Error   *xmlInner `xml:"error"`
				Skipped *xmlInner `xml:"skipped"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(b, &doc); err != nil {
		return nil, err
	}
	r := &h2specReport{byID: map[string]*h2specCase{}}
	for _, s := range doc.Suites {
		for i, tc := range s.Cases {
			c := &h2specCase{id: fmt.Sprintf("%s/%d", s.Package, i+1), desc: tc.Desc, result: "passed"}
			switch {
			case tc.Failure != nil:
				c.result, c.msg = "failed", tc.Failure.Content
			case tc.Error != nil:
				c.result, c.msg = "failed", tc.Error.Content
			case tc.Skipped != nil:
				c.result = "skipped"
			}
			if _, dup := r.byID[c.id]; dup {
				return nil, errors.New("two tests named " + c.id)
			}
			r.byID[c.id] = c
			r.cases = append(r.cases, c)
		}
	}
	return r, nil
}

type xmlInner struct {
	Content string `xml:",chardata"`
}

// oneLine is h2spec's message (the frames or events it expected, one a
// line, then what it got) on one line.
func oneLine(s string) string {
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) < 2 {
		return strings.Join(lines, " ")
	}
	n := len(lines) - 1
	return "expected " + strings.Join(lines[:n], ", or ") + "; got " + lines[n]
}
