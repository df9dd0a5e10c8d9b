package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc/connectivity"

	"github.com/infergate/infergate/proto/kservepb"
)

// reloadConfig is infergate's file: resnet50 batched and falling back to
// fallbackModel on the edge simserver.
func reloadConfig(pri, edge, fallbackModel string, maxSize int) string {
	return fmt.Sprintf(`
upstream: %q
routes:
  - model: resnet50
    fallback: {address: %q, model: %s}
batching:
  mode: adaptive
  max_size: %d
  models: {resnet50: {}}
`, pri, edge, fallbackModel, maxSize)
}

// reloadRules is the --rules file: one threshold rule and a receiver.
func reloadRules(threshold, receiver string) string {
	return fmt.Sprintf(`
rules:
  - name: ResnetSlow
    kind: threshold
    quantile: p99
    window: 5s
    value: %s
    severity: warning
    select: {model: resnet50}
receivers:
  - name: %s
    webhook_configs: [{url: "http://user:pw@127.0.0.1:9/hook?key=abc"}]
route:
  receiver: %s
`, threshold, receiver, receiver)
}

// configMapDir lays out a directory as Kubernetes mounts a ConfigMap:
// config.yaml -> ..data/config.yaml, ..data -> ..<version>; swap points
// ..data at a new version atomically (a new symlink renamed over it).
type configMapDir struct {
	dir string
	n   int
}

