package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/infergate/infergate/proto/kservepb"
	"github.com/infergate/infergate/proto/tfservingpb"
)

// failoverEnv is infergate in front of a primary simserver, with
// resnet50 falling back to mobilenet_v3 on an edge simserver.
type failoverEnv struct {
	pri, edge, gate *proc
	kc              kservepb.GRPCInferenceServiceClient
	maxRows         int // load workers send 1..maxRows rows a call (0: 1)
}

func newFailoverEnv(t *testing.T, args ...string) *failoverEnv {
	t.Helper()
	e := &failoverEnv{pri: startSim(t), edge: startSim(t)}
	e.gate = startProxy(t, e.pri.grpc, append([]string{"--fallback", "resnet50=" + e.edge.grpc + "/mobilenet_v3"}, args...)...)
	e.kc = kservepb.NewGRPCInferenceServiceClient(dial(t, e.gate.grpc))
	return e
}

// answer is one call's end as the client saw it.
type answer struct {
	code   codes.Code
	model  string // model_name of the response: who answered
	route  string // x-infergate-route
	reason string
}

func (e *failoverEnv) call(timeout time.Duration) answer { return e.callRows(timeout, 1) }

func (e *failoverEnv) callRows(timeout time.Duration, rows int) answer {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var hdr metadata.MD
	resp, err := e.kc.ModelInfer(ctx, resnetRequest("resnet50", rows), grpc.Header(&hdr))
	a := answer{code: status.Code(err)}
	if err == nil {
		a.model = resp.ModelName
	}
	if v := hdr.Get("x-infergate-route"); len(v) > 0 {
		a.route = v[0]
	}
	if v := hdr.Get("x-infergate-route-reason"); len(v) > 0 {
		a.reason = v[0]
	}
	return a
}

// load sends calls from workers until stop and counts every outcome.
type countedLoad struct {
	stop func()
	wg   sync.WaitGroup
	mu   sync.Mutex
	sent int
	got  map[string]int // "OK mobilenet_v3", "Unavailable", ...
}

func (e *failoverEnv) load(workers int, period time.Duration) *countedLoad {
	ctx, cancel := context.WithCancel(context.Background())
	l := &countedLoad{stop: cancel, got: map[string]int{}}
	for w := range workers {
		rows := 1 + w%max(e.maxRows, 1)
		l.wg.Go(func() {
			tk := time.NewTicker(period)
			defer tk.Stop()
			for ctx.Err() == nil {
				l.mu.Lock()
				l.sent++
				l.mu.Unlock()
				a := e.callRows(2*time.Second, rows)
				k := a.code.String()
				if a.code == codes.OK {
					k += " " + a.model
				}
				l.mu.Lock()
				l.got[k]++
				l.mu.Unlock()
				select {
				case <-tk.C:
				case <-ctx.Done():
				}
			}
		})
	}
	return l
}

// count returns how many calls have ended with k so far.
func (l *countedLoad) count(k string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.got[k]
}

func (l *countedLoad) finish() (sent int, got map[string]int) {
	l.stop()
	l.wg.Wait()
	return l.sent, l.got
}

// routeState is a model's entry of GET /api/v1/routes, as far as these
// tests read it.
type routeState struct {
	Route   string `json:"route"` // primary, fallback
	Why     string `json:"why"`
	Breaker string `json:"primary_breaker"` // closed, half-open, open
	// Evidence is "yes" once a hedge counts the primary slow.
	Evidence string `json:"hedge_evidence"`
}

// waitTailKnown waits until resnet50's primary tail has enough calls
// behind it for a hedge to count the primary slow: before that a hung
// primary is hedged, not tripped (a cold start's guess trips nothing).
func (e *failoverEnv) waitTailKnown(t *testing.T) {
	t.Helper()
	waitFor(t, stateTimeout, "resnet50's hedges count as evidence", func() bool { return e.route(t).Evidence == "yes" })
}

