package integration

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// browser is a headless Chromium driven over the Chrome DevTools Protocol
// through --remote-debugging-pipe: Chromium reads NUL-terminated JSON
// commands on its fd 3 and writes replies and events on its fd 4. A pipe
// needs no websocket client, no port and no DevToolsActivePort file, and
// ends with the process.
type browser struct {
	cmd  *exec.Cmd
	in   *os.File // our end of Chromium's fd 3
	log  *lockedBuffer
	done chan struct{}

	wmu sync.Mutex // one command a write on the pipe

	mu      sync.Mutex
	nextID  int64
	waiting map[int64]chan cdpReply
	// problems are console errors, uncaught exceptions and error log
	// entries the page produced, as text.
	problems []string
	readErr  error
}

type cdpReply struct {
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

type cdpMessage struct {
	ID        int64           `json:"id"`
	Method    string          `json:"method"`
	Params    json.RawMessage `json:"params"`
	SessionID string          `json:"sessionId"`
	cdpReply
}

// startBrowser starts Debian's chromium headless. Not finding it fails the
// test: .ci/run installs the package, and a skipped browser test would
// hide a broken page.
func startBrowser(t *testing.T) *browser {
	t.Helper()
	bin, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("chromium not installed (.ci/run installs the Debian package chromium): %v", err)
	}
	// fd 3: Chromium reads our commands; fd 4: we read its replies.
	cmdR, cmdW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	args := []string{
		"--headless", "--remote-debugging-pipe", "--user-data-dir=" + t.TempDir(),
		"--no-first-run", "--no-default-browser-check", "--disable-gpu", "--disable-dev-shm-usage",
		"--disable-extensions", "--disable-background-networking", "--disable-component-update",
		"--disable-sync", "--mute-audio", "--hide-scrollbars", "--window-size=1280,1000",
		"about:blank",
	}
	if os.Geteuid() == 0 {
		// Chromium's sandbox refuses to run as root (CI containers do).
		args = append([]string{"--no-sandbox"}, args...)
	}
	b := &browser{log: &lockedBuffer{}, done: make(chan struct{}), in: cmdW, waiting: map[int64]chan cdpReply{}}
	b.cmd = exec.Command(bin, args...)
	b.cmd.ExtraFiles = []*os.File{cmdR, outW}
	// Its own process group: a browser that does not exit when its pipe
	// closes is killed with its renderer and GPU processes.
	b.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	b.cmd.Stdout, b.cmd.Stderr = b.log, b.log
	if err := b.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	cmdR.Close()
	outW.Close()
	go b.read(outR)
	go func() { b.cmd.Wait(); close(b.done) }()
	t.Cleanup(func() {
		b.in.Close() // Chromium exits when its command pipe closes
		select {
		case <-b.done:
		case <-time.After(10 * time.Second):
			syscall.Kill(-b.cmd.Process.Pid, syscall.SIGKILL)
			<-b.done
		}
		if t.Failed() {
			t.Logf("chromium %v log:\n%s", args, headTail(b.log.String(), 8<<10, 4<<10))
		}
	})
	return b
}

// read delivers replies to their callers and keeps the page's problems.
func (b *browser) read(r *os.File) {
	defer r.Close()
	br := bufio.NewReaderSize(r, 1<<20)
	for {
		raw, err := br.ReadBytes(0)
		if err != nil {
			b.mu.Lock()
			b.readErr = fmt.Errorf("devtools pipe: %w", err)
			for id, ch := range b.waiting {
				close(ch)
				delete(b.waiting, id)
			}
			b.mu.Unlock()
			return
		}
		var m cdpMessage
		if err := json.Unmarshal(raw[:len(raw)-1], &m); err != nil {
			continue
		}
		if m.ID != 0 {
			b.mu.Lock()
			ch := b.waiting[m.ID]
			delete(b.waiting, m.ID)
			b.mu.Unlock()
			if ch != nil {
				ch <- m.cdpReply
			}
			continue
		}
		if p := problem(m.Method, m.Params); p != "" {
			b.mu.Lock()
			b.problems = append(b.problems, p)
			b.mu.Unlock()
		}
	}
}

// problem turns an event that reports an error on the page into text.
func problem(method string, params json.RawMessage) string {
	switch method {
	case "Runtime.consoleAPICalled":
		var e struct {
			Type string `json:"type"`
			Args []struct {
				Value       any    `json:"value"`
				Description string `json:"description"`
			} `json:"args"`
		}
		json.Unmarshal(params, &e)
		if e.Type != "error" && e.Type != "assert" {
			return ""
		}
		var parts []string
		for _, a := range e.Args {
			if a.Description != "" {
				parts = append(parts, a.Description)
			} else {
				parts = append(parts, fmt.Sprint(a.Value))
			}
		}
		return "console." + e.Type + ": " + strings.Join(parts, " ")
	case "Runtime.exceptionThrown":
		var e struct {
			Details struct {
				Text      string `json:"text"`
				URL       string `json:"url"`
				Line      int    `json:"lineNumber"`
				Exception struct {
					Description string `json:"description"`
				} `json:"exception"`
			} `json:"exceptionDetails"`
		}
		json.Unmarshal(params, &e)
		d := e.Details
		return fmt.Sprintf("exception: %s %s (%s:%d)", d.Text, d.Exception.Description, d.URL, d.Line+1)
	case "Log.entryAdded":
		var e struct {
			Entry struct {
				Level  string `json:"level"`
				Source string `json:"source"`
				Text   string `json:"text"`
				URL    string `json:"url"`
			} `json:"entry"`
		}
		json.Unmarshal(params, &e)
		if e.Entry.Level != "error" {
			return ""
		}
		return fmt.Sprintf("log %s: %s %s", e.Entry.Source, e.Entry.Text, e.Entry.URL)
	}
	return ""
}