func (c *configMapDir) swap(t *testing.T, content string) {
	t.Helper()
	c.n++
	ver := fmt.Sprintf("..2026_%d", c.n)
	if err := os.Mkdir(filepath.Join(c.dir, ver), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(c.dir, ver, "config.yaml"), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(c.dir, "..data_tmp")
	if err := os.Symlink(ver, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(c.dir, "..data")); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(c.dir, "config.yaml")
	if _, err := os.Lstat(link); err != nil {
		if err := os.Symlink(filepath.Join("..data", "config.yaml"), link); err != nil {
			t.Fatal(err)
		}
	}
}

// TestReload: under load (8 callers on one connection, a fallback route
// and adaptive batching on), reloads by SIGHUP (the --rules file: a
// rule's threshold and a receiver) and by a ConfigMap-style symlink swap
// of --config (a route's fallback and a batching knob) fail no call and
// drop no connection, and show in the API; a broken file changes nothing
// and sets infergate_config_last_reload_successful to 0; POST /-/reload
// needs the token.
func TestReload(t *testing.T) {
	pri, edge := startSim(t), startSim(t)
	cm := &configMapDir{dir: t.TempDir()}
	cm.swap(t, reloadConfig(pri.grpc, edge.grpc, "mobilenet_v3", 8))
	rules := writeFile(t, "rules.yaml", reloadRules("500ms", "first"))
	token := writeFile(t, "token", "r3load\n")
	gate := start(t, "infergate", "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0",
		"--config", filepath.Join(cm.dir, "config.yaml"), "--rules", rules, "--admin-token-file", token, "--log-level", "info")
	admin := "http://" + gate.admin

	ld := startCallLoad(t, gate.grpc, "resnet50")
	defer ld.stop()
	waitCalls := ld.waitCalls
	waitCalls(50)

	// 1. SIGHUP: the rules file's threshold and receiver.
	if err := os.WriteFile(rules, []byte(reloadRules("750ms", "second")), 0o644); err != nil {
		t.Fatal(err)
	}
	gate.Signal(syscall.SIGHUP)
	waitFor(t, 30*time.Second, "the new threshold in /api/v1/rules", func() bool {
		_, body := httpGet(t, admin+"/api/v1/rules")
		return strings.Contains(body, `"750ms"`)
	})
	_, cfgBody := httpGet(t, admin+"/api/v1/status/config")
	if !strings.Contains(cfgBody, "name: second") || strings.Contains(cfgBody, "pw@") || strings.Contains(cfgBody, "key=abc") {
		t.Errorf("/api/v1/status/config after SIGHUP: want receiver second, credentials redacted:\n%s", cfgBody)
	}
	if !strings.Contains(gate.log.String(), "trigger=sighup") {
		t.Errorf("no reload log line for the SIGHUP")
	}
	waitCalls(50)

	// 2. The file, by a ConfigMap symlink swap: the fallback and a knob.
	cm.swap(t, reloadConfig(pri.grpc, edge.grpc, "resnet50", 4))
	waitFor(t, 30*time.Second, "the new fallback in /api/v1/routes", func() bool {
		return strings.HasPrefix(routeFallback(t, admin), "resnet50")
	})
	waitFor(t, 30*time.Second, "the new max_size in /api/v1/batching", func() bool {
		return batchingMaxSize(t, admin) == 4
	})
	if v := metricValue(t, admin, "infergate_config_last_reload_successful"); v != 1 {
		t.Errorf("infergate_config_last_reload_successful %v after good reloads, want 1", v)
	}
	waitCalls(50)

	// 3. A broken file: refused whole, the metric says so, nothing moves.
	cm.swap(t, reloadConfig(pri.grpc, edge.grpc, "mobilenet_v3", -1))
	waitFor(t, 30*time.Second, "infergate_config_last_reload_successful 0", func() bool {
		return metricValue(t, admin, "infergate_config_last_reload_successful") == 0
	})
	if fb, ms := routeFallback(t, admin), batchingMaxSize(t, admin); !strings.HasPrefix(fb, "resnet50") || ms != 4 {
		t.Errorf("after a broken file: fallback %q, max_size %d; want the running resnet50, 4", fb, ms)
	}
	if !strings.Contains(gate.log.String(), "batching.max_size") {
		t.Errorf("the refusal's log line does not name the field")
	}

	// 4. POST /-/reload needs the token; with it, the broken file is
	// refused with 400 and the error; a good one again is 200.
	if code, _ := httpDo(t, "POST", admin+"/-/reload", ""); code != http.StatusUnauthorized {
		t.Errorf("POST /-/reload without the token: %d, want 401", code)
	}
	if code, body := reloadWithToken(t, admin, "r3load"); code != http.StatusBadRequest || !strings.Contains(body, "batching.max_size") {
		t.Errorf("POST /-/reload of a broken file: %d %s; want 400 naming batching.max_size", code, body)
	}
	cm.swap(t, reloadConfig(pri.grpc, edge.grpc, "resnet50", 4))
	waitFor(t, 30*time.Second, "infergate_config_last_reload_successful back to 1", func() bool {
		return metricValue(t, admin, "infergate_config_last_reload_successful") == 1
	})
	waitCalls(50)

	ld.check(t)
}

// callLoad is 8 callers of one model on one connection, and a watch that the
// connection stays READY.
type callLoad struct {
	t                *testing.T
	cancel           func()
	wg               sync.WaitGroup
	calls, failed    atomic.Int64
	firstErr         atomic.Value
	dropped          atomic.Bool
	stopped, checked bool
}

func startCallLoad(t *testing.T, addr, model string) *callLoad {
	t.Helper()
	cc := dial(t, addr)
	kc := kservepb.NewGRPCInferenceServiceClient(cc)
	ctx, cancel := context.WithCancel(context.Background())
	ld := &callLoad{t: t, cancel: cancel}
	for range 8 {
		ld.wg.Go(func() {
			req := resnetRequest(model, 1)
			for ctx.Err() == nil {
				cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
				_, err := kc.ModelInfer(cctx, req)
				ccancel()
				if ctx.Err() != nil {
					return
				}
				ld.calls.Add(1)
				if err != nil {
					ld.failed.Add(1)
					ld.firstErr.CompareAndSwap(nil, err.Error())
				}
			}
		})
	}
	// The connection must stay READY throughout: a drop would show here
	// even if every call happened to be retried.
	ld.wg.Go(func() {
		for st := cc.GetState(); st != connectivity.Ready; st = cc.GetState() {
			if !cc.WaitForStateChange(ctx, st) {
				return
			}
		}
		if cc.WaitForStateChange(ctx, connectivity.Ready) && ctx.Err() == nil {
			ld.dropped.Store(true)
		}
	})
	return ld
}

// waitCalls waits for n more calls to end.
func (ld *callLoad) waitCalls(n int64) {
	ld.t.Helper()
	from := ld.calls.Load()
	eventually(ld.t, fmt.Sprintf("%d more calls", n), func() bool { return ld.calls.Load() >= from+n })
}

func (ld *callLoad) stop() {
	if !ld.stopped {
		ld.stopped = true
		ld.cancel()
		ld.wg.Wait()
	}
}

// check stops the load and fails t if a call failed or the connection
// left READY.
func (ld *callLoad) check(t *testing.T) {
	t.Helper()
	ld.stop()
	if n := ld.failed.Load(); n > 0 {
		t.Errorf("%d of %d calls failed across the reloads; first: %v", n, ld.calls.Load(), ld.firstErr.Load())
	}
	if ld.dropped.Load() {
		t.Errorf("the client's connection left READY during the reloads")
	}
	t.Logf("%d calls, none failed", ld.calls.Load())
}

// TestReloadTurnsBatchingOn: batching off at start, a reload turns it on
// (adaptive) under load, and another off again; no call fails, no
// connection drops, /api/v1/batching shows each state and the batches
// formed. The calls take the fast path (no tracing, no route), whose
// forward decision asks the batcher.
func TestReloadTurnsBatchingOn(t *testing.T) {
	pri := startSim(t)
	conf := writeFile(t, "infergate.yaml", fmt.Sprintf("upstream: %q\n", pri.grpc))
	gate := start(t, "infergate", "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--config", conf)
	admin := "http://" + gate.admin
	ld := startCallLoad(t, gate.grpc, "resnet50")
	defer ld.stop()
	ld.waitCalls(50)
	if m, _ := batchingModel(t, admin, "resnet50"); m != "" {
		t.Fatalf("batching off at start: /api/v1/batching shows resnet50 (%s)", m)
	}

	on := fmt.Sprintf("upstream: %q\nbatching: {mode: adaptive, models: {resnet50: {}}}\n", pri.grpc)
	if err := os.WriteFile(conf, []byte(on), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "resnet50 batched (adaptive) with batches formed in /api/v1/batching", func() bool {
		mode, batches := batchingModel(t, admin, "resnet50")
		return mode == "adaptive" && batches > 0
	})
	_, cfgBody := httpGet(t, admin+"/api/v1/status/config?format=json")
	var st struct {
		RestartRequired []string `json:"restart_required"`
	}
	if err := json.Unmarshal([]byte(cfgBody), &st); err != nil || len(st.RestartRequired) != 0 {
		t.Errorf("after batching turned on: restart_required %v (%v), want none", st.RestartRequired, err)
	}
	ld.waitCalls(50)

	if err := os.WriteFile(conf, []byte(fmt.Sprintf("upstream: %q\n", pri.grpc)), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "resnet50 no longer batched in /api/v1/batching", func() bool {
		m, _ := batchingModel(t, admin, "resnet50")
		return m == ""
	})
	ld.waitCalls(50)
	ld.check(t)
}

// TestReloadAddsFirstRoute: a proxy started without routes gets its first
// fallback from a reload and uses it at once, under load: once the
// operator forces the route (the admin API, as an alert action would),
// the fallback model takes the calls; nothing waits for a restart, and no
// call fails.
func TestReloadAddsFirstRoute(t *testing.T) {
	sim := startSim(t)
	conf := writeFile(t, "infergate.yaml", fmt.Sprintf("upstream: %q\n", sim.grpc))
	token := writeFile(t, "token", "r0utes\n")
	gate := start(t, "infergate", "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--config", conf,
		"--admin-token-file", token, "--log-level", "info")
	admin := "http://" + gate.admin
	served := func(model string) float64 {
		return counterSum(scrape(t, sim.admin), "nv_inference_request_success", map[string]string{"model": model})
	}
	ld := startCallLoad(t, gate.grpc, "resnet50")
	defer ld.stop()
	ld.waitCalls(50)

	routed := fmt.Sprintf("upstream: %q\nroutes:\n  - model: resnet50\n    fallback: {model: mobilenet_v3}\n", sim.grpc)
	if err := os.WriteFile(conf, []byte(routed), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "resnet50's route in /api/v1/routes", func() bool {
		_, body := httpGet(t, admin+"/api/v1/routes")
		return strings.Contains(body, `"mobilenet_v3`) || strings.Contains(body, `mobilenet_v3 on`)
	})
	_, cfgBody := httpGet(t, admin+"/api/v1/status/config?format=json")
	var st struct {
		RestartRequired []string `json:"restart_required"`
	}
	if err := json.Unmarshal([]byte(cfgBody), &st); err != nil || len(st.RestartRequired) != 0 {
		t.Errorf("after the first route: restart_required %v (%v), want none", st.RestartRequired, err)
	}

	before := served("mobilenet_v3")
	req, _ := http.NewRequest("POST", admin+"/api/v1/routes/resnet50", strings.NewReader(`{"route": "fallback"}`))
	req.Header.Set("Authorization", "Bearer r0utes")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("forcing resnet50 onto its fallback: HTTP %d", resp.StatusCode)
	}
	ld.waitCalls(100)
	if got := served("mobilenet_v3") - before; got < 50 {
		t.Errorf("the fallback served %v of the 100 calls after the route was forced, want most", got)
	}
	ld.check(t)
}