// route returns resnet50's route as the admin API shows it now.
func (e *failoverEnv) route(t *testing.T) routeState {
	t.Helper()
	code, body := httpGet(t, "http://"+e.gate.admin+"/api/v1/routes")
	var v struct {
		Routes []struct {
			Model string `json:"model"`
			routeState
		} `json:"routes"`
	}
	if err := json.Unmarshal([]byte(body), &v); code != http.StatusOK || err != nil {
		t.Fatalf("/api/v1/routes: %d %v\n%s", code, err, body)
	}
	for _, r := range v.Routes {
		if r.Model == "resnet50" {
			return r.routeState
		}
	}
	t.Fatalf("/api/v1/routes has no resnet50:\n%s", body)
	return routeState{}
}

// waitFor polls cond until it holds. The timeout only stops a test that
// would otherwise hang, and is generous for a loaded machine: nothing is
// asserted about how long the state took to reach.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached within %v", what, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stateTimeout bounds each wait for a route or breaker state.
const stateTimeout = 90 * time.Second

// waitOnFallback waits until resnet50's primary breaker is open, so that
// its calls go to the fallback.
func (e *failoverEnv) waitOnFallback(t *testing.T, what string) {
	t.Helper()
	var last routeState
	waitFor(t, stateTimeout, what+": resnet50 on its fallback, primary breaker open", func() bool {
		last = e.route(t)
		return last.Route == "fallback" && last.Breaker == "open"
	})
	t.Logf("%s: route %s (%s)", what, last.Route, last.Why)
}

// waitOnPrimary waits until resnet50 is back on its primary for all its
// calls: breaker closed and slow start over.
func (e *failoverEnv) waitOnPrimary(t *testing.T, what string) {
	t.Helper()
	waitFor(t, stateTimeout, what+": resnet50 back on its primary, breaker closed", func() bool {
		r := e.route(t)
		return r.Route == "primary" && r.Breaker == "closed"
	})
}

// waitAnswered waits until the load has had n more calls answered with k
// (such as "OK mobilenet_v3") than it had when from was taken.
func (l *countedLoad) waitAnswered(t *testing.T, k string, from, n int) {
	t.Helper()
	waitFor(t, stateTimeout, fmt.Sprintf("%d more load calls ending %q", n, k), func() bool { return l.count(k) >= from+n })
}