// call sends one command (to the page's session, or to the browser with
// session "") and returns its result.
func (b *browser) call(ctx context.Context, session, method string, params any, result any) error {
	b.mu.Lock()
	if b.readErr != nil {
		b.mu.Unlock()
		return b.readErr
	}
	b.nextID++
	id := b.nextID
	ch := make(chan cdpReply, 1)
	b.waiting[id] = ch
	b.mu.Unlock()
	msg := map[string]any{"id": id, "method": method}
	if params != nil {
		msg["params"] = params
	}
	if session != "" {
		msg["sessionId"] = session
	}
	raw, err := json.Marshal(msg)
	if err != nil {
		return err
	}
	b.wmu.Lock()
	_, err = b.in.Write(append(raw, 0))
	b.wmu.Unlock()
	if err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	select {
	case r, ok := <-ch:
		if !ok {
			b.mu.Lock()
			defer b.mu.Unlock()
			return fmt.Errorf("%s: %w", method, b.readErr)
		}
		if r.Error != nil {
			return fmt.Errorf("%s: %d %s", method, r.Error.Code, r.Error.Message)
		}
		if result != nil {
			return json.Unmarshal(r.Result, result)
		}
		return nil
	case <-ctx.Done():
		b.mu.Lock()
		delete(b.waiting, id)
		b.mu.Unlock()
		return fmt.Errorf("%s: %w", method, ctx.Err())
	}
}

// page is one tab, attached in flat mode: its commands carry its session.
type page struct {
	b       *browser
	session string
}

// openPage opens a tab, turns on the events that report errors, sets a
// fixed viewport (for the screenshot) and navigates to url.
func (b *browser) openPage(ctx context.Context, url string) (*page, error) {
	var target struct {
		TargetID string `json:"targetId"`
	}
	if err := b.call(ctx, "", "Target.createTarget", map[string]any{"url": "about:blank"}, &target); err != nil {
		return nil, err
	}
	var att struct {
		SessionID string `json:"sessionId"`
	}
	if err := b.call(ctx, "", "Target.attachToTarget", map[string]any{"targetId": target.TargetID, "flatten": true}, &att); err != nil {
		return nil, err
	}
	p := &page{b: b, session: att.SessionID}
	for _, m := range []string{"Runtime.enable", "Log.enable", "Page.enable"} {
		if err := b.call(ctx, p.session, m, nil, nil); err != nil {
			return nil, err
		}
	}
	if err := b.call(ctx, p.session, "Emulation.setDeviceMetricsOverride",
		map[string]any{"width": 1280, "height": 1000, "deviceScaleFactor": 1, "mobile": false}, nil); err != nil {
		return nil, err
	}
	var nav struct {
		ErrorText string `json:"errorText"`
	}
	if err := b.call(ctx, p.session, "Page.navigate", map[string]any{"url": url}, &nav); err != nil {
		return nil, err
	}
	if nav.ErrorText != "" {
		return nil, fmt.Errorf("navigate %s: %s", url, nav.ErrorText)
	}
	return p, nil
}

// eval runs a JavaScript expression in the page and decodes its value
// (which must be JSON-serialisable) into out.
func (p *page) eval(ctx context.Context, expr string, out any) error {
	var r struct {
		Result struct {
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		Exception *struct {
			Text      string `json:"text"`
			Exception struct {
				Description string `json:"description"`
			} `json:"exception"`
		} `json:"exceptionDetails"`
	}
	if err := p.b.call(ctx, p.session, "Runtime.evaluate", map[string]any{"expression": expr, "returnByValue": true}, &r); err != nil {
		return err
	}
	if r.Exception != nil {
		return fmt.Errorf("evaluate %q: %s %s", expr, r.Exception.Text, r.Exception.Exception.Description)
	}
	if len(r.Result.Value) == 0 {
		return errors.New("evaluate: no value")
	}
	return json.Unmarshal(r.Result.Value, out)
}

// screenshot returns the whole page as PNG.
func (p *page) screenshot(ctx context.Context) ([]byte, error) {
	var r struct {
		Data string `json:"data"`
	}
	if err := p.b.call(ctx, p.session, "Page.captureScreenshot", map[string]any{"format": "png", "captureBeyondViewport": true}, &r); err != nil {
		return nil, err
	}
	return base64.StdEncoding.DecodeString(r.Data)
}

// problems returns what the page reported as errors so far.
func (b *browser) pageProblems() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.problems...)
}