// TestReloadMovesDefaultUpstream: upstream: in the file points at a
// second simserver, under load; the reload moves the default upstream
// live (new connections, the old drained): no call fails, the
// client's connection stays READY, the second simserver takes the calls
// (its own metrics) and the first takes no more; infergate's series
// carry the new upstream label, and nothing waits for a restart.
func TestReloadMovesDefaultUpstream(t *testing.T) {
	first, second := startSim(t), startSim(t)
	conf := writeFile(t, "infergate.yaml", fmt.Sprintf("upstream: %q\n", first.grpc))
	gate := start(t, "infergate", "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--config", conf, "--log-level", "info")
	admin := "http://" + gate.admin
	served := func(sim *proc) float64 {
		return counterSum(scrape(t, sim.admin), "nv_inference_request_success", map[string]string{"model": "resnet50"})
	}
	ld := startCallLoad(t, gate.grpc, "resnet50")
	defer ld.stop()
	ld.waitCalls(50)
	if n := served(second); n != 0 {
		t.Fatalf("the second simserver served %v calls before the reload", n)
	}

	moved := time.Now()
	if err := os.WriteFile(conf, []byte(fmt.Sprintf("upstream: %q\n", second.grpc)), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the second simserver taking calls", func() bool { return served(second) > 0 })
	t.Logf("the second simserver took calls %v after the file changed", time.Since(moved).Round(time.Millisecond))
	// Calls in flight on the first when it moved have ended after these.
	ld.waitCalls(50)
	before := served(first)
	ld.waitCalls(100)
	if after := served(first); after != before {
		t.Errorf("the first simserver served %v more calls after the move, want none", after-before)
	}

	fams := scrape(t, gate.admin)
	if n := counterSum(fams, "infergate_requests_total", map[string]string{"upstream": second.grpc}); n == 0 {
		t.Errorf("no infergate_requests_total with upstream=%q after the move:\n%s", second.grpc, dumpFamilies(fams, "infergate_requests_total"))
	}
	_, cfgBody := httpGet(t, admin+"/api/v1/status/config?format=json")
	var st struct {
		RestartRequired []string `json:"restart_required"`
	}
	if err := json.Unmarshal([]byte(cfgBody), &st); err != nil || len(st.RestartRequired) != 0 {
		t.Errorf("after the move: restart_required %v (%v), want none", st.RestartRequired, err)
	}
	if !strings.Contains(gate.log.String(), "default upstream "+first.grpc+" -> "+second.grpc) {
		t.Errorf("no reload log line for the move")
	}
	ld.check(t)
}

// TestReloadTracingSampler: tracing on with sample_ratio 0 records no
// call; a reload to 1 records the calls after it, without a restart.
func TestReloadTracingSampler(t *testing.T) {
	rcv := startOTLPReceiver(t)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "50") // export within 50ms, not 5s
	pri := startSim(t)
	file := func(ratio int) string {
		return fmt.Sprintf("upstream: %q\ntracing: {enabled: true, protocol: grpc, endpoint: %q, sample_ratio: %d}\n", pri.grpc, "http://"+rcv.addr, ratio)
	}
	conf := writeFile(t, "infergate.yaml", file(0))
	gate := start(t, "infergate", "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--config", conf, "--log-level", "info")
	kc := kservepb.NewGRPCInferenceServiceClient(dial(t, gate.grpc))
	ctx := testCtx(t)
	calls := func(n int) {
		t.Helper()
		for range n {
			if _, err := kc.ModelInfer(ctx, resnetRequest("resnet50", 1)); err != nil {
				t.Fatal(err)
			}
		}
	}
	servers := func() int {
		rcv.mu.Lock()
		defer rcv.mu.Unlock()
		n := 0
		for _, s := range rcv.spans {
			if s.Kind == tracepb.Span_SPAN_KIND_SERVER {
				n++
			}
		}
		return n
	}
	calls(20)
	if err := os.WriteFile(conf, []byte(file(1)), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the reload applied", func() bool {
		return strings.Contains(gate.log.String(), "tracing sampler: sample_ratio 1")
	})
	calls(5)
	waitFor(t, 30*time.Second, "the 5 calls after the reload traced", func() bool { return servers() >= 5 })
	// The 20 calls before it, had they been sampled, were exported
	// long before these.
	if n := servers(); n != 5 {
		t.Errorf("%d server spans, want the 5 calls after the reload: sample_ratio 0 recorded calls", n)
	}
	if strings.Contains(gate.log.String(), "settings=tracing") {
		t.Errorf("the sampler's change waits for a restart:\n%s", gate.log.String())
	}
}

