package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/infergate/infergate/proto/kservepb"
)

// flowModels is one resnet50 of one slot whose model config has three
// priority levels.
const flowModels = `models:
  - name: resnet50
    kind: classifier
    platform: tensorrt_plan
    protocols: [kserve]
    max_batch: 64
    slots: 1
    priority_levels: 3
    inputs: [{name: input, datatype: FP32, dims: [64]}]
    outputs: [{name: probs, datatype: FP32, dims: [10]}]
    latency: {base_ms: 5, per_item_ms: 0.25}
`

// simPriorities is simserver's count of resnet50's requests by priority
// parameter.
func simPriorities(t *testing.T, admin string) map[string]float64 {
	t.Helper()
	_, body := httpGet(t, "http://"+admin+"/metrics")
	out := map[string]float64{}
	for _, line := range strings.Split(body, "\n") {
		rest, ok := strings.CutPrefix(line, `simserver_requests_by_priority_total{model="resnet50",priority="`)
		if !ok {
			continue
		}
		level, value, _ := strings.Cut(rest, `"} `)
		var v float64
		fmt.Sscan(value, &v)
		out[level] = v
	}
	return out
}

// TestFlowControl: infergate --flow-control in front of a one-slot model
// flooded by a standard tenant, beside a critical one: every critical
// call is answered; the flood's excess is refused with RESOURCE_EXHAUSTED
// naming why (never after waiting out its deadline); /api/v1/flow shows
// the gate, its learnt limit and the tenants; the metrics pass promtool;
// and each call's band reaches the model server as its priority level,
// the model config having three.
func TestFlowControl(t *testing.T) {
	sim := startSim(t, "--config", writeFile(t, "models.yaml", flowModels))
	gate := startProxy(t, sim.grpc, "--flow-control")
	kc := kservepb.NewGRPCInferenceServiceClient(dial(t, gate.grpc))

	// The bands reach the server as levels once the model config is read.
	call := func(ctx context.Context, tenant, band string) error {
		ctx = metadata.AppendToOutgoingContext(ctx, "x-tenant", tenant, "x-priority", band)
		_, err := kc.ModelInfer(ctx, resnetRequest("resnet50", 1))
		return err
	}
	waitFor(t, 30*time.Second, "levels 1, 2 and 3 at the server", func() bool {
		for _, b := range []string{"critical", "standard", "sheddable"} {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			err := call(ctx, "probe", b)
			cancel()
			if err != nil {
				t.Fatalf("a %s call: %v", b, err)
			}
		}
		p := simPriorities(t, sim.admin)
		return p["1"] > 0 && p["2"] > 0 && p["3"] > 0
	})

	// A flood: 48 callers of tenant batch with 150ms deadlines (48 waiting
	// on a 6.5ms model need 300ms: most are refused); one
	// critical caller, paced.
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var refused, floodOK, deadline, other atomic.Int64
	var otherErr atomic.Value
	var why atomic.Value
	for range 48 {
		wg.Go(func() {
			for ctx.Err() == nil {
				cctx, cancel := context.WithTimeout(ctx, 150*time.Millisecond)
				err := call(cctx, "batch", "standard")
				cancel()
				switch status.Code(err) {
				case codes.OK:
					floodOK.Add(1)
				case codes.ResourceExhausted:
					refused.Add(1)
					why.CompareAndSwap(nil, err.Error())
					time.Sleep(5 * time.Millisecond) // a client backs off when told it cannot be served
				case codes.DeadlineExceeded:
					if ctx.Err() == nil {
						deadline.Add(1)
					}
				default:
					if ctx.Err() == nil {
						other.Add(1)
						otherErr.CompareAndSwap(nil, err.Error())
					}
					time.Sleep(5 * time.Millisecond)
				}
			}
		})
	}
	var critical, criticalFailed atomic.Int64
	var criticalErr atomic.Value
	wg.Go(func() {
		for ctx.Err() == nil {
			cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			err := call(cctx, "online", "critical")
			cancel()
			if ctx.Err() != nil {
				return
			}
			critical.Add(1)
			if err != nil {
				criticalFailed.Add(1)
				criticalErr.CompareAndSwap(nil, err.Error())
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
	waitFor(t, 60*time.Second, "100 critical calls beside the flood", func() bool { return critical.Load() >= 100 && refused.Load() > 0 })
	failedBefore := criticalFailed.Load()

	var doc struct {
		Gates []struct {
			Model, Upstream   string
			Capacity, Waiting int
			InFlight          int `json:"in_flight"`
			Endpoints         []struct{ Limit int }
		}
		Tenants []struct {
			Tenant string
			Bands  map[string]struct{ AtOnce, Waited, Refused uint64 }
		}
	}
	flowDoc := func() {
		t.Helper()
		code, body := httpGet(t, "http://"+gate.admin+"/api/v1/flow")
		if code != http.StatusOK || json.Unmarshal([]byte(body), &doc) != nil {
			t.Fatalf("/api/v1/flow: %d %s", code, body)
		}
	}
	flowDoc()

	// The model server dies under the flood and comes back: calls fail
	// meanwhile (UNAVAILABLE, explicit), and no turn is lost: once the
	// load stops, nothing is in flight or waiting at the gate.
	sim.Kill()
	time.Sleep(time.Second)
	sim2 := startSim(t, "--config", writeFile(t, "models2.yaml", flowModels), "--listen", sim.grpc)
	_ = sim2
	before := critical.Load()
	waitFor(t, 60*time.Second, "critical calls answered again after the restart", func() bool { return critical.Load() >= before+50 })
	stop()
	wg.Wait()
	waitFor(t, 30*time.Second, "the gate empty once the load stopped", func() bool {
		flowDoc()
		return len(doc.Gates) == 1 && doc.Gates[0].InFlight == 0 && doc.Gates[0].Waiting == 0
	})
	criticalFailed.Store(failedBefore) // failures while the server was down are not the gate's
	t.Logf("critical %d (failed %d); flood answered %d, refused %d, deadline %d, other %d (%v); %s", critical.Load(), criticalFailed.Load(),
		floodOK.Load(), refused.Load(), deadline.Load(), other.Load(), otherErr.Load(), why.Load())
	if n := other.Load(); n > 0 {
		t.Logf("%d flood calls failed otherwise, while the server was down (first: %v)", n, otherErr.Load())
	}
	if n := criticalFailed.Load(); n > 0 {
		t.Errorf("%d critical calls failed (first: %v), want none", n, criticalErr.Load())
	}
	if w, _ := why.Load().(string); !strings.Contains(w, "flow control") || !strings.Contains(w, "deadline") {
		t.Errorf("a refusal says %q, want flow control and the deadline named", w)
	}
	if d := deadline.Load(); d > refused.Load()/10 {
		t.Errorf("%d flood calls ran out their deadline (%d refused at once): the gate must refuse, not let them wait it out", d, refused.Load())
	}
	if len(doc.Gates) != 1 || doc.Gates[0].Model != "resnet50" || len(doc.Gates[0].Endpoints) != 1 ||
		doc.Gates[0].Endpoints[0].Limit < 1 || doc.Gates[0].Endpoints[0].Limit > 3 {
		t.Errorf("/api/v1/flow gates: %+v, want resnet50's with a learnt limit of 1 to 3 on a one-slot model", doc.Gates)
	}
	tenants := map[string]bool{}
	for _, tn := range doc.Tenants {
		tenants[tn.Tenant] = true
	}
	if !tenants["batch"] || !tenants["online"] || !tenants["other"] {
		t.Errorf("/api/v1/flow tenants: %+v, want batch, online and other", doc.Tenants)
	}
	promtoolClean(t, gate.admin, "infergate_flow_calls_total", "infergate_flow_gate", "infergate_flow_tenant_p99_seconds")
}

// batchedFlowModels is a batched resnet50 of one slot, slow enough per
// batch that a loaded test machine keeps up with it.
const batchedFlowModels = `models:
  - name: resnet50
    kind: classifier
    platform: tensorrt_plan
    protocols: [kserve]
    max_batch: 64
    slots: 1
    inputs: [{name: input, datatype: FP32, dims: [64]}]
    outputs: [{name: probs, datatype: FP32, dims: [10]}]
    latency: {base_ms: 20, per_item_ms: 0.25}
`

// TestFlowControlBatched: with batching on, flow control stands in front
// of the batcher's queue, whose capacity (slots + 1 batches of the
// target size) is the gate's: two standard tenants flooding a batched
// model at 3:1 concurrency, each alone able to fill it, get equal shares
// of its batches (the batcher's own queue, first come first served,
// gives them 3:1), and a
// critical tenant beside them is always answered.
func TestFlowControlBatched(t *testing.T) {
	sim := startSim(t, "--config", writeFile(t, "models.yaml", batchedFlowModels))
	gate := startProxy(t, sim.grpc, "--flow-control", "--batching", "adaptive", "--batch-models", "resnet50",
		"--batch-max-size", "8", "--batch-slo", "500ms")
	kc := kservepb.NewGRPCInferenceServiceClient(dial(t, gate.grpc))
	call := func(ctx context.Context, tenant, band string) error {
		ctx = metadata.AppendToOutgoingContext(ctx, "x-tenant", tenant, "x-priority", band)
		_, err := kc.ModelInfer(ctx, resnetRequest("resnet50", 1))
		return err
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var wg sync.WaitGroup
	var answered [2]atomic.Int64
	var failed atomic.Int64
	var firstErr atomic.Value
	for i, callers := range []int{48, 16} { // the gate takes 16: 2 batches of 8
		tenant := []string{"B", "C"}[i]
		for range callers {
			wg.Go(func() {
				for ctx.Err() == nil {
					err := call(ctx, tenant, "standard")
					switch {
					case err == nil:
						answered[i].Add(1)
					case ctx.Err() == nil:
						failed.Add(1)
						firstErr.CompareAndSwap(nil, err.Error())
						time.Sleep(5 * time.Millisecond)
					}
				}
			})
		}
	}
	var critical, criticalFailed atomic.Int64
	var criticalErr atomic.Value
	wg.Go(func() {
		for ctx.Err() == nil {
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			err := call(cctx, "A", "critical")
			cancel()
			if ctx.Err() != nil {
				return
			}
			critical.Add(1)
			if err != nil {
				criticalFailed.Add(1)
				criticalErr.CompareAndSwap(nil, err.Error())
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
	// Shares are counted once the batcher's fit and the gate settled.
	waitFor(t, 60*time.Second, "300 flood answers", func() bool { return answered[0].Load()+answered[1].Load() >= 300 })
	b0, c0 := answered[0].Load(), answered[1].Load()
	waitFor(t, 120*time.Second, "1,500 more flood answers", func() bool {
		return answered[0].Load()+answered[1].Load() >= b0+c0+1500 && critical.Load() >= 50
	})
	b, c := answered[0].Load()-b0, answered[1].Load()-c0

	var doc struct {
		Gates []struct {
			Model    string
			Capacity int
		}
		Tenants []struct {
			Tenant string
			Bands  map[string]struct{ AtOnce, Waited, Refused uint64 }
		}
	}
	code, body := httpGet(t, "http://"+gate.admin+"/api/v1/flow")
	if code != http.StatusOK || json.Unmarshal([]byte(body), &doc) != nil {
		t.Fatalf("/api/v1/flow: %d %s", code, body)
	}
	stop()
	wg.Wait()
	t.Logf("answered B %d, C %d; critical %d (failed %d); other failures %d (%v); gates %+v", b, c,
		critical.Load(), criticalFailed.Load(), failed.Load(), firstErr.Load(), doc.Gates)
	if ratio := float64(b) / float64(max(c, 1)); ratio < 0.75 || ratio > 1.33 {
		t.Errorf("B (48 callers) got %d answers, C (16 callers) %d: want about equal shares", b, c)
	}
	if n := criticalFailed.Load(); n > 0 {
		t.Errorf("%d critical calls failed (first: %v), want none", n, criticalErr.Load())
	}
	if n := failed.Load(); n > 0 {
		t.Errorf("%d flood calls failed (first: %v), want none: they have no deadline", n, firstErr.Load())
	}
	if len(doc.Gates) != 1 || doc.Gates[0].Model != "resnet50" || doc.Gates[0].Capacity < 4 || doc.Gates[0].Capacity > 18 {
		t.Errorf("/api/v1/flow gates: %+v, want resnet50's with the batcher's capacity: 2 batches of at most 8", doc.Gates)
	}
	waited := uint64(0)
	for _, tn := range doc.Tenants {
		if tn.Tenant == "B" {
			waited = tn.Bands["standard"].Waited
		}
	}
	if waited == 0 {
		t.Errorf("no call of B waited at the gate: %+v", doc.Tenants)
	}
}
