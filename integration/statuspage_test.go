package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/infergate/infergate/statuspage"
)

// The status page tests open the admin listener's page in a real headless
// Chromium (Debian's chromium, driven over the DevTools protocol:
// chromium_test.go) and read its DOM. Screenshots go to t.ArtifactDir():
// kept with `go test -artifacts` (which `make test` passes), under
// _artifacts/ in the directory go test runs in; each test logs the path.
//
// Every wait is for a condition, with a limit generous enough for a
// loaded 2-core machine; nothing is timed.

// statusPage is one open page and the test that reads it.
type statusPage struct {
	t   *testing.T
	ctx context.Context
	b   *browser
	p   *page
	art string
}

func openStatusPage(t *testing.T, url string) *statusPage {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	b := startBrowser(t)
	p, err := b.openPage(ctx, url)
	if err != nil {
		t.Fatalf("open %s: %v", url, err)
	}
	return &statusPage{t: t, ctx: ctx, b: b, p: p, art: t.ArtifactDir()}
}

// shot keeps a screenshot of the whole page under name.
func (s *statusPage) shot(name string) {
	png, err := s.p.screenshot(s.ctx)
	if err != nil {
		s.t.Errorf("screenshot: %v", err)
		return
	}
	path := filepath.Join(s.art, name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		s.t.Error(err)
		return
	}
	s.t.Logf("screenshot: %s (%d bytes)", path, len(png))
}

// eval evaluates a JavaScript expression and decodes its value into out.
func (s *statusPage) eval(expr string, out any) {
	s.t.Helper()
	if err := s.p.eval(s.ctx, expr, out); err != nil {
		s.t.Fatal(err)
	}
}

// wait polls a JavaScript condition; on a timeout it keeps a screenshot
// and fails with what the page says.
func (s *statusPage) wait(what, cond string, limit time.Duration) {
	s.t.Helper()
	var ok bool
	var lastErr error
	for start := time.Now(); time.Since(start) < limit; time.Sleep(250 * time.Millisecond) {
		if lastErr = s.p.eval(s.ctx, "Boolean("+cond+")", &ok); lastErr == nil && ok {
			return
		}
	}
	s.shot("timeout.png")
	var text string
	s.p.eval(s.ctx, "document.body.innerText", &text)
	s.t.Fatalf("page: %s not within %v (last error: %v); the page reads:\n%s", what, limit, lastErr, headTail(text, 4<<10, 2<<10))
}

// noProblems fails the test on every console error, uncaught exception
// and error log entry the page produced so far.
func (s *statusPage) noProblems() {
	s.t.Helper()
	if ps := s.b.pageProblems(); len(ps) > 0 {
		b, _ := json.MarshalIndent(ps, "", "  ")
		s.t.Errorf("the page reported errors:\n%s", b)
	}
}