// A hung primary, then a killed one: every call through infergate is
// answered (by the fallback, honestly named, with the route header), none
// is lost; healed, traffic returns to the primary. /api/v1/routes and the
// metrics say what happened, and promtool accepts the new families.
func TestFailoverEndToEnd(t *testing.T) {
	e := newFailoverEnv(t)
	if a := e.call(5 * time.Second); a.code != codes.OK || a.model != "resnet50" || a.route != "" {
		t.Fatalf("healthy call: %+v", a)
	}
	l := e.load(4, 20*time.Millisecond)
	// The primary's latency is known before anything breaks.
	l.waitAnswered(t, "OK resnet50", 0, 20)
	e.waitTailKnown(t)
	fault(t, e.pri.admin, `{"model":"resnet50","hang":true}`)
	e.waitOnFallback(t, "hang")
	if a := e.call(2 * time.Second); a.code != codes.OK || a.model != "mobilenet_v3" || a.route != "fallback" {
		t.Errorf("call during the hang: %+v, want mobilenet_v3's answer marked fallback", a)
	}
	heal(t, e.pri.admin)
	eventually(t, "back on the primary after the hang", func() bool { return e.call(2*time.Second).model == "resnet50" })
	e.waitOnPrimary(t, "healed after the hang")

	for _, f := range []string{`{"model":"resnet50","error_rate":1,"error_code":"INTERNAL"}`, `{"model":"resnet50","drop_connections":true}`} {
		fault(t, e.pri.admin, f)
		e.waitOnFallback(t, f)
		if a := e.call(2 * time.Second); a.code != codes.OK || a.model != "mobilenet_v3" {
			t.Errorf("call during %s: %+v", f, a)
		}
		heal(t, e.pri.admin)
		eventually(t, "back on the primary after "+f, func() bool { return e.call(2*time.Second).model == "resnet50" })
		e.waitOnPrimary(t, "healed after "+f)
	}

	e.pri.Kill()
	e.waitOnFallback(t, "primary killed")
	if a := e.call(2 * time.Second); a.code != codes.OK || a.model != "mobilenet_v3" {
		t.Errorf("call with the primary dead: %+v", a)
	}
	sent, got := l.finish()
	total := 0
	for _, n := range got {
		total += n
	}
	if total != sent || got["OK resnet50"] == 0 || got["OK mobilenet_v3"] == 0 || got["OK resnet50"]+got["OK mobilenet_v3"] != sent {
		t.Errorf("%d calls sent, outcomes %v: want every call answered, by both models", sent, got)
	}
	t.Logf("%d calls: %v", sent, got)

	_, body := httpGet(t, "http://"+e.gate.admin+"/api/v1/routes")
	if !strings.Contains(body, `"route": "fallback"`) || !strings.Contains(body, "breaker of") {
		t.Errorf("/api/v1/routes with the primary dead:\n%s", body)
	}
	fams := scrape(t, e.gate.admin)
	if n := counterSum(fams, "infergate_degraded_responses_total", map[string]string{"model": "resnet50"}); n == 0 {
		t.Error("infergate_degraded_responses_total is 0")
	}
	if n := counterSum(fams, "infergate_requests_total", map[string]string{"model": "resnet50", "route": "fallback"}); n == 0 {
		t.Errorf("no request series for resnet50 with route=fallback:\n%s", dumpFamilies(fams, "infergate_requests_total"))
	}
	promtoolClean(t, e.gate.admin, "infergate_breaker_state", "infergate_breaker_transitions_total",
		"infergate_route_calls_total", "infergate_fallback_calls_total", "infergate_degraded_responses_total",
		"infergate_hedges_total", "infergate_retries_total", "infergate_route_changes_total", "infergate_route_mode")
}

// TestFailoverWithBatching: with adaptive batching on both models and
// calls of one to three rows, a hung primary's calls go to the fallback
// and back, and every call is answered. Two crashes hid here: a call
// larger than the batch target overflowed the dispatcher's stack, and
// marking a batched fallback answer wrote the header every caller of the
// batch was reading.
func TestFailoverWithBatching(t *testing.T) {
	e := newFailoverEnv(t, "--batching", "adaptive", "--batch-models", "resnet50,mobilenet_v3", "--batch-slots", "2")
	e.maxRows = 3
	l := e.load(6, 10*time.Millisecond)
	l.waitAnswered(t, "OK resnet50", 0, 20)
	e.waitTailKnown(t)
	fault(t, e.pri.admin, `{"model":"resnet50","hang":true}`)
	e.waitOnFallback(t, "hang")
	// The load's calls are answered by the fallback, in batches.
	l.waitAnswered(t, "OK mobilenet_v3", 0, 20)
	heal(t, e.pri.admin)
	eventually(t, "back on the primary after the hang", func() bool { return e.call(2*time.Second).model == "resnet50" })
	e.waitOnPrimary(t, "healed")
	l.waitAnswered(t, "OK resnet50", l.count("OK resnet50"), 20)
	sent, got := l.finish()
	if got["OK resnet50"] == 0 || got["OK mobilenet_v3"] == 0 || got["OK resnet50"]+got["OK mobilenet_v3"] != sent {
		t.Errorf("%d calls sent, outcomes %v: want every call answered, by both models", sent, got)
	}
	t.Logf("%d calls: %v", sent, got)
	fams := scrape(t, e.gate.admin)
	var rows float64
	for _, m := range find(fams, "infergate_batch_size", map[string]string{"model": "mobilenet_v3"}) {
		rows += m.GetHistogram().GetSampleSum()
	}
	if rows == 0 {
		t.Errorf("no batches of mobilenet_v3 on the fallback:\n%s", dumpFamilies(fams, "infergate_batch_size"))
	}
}

