package sim

import (
	"context"
	"io"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/infergate/infergate/proto/kservepb"
)

func TestModelStreamInfer(t *testing.T) {
	h := start(t, Config{})
	stream, err := h.ks.ModelStreamInfer(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	a, b := simpleInputs()
	good := simpleRequest(a, b, true)

	// One at a time, so responses are in order.
	good.Id = "first"
	if err := stream.Send(good); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil || resp.ErrorMessage != "" || resp.InferResponse.GetId() != "first" {
		t.Fatalf("first: %v %v", resp, err)
	}
	if got := decodeInt32s(resp.InferResponse.RawOutputContents[0]); got[5] != 6 {
		t.Errorf("OUTPUT0[5] = %d, want 6", got[5])
	}

	bad := simpleRequest(a, b, true)
	bad.ModelName, bad.Id = "nope", "bad"
	if err := stream.Send(bad); err != nil {
		t.Fatal(err)
	}
	resp, err = stream.Recv()
	if err != nil {
		t.Fatalf("bad request broke the stream: %v", err)
	}
	if resp.ErrorMessage != "Request for unknown model: 'nope' is not found" || resp.InferResponse.GetId() != "bad" {
		t.Errorf("bad: %v", resp)
	}

	good.Id = "third"
	if err := stream.Send(good); err != nil {
		t.Fatal(err)
	}
	if resp, err = stream.Recv(); err != nil || resp.ErrorMessage != "" || resp.InferResponse.GetId() != "third" {
		t.Fatalf("third: %v %v", resp, err)
	}

	// Several in flight: every request gets exactly one response.
	ids := []string{"a", "b", "c", "d"}
	for _, id := range ids {
		good.Id = id
		if err := stream.Send(good); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	var got []string
	for {
		resp, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, resp.InferResponse.GetId())
	}
	slices.Sort(got)
	if !slices.Equal(got, ids) {
		t.Errorf("responses %v, want %v", got, ids)
	}
}

// tokenRequest asks llm_stream for n responses (0: the model's default).
func tokenRequest(id string, n int32) *kservepb.ModelInferRequest {
	return &kservepb.ModelInferRequest{ModelName: "llm_stream", Id: id,
		Inputs:           []*kservepb.ModelInferRequest_InferInputTensor{{Name: "max_tokens", Datatype: "INT32", Shape: []int64{1}}},
		RawInputContents: [][]byte{rawInt32s([]int32{n})}}
}

// sleepLog is a Config.Sleep that records what it was asked to wait.
type sleepLog struct {
	mu sync.Mutex
	ds []time.Duration
}

func (l *sleepLog) sleep(ctx context.Context, d time.Duration) error {
	l.mu.Lock()
	l.ds = append(l.ds, d)
	l.mu.Unlock()
	return ctx.Err()
}

func (l *sleepLog) take() []time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.ds
	l.ds = nil
	return out
}

// recvAll reads responses until one is flagged final.
func recvAll(t *testing.T, stream kservepb.GRPCInferenceService_ModelStreamInferClient) []*kservepb.ModelStreamInferResponse {
	t.Helper()
	var out []*kservepb.ModelStreamInferResponse
	for {
		resp, err := stream.Recv()
		if err != nil {
			t.Fatalf("after %d responses: %v", len(out), err)
		}
		out = append(out, resp)
		if resp.GetInferResponse().GetParameters()[FinalParam].GetBoolParam() {
			return out
		}
	}
}

func TestTokenStream(t *testing.T) {
	sl := &sleepLog{}
	h := start(t, Config{Sleep: sl.sleep})
	ctx := t.Context()
	stream, err := h.ks.ModelStreamInfer(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(tokenRequest("r1", 3)); err != nil {
		t.Fatal(err)
	}
	got := recvAll(t, stream)
	if len(got) != 3 {
		t.Fatalf("%d responses, want 3", len(got))
	}
	var lastSent int64
	for i, r := range got {
		ir := r.InferResponse
		p := ir.Parameters
		if r.ErrorMessage != "" || ir.Id != "r1" || decodeInt32s(ir.RawOutputContents[0])[0] != int32(i) || ir.Outputs[0].Name != "token" {
			t.Errorf("response %d: %v", i, r)
		}
		if p[FinalParam].GetBoolParam() != (i == 2) || p[ReceivedParam].GetInt64Param() != got[0].InferResponse.Parameters[ReceivedParam].GetInt64Param() {
			t.Errorf("response %d parameters %v", i, p)
		}
		if s := p[SentParam].GetInt64Param(); s < lastSent || s < p[ReceivedParam].GetInt64Param() {
			t.Errorf("response %d sent at %d, before %d", i, s, lastSent)
		}
		lastSent = p[SentParam].GetInt64Param()
	}
	if d := sl.take(); !slices.Equal(d, []time.Duration{20 * time.Millisecond, 5 * time.Millisecond, 5 * time.Millisecond}) {
		t.Errorf("waits %v, want the 20ms prefill and two 5ms gaps", d)
	}

	// Triton's empty final response, on request; the default count.
	req := tokenRequest("r2", 0)
	req.Parameters = map[string]*kservepb.InferParameter{EmptyFinalParam: boolParam(true)}
	if err := stream.Send(req); err != nil {
		t.Fatal(err)
	}
	got = recvAll(t, stream)
	if last := got[len(got)-1].InferResponse; len(got) != 17 || len(last.Outputs) != 0 || last.Id != "r2" || got[15].InferResponse.Parameters[FinalParam].GetBoolParam() {
		t.Errorf("%d responses, last %v; want 16 and an empty final one", len(got), last)
	}
	sl.take()

	// Faults: a slow first response, stalls between tokens, a slowdown
	// on both; a bad request fails in error_message, flagged final.
	if _, err := h.srv.SetFault(Fault{Model: "llm_stream", DelayMS: 100, StallMS: 50, Slowdown: 2}); err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(tokenRequest("r3", 3)); err != nil {
		t.Fatal(err)
	}
	recvAll(t, stream)
	if d := sl.take(); !slices.Equal(d, []time.Duration{40 * time.Millisecond, 100 * time.Millisecond, 60 * time.Millisecond, 60 * time.Millisecond}) {
		t.Errorf("waits %v, want 40ms prefill, 100ms delay, two 10+50ms gaps", d)
	}
	bad := tokenRequest("r4", 3)
	bad.Inputs[0].Datatype = "FP32"
	if err := stream.Send(bad); err != nil {
		t.Fatal(err)
	}
	if got = recvAll(t, stream); len(got) != 1 || got[0].ErrorMessage == "" || got[0].InferResponse.Id != "r4" {
		t.Errorf("bad request: %v", got)
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != io.EOF {
		t.Fatalf("end of stream: %v", err)
	}

	// ModelInfer is refused as Triton refuses it for a decoupled model.
	_, err = h.ks.ModelInfer(ctx, tokenRequest("u", 1))
	wantCode(t, err, codes.Unimplemented, "decoupled transaction policy")
}

func TestStallFaultFields(t *testing.T) {
	h := start(t, Config{})
	for _, f := range []Fault{{Model: "llm_stream", StallMS: -1}, {Model: "llm_stream", StallMS: 5, StallRate: 1.5}} {
		if _, err := h.srv.SetFault(f); err == nil {
			t.Errorf("fault %+v accepted", f)
		}
	}
	stored, err := h.srv.SetFault(Fault{Model: "llm_stream", StallMS: 5})
	if err != nil || stored.StallRate != 1 {
		t.Errorf("stall_ms alone: %+v, %v; want stall_rate 1", stored, err)
	}
}