// TestStatusPageInBrowser: in front of a running infergate the page shows
// the models with p50/p99 and traffic, their versions side by side, their
// route and breakers, an alert that fires while it is open (with its
// evidence), logs no console error, and says it is stale once infergate
// is gone. Screenshots:
// statuspage.png with the alert firing, statuspage-stale.png after.
func TestStatusPageInBrowser(t *testing.T) {
	// resnet50 is served as versions 1 and 2 too; a few calls name them.
	sim, edge := startSim(t, "--config", versionedDefaults(t)), startSim(t)
	gate := startProxy(t, sim.grpc, "--fallback", "resnet50="+edge.grpc+"/mobilenet_v3")
	l := startLoad(t, gate.grpc, 2, 1, 30*time.Millisecond)
	defer l.stop()
	startVersionLoad(t, gate.grpc, "1", 1, 50*time.Millisecond)
	startVersionLoad(t, gate.grpc, "2", 1, 50*time.Millisecond)
	// The fault goes to mobilenet_v3, which has no fallback: resnet50's
	// fallback would answer its failed calls, and no error would reach
	// a client or an alert.
	// Its errors are the point: m.failed() is not checked.
	m := startModelLoad(t, gate.grpc, "mobilenet_v3", 1, 1, 20*time.Millisecond)
	defer m.stop()

	// "/" redirects to the page: the address an operator types.
	s := openStatusPage(t, "http://"+gate.admin+"/")
	// p99 once the correlator has one, calls/s after two reads.
	for _, m := range []string{"resnet50", "mobilenet_v3"} {
		s.wait(m+" with p99 and calls/s", `(() => {
			const tr = document.querySelector('#models tbody tr[data-model="`+m+`"]');
			return tr && /\d/.test(tr.cells[2].textContent) && /\d/.test(tr.cells[4].textContent);
		})()`, 90*time.Second)
	}
	// Its versions side by side on its row (at first with too few calls
	// for a p99 interval, which the line says).
	s.wait("resnet50's versions compared on its row", `(() => {
		const tr = document.querySelector('#models tbody tr[data-model="resnet50"]');
		return tr && tr.lastElementChild.textContent.includes("version 2's p99") &&
			tr.lastElementChild.textContent.includes("version 1's") &&
			tr.lastElementChild.querySelector("span[title]").title.includes("version 1: ");
	})()`, 60*time.Second)
	// Its slowest calls of the last minute, with their shapes, and how
	// they differ from all its calls.
	s.wait("resnet50's slowest calls with their inputs and the differs line", `(() => {
		const calls = document.querySelectorAll('#slow tbody tr.slow-call[data-model="resnet50"]');
		const heads = document.querySelectorAll('#slow tbody tr.slow-model[data-model="resnet50"]');
		const head = heads[0];
		// At most five calls under each version's line.
		return calls.length >= 1 && calls.length <= 5 * heads.length && /\d/.test(calls[0].cells[1].textContent) &&
			/\[[\d,]+\]/.test(calls[0].cells[2].textContent) && head && head.textContent.includes("the median request bytes");
	})()`, 60*time.Second)
	s.wait("resnet50's route, both upstreams' breakers and both models'", `document.querySelector('#routes table.routes tbody tr[data-model="resnet50"]') &&
		document.querySelectorAll('#routes table.breakers tbody tr[data-model=""]').length === 2 &&
		document.querySelector('#routes table.breakers tbody tr[data-model="resnet50"]')`, 30*time.Second)
	s.wait("the upstream's one replica, up", `(() => {
		const tr = document.querySelector('#endpoints tbody tr[data-address="`+sim.grpc+`"]');
		return tr && tr.cells[2].textContent === "up" && /\d/.test(tr.cells[5].textContent);
	})()`, 30*time.Second)
	var before int
	s.eval(`document.querySelectorAll('#alerts tr[data-alert="ModelErrorRatio"]').length`, &before)
	if before != 0 {
		t.Fatalf("ModelErrorRatio on the page before any fault")
	}

	// An alert that fires while the page is open.
	fault(t, sim.admin, `{"model":"mobilenet_v3","error_rate":0.2,"error_code":"INTERNAL"}`)
	s.wait("ModelErrorRatio firing for mobilenet_v3, with its evidence", `(() => {
		const tr = document.querySelector('#alerts tr[data-alert="ModelErrorRatio"][data-state="firing"][data-model="mobilenet_v3"]');
		return tr && tr.nextElementSibling && tr.nextElementSibling.textContent.includes("errors: holds true");
	})()`, 90*time.Second)
	s.shot("statuspage.png")
	s.noProblems()

	// A page whose reads fail says so instead of freezing. (Failed
	// loads are console errors, so this comes after noProblems.)
	gate.Kill()
	s.wait("the stale banner", `!document.getElementById("stale").hidden &&
		document.getElementById("stale").textContent.includes("could not refresh")`, 60*time.Second)
	s.shot("statuspage-stale.png")
}