func reloadWithToken(t *testing.T, admin, token string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", admin+"/-/reload", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return resp.StatusCode, b.String()
}

// routeFallback is resnet50's fallback as /api/v1/routes shows it.
func routeFallback(t *testing.T, admin string) string {
	t.Helper()
	_, body := httpGet(t, admin+"/api/v1/routes")
	var v struct {
		Routes []struct {
			Model    string `json:"model"`
			Fallback string `json:"fallback"`
		} `json:"routes"`
	}
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatalf("/api/v1/routes: %v\n%s", err, body)
	}
	for _, r := range v.Routes {
		if r.Model == "resnet50" {
			return r.Fallback
		}
	}
	return ""
}

// batchingModel is model's mode and batches formed as /api/v1/batching
// shows them; "" when the model is not batched.
func batchingModel(t *testing.T, admin, model string) (mode string, batches uint64) {
	t.Helper()
	_, body := httpGet(t, admin+"/api/v1/batching")
	var v struct {
		Models []struct {
			Model  string `json:"model"`
			Mode   string `json:"mode"`
			Queues []struct {
				Batches uint64 `json:"batches"`
			} `json:"queues"`
		} `json:"models"`
	}
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatalf("/api/v1/batching: %v\n%s", err, body)
	}
	for _, m := range v.Models {
		if m.Model == model {
			for _, q := range m.Queues {
				batches += q.Batches
			}
			return m.Mode, batches
		}
	}
	return "", 0
}