// An alert with action fallback sends the model to its fallback while it
// fires, the alert's evidence says so, and the model returns when it
// resolves; the operator forces a route through the admin API (token).
func TestFailoverByAlertAndOperator(t *testing.T) {
	rules := writeFile(t, "rules.yaml", `
rules:
  - name: ResnetSlow
    kind: threshold
    quantile: p50
    window: 2s
    value: 40ms
    severity: critical
    action: fallback
    select: {model: resnet50}
`)
	token := writeFile(t, "token", "s3cret\n")
	e := newFailoverEnv(t, "--rules", rules, "--admin-token-file", token)
	l := e.load(4, 25*time.Millisecond)
	defer l.finish()
	l.waitAnswered(t, "OK resnet50", 0, 20)
	fault(t, e.pri.admin, `{"model":"resnet50","delay_ms":80}`)
	a, took := waitAlert(t, e.gate.admin, "ResnetSlow", "resnet50", "firing", 30*time.Second)
	t.Logf("alert firing after %v; actions %v", took, a.Evidence.Actions)
	if len(a.Evidence.Actions) == 0 || !strings.Contains(strings.Join(a.Evidence.Actions, " "), "routed to its fallback mobilenet_v3") {
		t.Errorf("alert actions %v, want the fallback taken", a.Evidence.Actions)
	}
	eventually(t, "calls on the fallback under the alert", func() bool {
		c := e.call(2 * time.Second)
		return c.model == "mobilenet_v3" && c.reason == "alert"
	})
	heal(t, e.pri.admin)
	_, took = waitAlert(t, e.gate.admin, "ResnetSlow", "resnet50", "", 60*time.Second)
	t.Logf("healed: resolved after %v", took)
	eventually(t, "back on the primary after the alert resolved", func() bool { return e.call(2*time.Second).model == "resnet50" })

	url := "http://" + e.gate.admin + "/api/v1/routes/resnet50"
	if code, body := httpDo(t, "POST", url, `{"route":"fallback"}`); code != http.StatusUnauthorized {
		t.Errorf("force without the token = %d %s, want 401", code, body)
	}
	force := func(route string) (int, string) {
		req, _ := http.NewRequest("POST", url, strings.NewReader(fmt.Sprintf(`{"route":%q}`, route)))
		req.Header.Set("Authorization", "Bearer s3cret")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var sb strings.Builder
		_, _ = fmt.Fprint(&sb, resp.Status)
		return resp.StatusCode, sb.String()
	}
	if code, s := force("fallback"); code != 200 {
		t.Fatalf("force fallback = %d %s", code, s)
	}
	if c := e.call(2 * time.Second); c.model != "mobilenet_v3" || c.reason != "forced" {
		t.Errorf("forced fallback: %+v", c)
	}
	// TF-Serving's Predict is routed the same way: model_spec readdressed.
	var hdr metadata.MD
	pr, err := tfservingpb.NewPredictionServiceClient(dial(t, e.gate.grpc)).Predict(testCtx(t), classifierPredict("resnet50", 1, 1), grpc.Header(&hdr))
	if err != nil || pr.ModelSpec.GetName() != "mobilenet_v3" || len(hdr.Get("x-infergate-route")) == 0 {
		t.Errorf("Predict on the forced fallback: %v %v %v", err, pr.GetModelSpec(), hdr)
	}
	if code, _ := force("sideways"); code != http.StatusBadRequest {
		t.Errorf("bad route = %d, want 400", code)
	}
	if code, _ := force("auto"); code != 200 {
		t.Errorf("auto = %d", code)
	}
	if c := e.call(2 * time.Second); c.model != "resnet50" {
		t.Errorf("after auto: %+v", c)
	}
}

