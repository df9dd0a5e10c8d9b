package integration

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"

	"github.com/infergate/infergate/proto/kservepb"
)

// TestBatchingHeaders is docs/batching.md's header table under batching: 20
// callers at once, each with its own x-request-id and a shared x-team,
// half of them with tenant a and half with tenant b (a key header).
// Every caller's request log line has its own request id and the id of
// the batch its answer came from; the server gets, on each merged call,
// the headers its callers share and x-infergate-batch-id naming that
// batch, never a mix of tenants, and no caller's request id.
func TestBatchingHeaders(t *testing.T) {
	e := newEnv(t, "--batching", "static", "--batch-models", "resnet50", "--batch-max-size", "10",
		"--batch-max-delay", "5s", "--batch-key-headers", "x-tenant", "--log-requests", "--log-format", "json")
	kc := kservepb.NewGRPCInferenceServiceClient(dial(t, e.gate.grpc))
	ctx := testCtx(t)
	const callers = 20
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			tenant := []string{"a", "b"}[i%2]
			cctx := metadata.AppendToOutgoingContext(ctx, "x-request-id", fmt.Sprintf("rid-%02d", i),
				"x-tenant", tenant, "x-team", "vision")
			if _, err := kc.ModelInfer(cctx, resnetRequest("resnet50", 1)); err != nil {
				t.Errorf("caller %d: %v", i, err)
			}
		})
	}
	wg.Wait()

	// Each caller's line: its request id and its batch.
	batchOf := map[string]string{}
	line := regexp.MustCompile(`"msg":"call".*`)
	waitFor(t, 10*time.Second, "20 request log lines", func() bool {
		n := 0
		for _, l := range line.FindAllString(e.gate.log.String(), -1) {
			var rec struct {
				RequestID string `json:"request_id"`
				BatchID   uint64 `json:"batch_id"`
			}
			if json.Unmarshal([]byte("{"+l), &rec) == nil && rec.RequestID != "" {
				batchOf[rec.RequestID] = fmt.Sprint(rec.BatchID)
				n++
			}
		}
		return n >= callers
	})
	for i := range callers {
		if id := batchOf[fmt.Sprintf("rid-%02d", i)]; id == "" || id == "0" {
			t.Errorf("caller %d: request log line has no batch id (%q)", i, id)
		}
	}

	// What the server got.
	_, body := httpGet(t, "http://"+e.sim.admin+"/api/v1/requests?model=resnet50")
	var got []struct{ Headers map[string][]string }
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatalf("%v\n%s", err, body)
	}
	if len(got) == 0 || len(got) >= callers {
		t.Fatalf("the server got %d calls for %d callers: nothing was merged", len(got), callers)
	}
	for _, r := range got {
		h := r.Headers
		if len(h["x-infergate-batch-id"]) != 1 || len(h["x-tenant"]) != 1 || len(h["x-team"]) != 1 || h["x-team"][0] != "vision" {
			t.Errorf("merged call's headers %v: want one batch id, one tenant, the shared team", h)
		}
		if len(h["x-request-id"]) != 0 {
			t.Errorf("merged call carries a request id %v: one caller's id on everyone's call", h["x-request-id"])
		}
		// The callers whose log lines name this batch all had this tenant.
		for rid, b := range batchOf {
			var n int
			fmt.Sscanf(rid, "rid-%d", &n)
			if b == h["x-infergate-batch-id"][0] && []string{"a", "b"}[n%2] != h["x-tenant"][0] {
				t.Errorf("%s (tenant %s) rode in batch %s, which carried tenant %s", rid, []string{"a", "b"}[n%2], b, h["x-tenant"][0])
			}
		}
	}
}