// batchingMaxSize is resnet50's max_size as /api/v1/batching shows it.
func batchingMaxSize(t *testing.T, admin string) int {
	t.Helper()
	_, body := httpGet(t, admin+"/api/v1/batching")
	var v struct {
		Models []struct {
			Model   string `json:"model"`
			MaxSize int    `json:"max_size"`
		} `json:"models"`
	}
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatalf("/api/v1/batching: %v\n%s", err, body)
	}
	for _, m := range v.Models {
		if m.Model == "resnet50" {
			return m.MaxSize
		}
	}
	return 0
}

// metricValue is the value of an unlabelled gauge on /metrics; -1 when
// absent.
func metricValue(t *testing.T, admin, name string) float64 {
	t.Helper()
	_, body := httpGet(t, admin+"/metrics")
	for _, line := range strings.Split(body, "\n") {
		if rest, ok := strings.CutPrefix(line, name+" "); ok {
			var v float64
			fmt.Sscan(rest, &v)
			return v
		}
	}
	return -1
}

// TestReloadFlowControl: flow control off at start; a reload turns it on
// under load, another changes who the calls are for (the default
// tenant) and a tenant's weight, a third turns it off. No call fails,
// no connection drops, nothing asks for a restart, and /api/v1/flow
// follows each state.
func TestReloadFlowControl(t *testing.T) {
	pri := startSim(t)
	conf := writeFile(t, "infergate.yaml", fmt.Sprintf("upstream: %q\n", pri.grpc))
	gate := start(t, "infergate", "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--config", conf)
	admin := "http://" + gate.admin
	ld := startCallLoad(t, gate.grpc, "resnet50")
	defer ld.stop()
	ld.waitCalls(50)

	type flowDoc struct {
		Gates   []struct{ Model string }
		Tenants []struct{ Tenant string }
	}
	flowNow := func() (doc flowDoc) {
		t.Helper()
		code, body := httpGet(t, admin+"/api/v1/flow")
		if code != http.StatusOK || json.Unmarshal([]byte(body), &doc) != nil {
			t.Fatalf("/api/v1/flow: %d %s", code, body)
		}
		return doc
	}
	hasTenant := func(doc flowDoc, name string) bool {
		for _, tn := range doc.Tenants {
			if tn.Tenant == name {
				return true
			}
		}
		return false
	}
	noRestart := func(when string) {
		t.Helper()
		_, cfgBody := httpGet(t, admin+"/api/v1/status/config?format=json")
		var st struct {
			RestartRequired []string `json:"restart_required"`
		}
		if err := json.Unmarshal([]byte(cfgBody), &st); err != nil || len(st.RestartRequired) != 0 {
			t.Errorf("%s: restart_required %v (%v), want none", when, st.RestartRequired, err)
		}
	}
	write := func(flowSection string) {
		t.Helper()
		if err := os.WriteFile(conf, []byte(fmt.Sprintf("upstream: %q\n%s", pri.grpc, flowSection)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if doc := flowNow(); len(doc.Gates) != 0 {
		t.Fatalf("flow control off at start: /api/v1/flow shows gates %+v", doc.Gates)
	}

	write("flow_control: {enabled: true, default_tenant: nightly}\n")
	waitFor(t, 30*time.Second, "resnet50's gate and tenant nightly in /api/v1/flow", func() bool {
		doc := flowNow()
		return len(doc.Gates) == 1 && doc.Gates[0].Model == "resnet50" && hasTenant(doc, "nightly")
	})
	noRestart("after flow control turned on")

	write("flow_control: {enabled: true, default_tenant: online, tenants: {online: {weight: 2}}}\n")
	waitFor(t, 30*time.Second, "tenant online in /api/v1/flow", func() bool {
		doc := flowNow()
		return len(doc.Gates) == 1 && hasTenant(doc, "online")
	})
	noRestart("after the default tenant changed")
	ld.waitCalls(50)

	write("")
	waitFor(t, 30*time.Second, "no gate in /api/v1/flow once flow control is off", func() bool {
		return len(flowNow().Gates) == 0
	})
	ld.waitCalls(50)
	ld.check(t)
}
