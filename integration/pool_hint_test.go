package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"

	"github.com/infergate/infergate/proto/kservepb"
)

// modelHintDoc is what /api/v1/models says of one model's cause.
type modelHintDoc struct {
	Model        string `json:"model"`
	CauseHint    string `json:"cause_hint"`
	SlowEndpoint *struct {
		Endpoint string  `json:"endpoint"`
		Ratio    float64 `json:"ratio"`
		Note     string  `json:"note"`
	} `json:"slow_endpoint"`
}

func modelHint(t *testing.T, admin, model string) modelHintDoc {
	t.Helper()
	code, body := httpGet(t, "http://"+admin+"/api/v1/models")
	if code != http.StatusOK {
		t.Fatalf("/api/v1/models: %d %s", code, body)
	}
	var doc []modelHintDoc
	if err := json.Unmarshal([]byte(body), &doc); err != nil {
		t.Fatalf("/api/v1/models: %v", err)
	}
	for _, m := range doc {
		if m.Model == model {
			return m
		}
	}
	return modelHintDoc{}
}

// endpointLatency is /api/v1/endpoints' p50 of model per endpoint.
func endpointLatency(t *testing.T, admin, model string) map[string]float64 {
	t.Helper()
	_, body := httpGet(t, "http://"+admin+"/api/v1/endpoints")
	var doc struct {
		Endpoints []struct {
			Address      string
			ModelLatency map[string]struct {
				Answers    uint64  `json:"answers"`
				P50Seconds float64 `json:"p50_seconds"`
			} `json:"model_latency"`
		}
	}
	if err := json.Unmarshal([]byte(body), &doc); err != nil {
		t.Fatalf("/api/v1/endpoints: %v", err)
	}
	out := map[string]float64{}
	for _, e := range doc.Endpoints {
		if l, ok := e.ModelLatency[model]; ok && l.Answers > 0 {
			out[e.Address] = l.P50Seconds
		}
	}
	return out
}

// TestPoolSlowEndpointHint: a pool whose calls cannot all avoid a slow
// replica (two endpoints taken in turn) names it: /api/v1/endpoints
// gives each endpoint's latency for the model, /api/v1/models the slow
// endpoint and the cause hint one_endpoint_slow once the model is over
// its SLO. Healthy, no endpoint is named.
func TestPoolSlowEndpointHint(t *testing.T) {
	a, b := startSim(t), startSim(t)
	conf := writeFile(t, "infergate.yaml", fmt.Sprintf(`upstreams:
  - name: pool
    endpoints: [%q, %q]
    balance: round_robin
slo:
  - model: resnet50
    p99: 15ms
`, a.grpc, b.grpc))
	gate := start(t, "infergate", "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--config", conf)
	load := startPoolLoad(t, gate.grpc, 2)
	defer load.stop()
	eventually(t, "each endpoint's latency for resnet50", func() bool { return len(endpointLatency(t, gate.admin, "resnet50")) == 2 })
	time.Sleep(3 * time.Second)
	if m := modelHint(t, gate.admin, "resnet50"); m.SlowEndpoint != nil || m.CauseHint == "one_endpoint_slow" {
		t.Fatalf("healthy pool: %+v, want no slow endpoint named", m)
	}

	if code, body := httpDo(t, http.MethodPost, "http://"+b.admin+"/api/v1/faults", `{"model":"resnet50","slowdown":4}`); code != http.StatusOK {
		t.Fatalf("fault: %d %s", code, body)
	}
	var m modelHintDoc
	waitFor(t, 30*time.Second, "the slow endpoint named", func() bool {
		m = modelHint(t, gate.admin, "resnet50")
		return m.SlowEndpoint != nil && m.CauseHint == "one_endpoint_slow"
	})
	lat := endpointLatency(t, gate.admin, "resnet50")
	t.Logf("p50 per endpoint %v; %s", lat, m.SlowEndpoint.Note)
	if m.SlowEndpoint.Endpoint != b.grpc {
		t.Errorf("slow endpoint %s, want %s", m.SlowEndpoint.Endpoint, b.grpc)
	}
	if m.SlowEndpoint.Ratio < 2 || !strings.Contains(m.SlowEndpoint.Note, b.grpc) {
		t.Errorf("slow endpoint %+v: want a ratio of at least 2 and its address in the note", *m.SlowEndpoint)
	}
	if lat[b.grpc] < 2*lat[a.grpc] {
		t.Errorf("p50 of the slow endpoint %.4fs, of the other %.4fs: want the slowdown seen", lat[b.grpc], lat[a.grpc])
	}
	if n := load.failed.Load(); n > 0 {
		t.Errorf("%d calls failed (first: %v)", n, load.firstErr.Load())
	}
}

