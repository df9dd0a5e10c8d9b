package proxy

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/infergate/infergate/proto/kservepb"
)

func seqRequest(t *testing.T, model string, id int64, start, end bool) []byte {
	t.Helper()
	params := map[string]*kservepb.InferParameter{
		"sequence_id": {ParameterChoice: &kservepb.InferParameter_Int64Param{Int64Param: id}},
	}
	if start {
		params["sequence_start"] = &kservepb.InferParameter{ParameterChoice: &kservepb.InferParameter_BoolParam{BoolParam: true}}
	}
	if end {
		params["sequence_end"] = &kservepb.InferParameter{ParameterChoice: &kservepb.InferParameter_BoolParam{BoolParam: true}}
	}
	b, err := proto.Marshal(&kservepb.ModelInferRequest{ModelName: model, Parameters: params})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Every call of a sequence goes to the endpoint of its first call,
// whatever the picker would choose; other sequences spread; a sequence
// whose endpoint is gone fails with ABORTED and is forgotten, and one
// started again is pinned anew; sequence_end forgets it.
func TestSequencesStayOnTheirReplica(t *testing.T) {
	u := testPool(4, BalanceLatency)
	now := time.Unix(1000, 0)
	call := func(id int64, start, end bool) (*Endpoint, error) {
		e, pinned, err := u.acquireCall(now, "lstm", seqRequest(t, "lstm", id, start, end))
		if err == nil {
			if !pinned {
				t.Fatal("a sequence's call not pinned")
			}
			u.release(e, "", now, time.Millisecond, endpointOK)
		}
		return e, err
	}
	first, _ := call(7, true, false)
	used := map[*Endpoint]bool{}
	for i := range 60 {
		e, err := call(7, false, i == 59)
		if err != nil || e != first {
			t.Fatalf("call %d of sequence 7 went to %v (%v), want %s", i, e, err, first.addr)
		}
		o, _ := call(int64(100+i), true, false)
		used[o] = true
	}
	if len(used) < 2 {
		t.Errorf("60 other sequences all on one replica")
	}
	if _, ok := u.seqs.m[sequenceKey{"lstm", "7"}]; ok {
		t.Error("sequence_end did not forget the sequence")
	}
	// The replica of sequence 8 dies: its next call is refused, not moved.
	e8, _ := call(8, true, false)
	e8.up.Store(false)
	for range 2 {
		if _, err := call(8, false, false); status.Code(err) != codes.Aborted {
			t.Fatalf("sequence on a dead replica: %v, want ABORTED (every call until it starts again)", err)
		}
	}
	if e, err := call(8, true, false); err != nil || e == e8 {
		t.Errorf("sequence 8 started again: %v on %v, want another replica", err, e)
	}
	// A request without a sequence is not pinned.
	if _, pinned, _ := u.acquireCall(now, "lstm", seqRequest(t, "lstm", 0, false, false)); pinned {
		t.Error("a call without a sequence_id was pinned")
	}
}

// A sequence id too long to remember is refused with a clear status, not
// kept (a pool remembers up to 100,000 of them).
func TestSequenceIDTooLong(t *testing.T) {
	u := testPool(2, BalanceLatency)
	params := map[string]*kservepb.InferParameter{
		"sequence_id": {ParameterChoice: &kservepb.InferParameter_StringParam{StringParam: strings.Repeat("x", 1<<20)}},
	}
	b, err := proto.Marshal(&kservepb.ModelInferRequest{ModelName: "lstm", Parameters: params})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := u.acquireCall(time.Unix(1000, 0), "lstm", b); status.Code(err) != codes.InvalidArgument {
		t.Errorf("a 1 MiB sequence_id: %v, want INVALID_ARGUMENT", err)
	}
	if len(u.seqs.m) != 0 {
		t.Errorf("%d sequences remembered", len(u.seqs.m))
	}
}