// SIGTERM while calls are on the fallback (the primary hangs): every call
// ends with an answer or an explicit status, and the process exits 0.
func TestFailoverSIGTERMLosesNothing(t *testing.T) {
	e := newFailoverEnv(t, "--drain-delay", "0s")
	l := e.load(8, 10*time.Millisecond)
	// A hang from the start is hedged, not tripped (nothing is known of
	// the primary): the breaker opens on a hang once its tail is.
	e.waitTailKnown(t)
	fault(t, e.pri.admin, `{"model":"resnet50","hang":true}`)
	e.waitOnFallback(t, "hang")
	l.waitAnswered(t, "OK mobilenet_v3", 0, 20)
	if err := e.gate.sigterm(t); err != nil {
		t.Errorf("exit after SIGTERM: %v\n%s", err, e.gate.log)
	}
	sent, got := l.finish()
	total := 0
	for k, n := range got {
		total += n
		if k != "OK mobilenet_v3" && k != "Unavailable" && k != "OK resnet50" {
			t.Errorf("%d calls ended %s", n, k)
		}
	}
	if total != sent || got["OK mobilenet_v3"] == 0 {
		t.Errorf("%d sent, outcomes %v", sent, got)
	}
	t.Logf("%d calls: %v", sent, got)
}

// TestFailoverHangSoonAfterStart is issue 45's regression from outside:
// resnet50's primary hangs a few seconds after start, before its tail has
// the thousand calls that make an automatic hedge delay evidence, under
// an open-loop 100 calls/s with 2s deadlines and infergate's defaults
// (--fallback only). The hang is evidence on its own: the breaker opens
// and at most 0.1% of the calls fail; every call sent is counted.
func TestFailoverHangSoonAfterStart(t *testing.T) {
	e := newFailoverEnv(t)
	if a := e.call(5 * time.Second); a.code != codes.OK || a.model != "resnet50" {
		t.Fatalf("healthy call: %+v", a)
	}
	var (
		mu   sync.Mutex
		sent int
		got  = map[string]int{}
		wg   sync.WaitGroup
	)
	// An open loop: one call every 10ms whatever the earlier ones do.
	ctx, stop := context.WithCancel(context.Background())
	tick := time.NewTicker(10 * time.Millisecond)
	wg.Go(func() {
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			mu.Lock()
			sent++
			mu.Unlock()
			wg.Go(func() {
				a := e.call(2 * time.Second)
				k := a.code.String()
				if a.code == codes.OK {
					k += " " + a.model
				}
				mu.Lock()
				got[k]++
				mu.Unlock()
			})
		}
	})
	defer stop()
	okPrimary := func() int { mu.Lock(); defer mu.Unlock(); return got["OK resnet50"] }
	waitFor(t, stateTimeout, "200 calls answered by the primary", func() bool { return okPrimary() >= 200 })
	if r := e.route(t); r.Evidence == "yes" {
		t.Fatalf("resnet50's tail already known before the hang (%+v): the test would not test a young tail", r)
	}
	fault(t, e.pri.admin, `{"model":"resnet50","hang":true}`)
	e.waitOnFallback(t, "hang soon after start")
	time.Sleep(10 * time.Second) // the hang goes on: the breaker's probes find it still hung
	heal(t, e.pri.admin)
	e.waitOnPrimary(t, "healed")
	time.Sleep(2 * time.Second)
	stop()
	wg.Wait()

	total, failed := 0, 0
	for k, n := range got {
		total += n
		if k != "OK resnet50" && k != "OK mobilenet_v3" {
			failed += n
		}
	}
	t.Logf("%d calls: %v", sent, got)
	if total != sent || got["OK mobilenet_v3"] == 0 || got["OK resnet50"] == 0 {
		t.Errorf("%d calls sent, %d ended (%v): want every call counted, answered by both models", sent, total, got)
	}
	if failed*1000 > sent {
		t.Errorf("%d of %d calls failed (%v), want at most 0.1%%", failed, sent, got)
	}
}