// TestPoolAffinityHeader: with --affinity-header, every call carrying
// one value of the header lands on one replica, on the fast path and
// the gRPC path, and the values spread over the pool.
func TestPoolAffinityHeader(t *testing.T) {
	sims, addrs := startSims(t, 3)
	ran := func() map[string]float64 { return ranBy(t, sims, "resnet50") }
	for _, path := range []string{"fast", "grpc"} {
		t.Run(path, func(t *testing.T) {
			args := []string{"--affinity-header", "x-session"}
			if path == "grpc" {
				args = append(args, "--fast-path=false")
			}
			gate := startProxy(t, strings.Join(addrs, ","), args...)
			kc := kservepb.NewGRPCInferenceServiceClient(dial(t, gate.grpc))
			used := map[string]bool{}
			for s := range 12 {
				session := fmt.Sprintf("user-%d", s)
				before := ran()
				for i := range 20 {
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					ctx = metadata.AppendToOutgoingContext(ctx, "x-session", session)
					_, err := kc.ModelInfer(ctx, resnetRequest("resnet50", 1))
					cancel()
					if err != nil {
						t.Fatalf("call %d of %s: %v", i, session, err)
					}
				}
				after := ran()
				on := ""
				for _, a := range addrs {
					if n := after[a] - before[a]; n == 20 {
						on = a
					} else if n != 0 {
						t.Errorf("%s: replica %s ran %v of its 20 calls, want 0 or all", session, a, n)
					}
				}
				used[on] = true
			}
			if len(used) < 2 {
				t.Errorf("12 sessions all on %v, want them spread", used)
			}
		})
	}
}

// TestPoolBatching: with batching on, a pool of three one-slot replicas
// runs three batches at once (the queue's slots are the pool's), each to
// a replica the pool picks, and every replica takes batches.
func TestPoolBatching(t *testing.T) {
	var addrs []string
	for range 3 {
		addrs = append(addrs, startSim(t).grpc)
	}
	gate := startProxy(t, strings.Join(addrs, ","), "--batching", "adaptive", "--batch-models", "resnet50", "--batch-slots", "1")
	load := startPoolLoad(t, gate.grpc, 12)
	defer load.stop()
	slots := func() int {
		_, body := httpGet(t, "http://"+gate.admin+"/api/v1/batching")
		var doc struct {
			Models []struct {
				Model  string
				Queues []struct {
					Slots   int    `json:"slots"`
					Batches uint64 `json:"batches"`
				} `json:"queues"`
			}
		}
		if err := json.Unmarshal([]byte(body), &doc); err != nil {
			t.Fatalf("/api/v1/batching: %v", err)
		}
		for _, m := range doc.Models {
			if m.Model == "resnet50" && len(m.Queues) > 0 {
				return m.Queues[0].Slots
			}
		}
		return 0
	}
	waitFor(t, 30*time.Second, "the resnet50 queue with the pool's 3 slots", func() bool { return slots() == 3 })
	during := callsDuring(t, gate.admin, 2*time.Second)
	t.Logf("batches per replica in 2 s: %v", during)
	for _, a := range addrs {
		if during[a] == 0 {
			t.Errorf("replica %s took no batch", a)
		}
	}
	if n := load.failed.Load(); n > 0 {
		t.Errorf("%d calls failed (first: %v)", n, load.firstErr.Load())
	}
}
