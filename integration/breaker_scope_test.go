package integration

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/infergate/infergate/proto/kservepb"
)

// breakerStates reads the breakers of /api/v1/routes: "upstream/model"
// (model "" for the upstream's own breaker) → state.
func breakerStates(t *testing.T, admin string) map[string]string {
	t.Helper()
	code, body := httpGet(t, "http://"+admin+"/api/v1/routes")
	if code != http.StatusOK {
		t.Fatalf("/api/v1/routes: %d %s", code, body)
	}
	var doc struct {
		Breakers []struct {
			Upstream, Model, State string
		}
	}
	if err := json.Unmarshal([]byte(body), &doc); err != nil {
		t.Fatalf("/api/v1/routes: %v", err)
	}
	out := map[string]string{}
	for _, b := range doc.Breakers {
		out[b.Upstream+"/"+b.Model] = b.State
	}
	return out
}

// TestOneModelsTroubleIsItsOwn: resnet50, routed to its fallback
// mobilenet_v3 on the same simserver, fails every call with the server's
// own UNAVAILABLE. Its breaker there opens and mobilenet_v3 answers for
// it; simple, on the same server, beside it, loses no call and keeps its
// rate, and the server's own breaker stays closed. Then the server dies:
// its own breaker opens within the breaker's window, for every model.
func TestOneModelsTroubleIsItsOwn(t *testing.T) {
	sim := startSim(t)
	gate := startProxy(t, sim.grpc, "--fallback", "resnet50="+sim.grpc+"/mobilenet_v3")
	ld := startCallLoad(t, gate.grpc, "resnet50")
	defer ld.stop()
	ld.waitCalls(50)
	good := startGoodClient(t, gate.grpc)
	baseFrom := time.Now()
	time.Sleep(goodBaseline)
	baseTo := time.Now()

	if code, body := httpDo(t, http.MethodPost, "http://"+sim.admin+"/api/v1/faults",
		`{"model":"resnet50","error_rate":1,"error_code":"unavailable"}`); code != http.StatusOK {
		t.Fatalf("fault: %d %s", code, body)
	}
	from := time.Now()
	waitFor(t, 20*time.Second, "resnet50's breaker on the simserver open", func() bool {
		return breakerStates(t, gate.admin)[sim.grpc+"/resnet50"] != "closed"
	})
	time.Sleep(2 * time.Second) // the fallback serving, simple beside it
	to := time.Now()
	good.halt()
	base, during := good.stats(baseFrom, baseTo), good.stats(from, to)
	t.Logf("simple alone beside healthy resnet50: %s", base)
	t.Logf("simple while resnet50 fails: %s", during)
	if during.failed > 0 {
		t.Errorf("simple lost %d of %d calls to resnet50's trouble (first: %s), want none", during.failed, during.started, during.firstFailure)
	}
	if ratio := during.rate / base.rate; ratio < minGoodRate {
		t.Errorf("simple kept %.0f%% of its rate while resnet50 failed, want >= %.0f%%", 100*ratio, 100*minGoodRate)
	}
	states := breakerStates(t, gate.admin)
	if s := states[sim.grpc+"/"]; s != "closed" {
		t.Errorf("the simserver's own breaker is %s after one model's failures, want closed (%v)", s, states)
	}
	ld.stop()
	t.Logf("resnet50's callers: %d calls, %d failed while its breaker opened", ld.calls.Load(), ld.failed.Load())

	// A dead server: the way to it fails for every model.
	t.Logf("breakers before the server dies: %v", breakerStates(t, gate.admin))
	sim.Kill()
	dead := time.Now()
	kc := kservepb.NewGRPCInferenceServiceClient(dial(t, gate.grpc))
	waitFor(t, 15*time.Second, "the simserver's own breaker open once it died", func() bool {
		kc.ModelInfer(testCtx(t), simpleRequest("after-death"))
		return breakerStates(t, gate.admin)[sim.grpc+"/"] == "open"
	})
	t.Logf("the dead server's breaker opened %s after it died: %v", time.Since(dead).Round(time.Millisecond), breakerStates(t, gate.admin))
}