// TestStatusPageShowsHostileNamesAsText: model names come from clients.
// infergate's registry bounds them (long or junk names share a series),
// but the page must not rely on that: served the real embedded files
// with an API that returns markup and a 1 MiB name in every string field,
// it shows them as text, runs nothing, keeps its layout and logs no
// error. Screenshot: statuspage-hostile.png.
func TestStatusPageShowsHostileNamesAsText(t *testing.T) {
	const script = `<script>window.pwned = 1</script>`
	const img = `<img src=x id=injected onerror="window.pwned = 1">`
	huge := "huge-" + strings.Repeat("x", 1<<20)
	names := []string{script, img, huge}
	now := time.Now().UTC().Format(time.RFC3339)
	var models, series, routes, alerts []any
	for _, n := range names {
		// The huge name only where a model name goes: the page reads it
		// every 2 s, and 1 MiB in each field would only slow the test.
		f := n
		if n == huge {
			f = "h"
		}
		models = append(models, map[string]any{"model": n, "calls": 10, "p50_seconds": 0.01, "p99_seconds": 0.05,
			"latency_up": true, "up_reason": f, "cause_hint": f, "gpu_uuid": f, "slow_endpoint": map[string]any{"note": f}})
		series = append(series, map[string]any{"model": n, "code_class": "server_error", "calls": 10,
			"windows": map[string]any{"1m": map[string]any{"total": map[string]any{"count": 10}}}})
		routes = append(routes, map[string]any{"model": n, "route": f, "why": f, "primary_upstream": f,
			"primary_breaker": f, "fallback": f, "since": now, "calls": map[string]any{}})
		alerts = append(alerts, map[string]any{"name": f, "state": "firing", "severity": f, "active_since": now,
			"firing_since": now, "value": f, "threshold": f, "muted": f,
			"labels": map[string]any{"model": n}, "annotations": map[string]any{"summary": f},
			"evidence": map[string]any{"conditions": []any{map[string]any{"kind": f, "holds": "true", "note": f}},
				"cause_hint": f, "slow_endpoint": f, "actions": []any{f}, "gpu": map[string]any{"uuid": f, "throttle_reasons": []any{f}},
				"baseline": map[string]any{"source": f, "up_above_seconds": map[string]any{f: 0.1}}}})
	}
	api := map[string]any{
		"/api/v1/models": models,
		// The cost column: a hostile currency and model name are text.
		"/api/v1/cost": map[string]any{"available": true, "currency": script, "gpus": []any{}, "models": []any{
			map[string]any{"model": script, "method": img, "calls": 10, "gpu_seconds_per_1k_calls": 0.5,
				"joules_per_1k_calls": 200, "cost_per_1k_calls": 0.001}}},
		"/api/v1/series": series,
		"/api/v1/routes": map[string]any{"routes": routes, "breakers": []any{map[string]any{"upstream": script, "state": img}}},
		"/api/v1/endpoints": map[string]any{"endpoints": []any{map[string]any{"upstream": script, "address": img, "state": script,
			"why": img, "ejected_until": now, "models": []any{script, img},
			"model_latency": map[string]any{script: map[string]any{"p50_seconds": 0.01, "p99_seconds": 0.02}, img: map[string]any{}}}}},
		"/api/v1/alerts": map[string]any{"alerts": alerts},
		"/api/v1/releases": map[string]any{"releases": []any{map[string]any{
			"spec":  map[string]any{"model": script, "stable": map[string]any{"version": img}, "candidate": map[string]any{"model": script}, "steps": []any{1, 5}},
			"state": img, "weight": 1, "step": 0, "current": map[string]any{"reason": script},
			"evidence": map[string]any{"classes": []any{map[string]any{"calls": []any{5, 3}}}},
			"history":  []any{map[string]any{"at": now, "kind": img, "reason": script}}}}},
		// Every model's slow calls, whatever the query asks.
		"/api/v1/slow": []any{map[string]any{"model": script, "version": img, "windows": []any{map[string]any{
			"window": "1m", "differs": map[string]any{"summary": script},
			"calls": []any{map[string]any{"latency_seconds": 0.5, "inputs": img, "route": script, "upstream": img,
				"code": script, "trace_id": img, "request_bytes": 10}}}}}},
		"/api/v1/gpus": map[string]any{
			"sources": []any{map[string]any{"source": script, "up": false, "last_error": img}},
			"gpus": []any{map[string]any{"gpu_uuid": img, "name": script, "source": script,
				"clock_event_reasons": []any{img}, "throttled": true}},
			"models": map[string]any{script: img, huge: img},
		},
	}
	mux := http.NewServeMux()
	statuspage.Register(mux)
	for path, v := range api {
		body, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		mux.HandleFunc("GET "+path, func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Write(body)
		})
	}
	srv := httptest.NewServer(mux)
	defer srv.Close()

	s := openStatusPage(t, srv.URL+"/status/")
	s.wait("three models, three routes, one release, three alerts, one GPU", `
		document.querySelectorAll('#models tbody tr').length === 3 &&
		document.querySelectorAll('#routes table.routes tbody tr').length === 3 &&
		document.querySelectorAll('#endpoints tbody tr').length === 1 &&
		document.querySelectorAll('#releases tbody tr').length === 1 &&
		document.querySelectorAll('#alerts tr[data-alert]').length === 3 &&
		document.querySelectorAll('#gpus tbody tr').length === 1 &&
		document.querySelectorAll('#slow tbody tr.slow-call').length === 2`, 60*time.Second)
	var got struct {
		Pwned, Injected, Scripts   any
		Names                      []string
		Overflow, ClippedWithTitle bool
	}
	s.eval(`({
		pwned: window.pwned === undefined ? null : window.pwned,
		injected: document.getElementById("injected") === null ? null : "found",
		scripts: document.scripts.length,
		names: [...document.querySelectorAll('#models tbody tr')].map(tr => tr.cells[0].textContent),
		overflow: document.documentElement.scrollWidth > window.innerWidth + 1,
		clippedWithTitle: [...document.querySelectorAll('#models tbody td span[title]')].some(
			s => s.textContent.length < 200 && s.title.startsWith("huge-")),
	})`, &got)
	if got.Pwned != nil || got.Injected != nil || fmt.Sprint(got.Scripts) != "1" {
		t.Errorf("markup ran or was parsed: pwned=%v #injected=%v scripts=%v", got.Pwned, got.Injected, got.Scripts)
	}
	want := map[string]bool{script: true, img: true}
	for _, n := range got.Names {
		if want[n] {
			delete(want, n)
		}
	}
	if len(want) > 0 {
		t.Errorf("names not shown as text: %v; the model cells read %.200q", want, got.Names)
	}
	if got.Overflow || !got.ClippedWithTitle {
		t.Errorf("the 1 MiB name: page wider than the window %v, clipped with a title %v", got.Overflow, got.ClippedWithTitle)
	}
	s.shot("statuspage-hostile.png")
	s.noProblems()
}
