package pool

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/infergate/infergate/proto/kservepb"
	"github.com/infergate/infergate/proto/methods"
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
		e, pinned, err := u.acquireCall(now, methods.ModelInfer, "lstm", seqRequest(t, "lstm", id, start, end), "")
		if err == nil {
			if !pinned {
				t.Fatal("a sequence's call not pinned")
			}
			u.release(e, "", now, time.Millisecond, Answered)
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
	if _, pinned, _ := u.acquireCall(now, methods.ModelInfer, "lstm", seqRequest(t, "lstm", 0, false, false), ""); pinned {
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
	if _, _, err := u.acquireCall(time.Unix(1000, 0), methods.ModelInfer, "lstm", b, ""); status.Code(err) != codes.InvalidArgument {
		t.Errorf("a 1 MiB sequence_id: %v, want INVALID_ARGUMENT", err)
	}
	if len(u.seqs.m) != 0 {
		t.Errorf("%d sequences remembered", len(u.seqs.m))
	}
}

// Calls carrying an affinity key stay on one endpoint; keys spread over
// the pool; an endpoint ejected moves its own keys only, and they come
// back with it; another proxy in front of the same replicas maps every
// key the same.
func TestAffinityHeaderKeys(t *testing.T) {
	u, v := testPool(4, BalanceLatency), testPool(4, BalanceLatency)
	now := time.Unix(1000, 0)
	where := func(u *Pool, key string) string {
		e := u.acquireKeyed(now, "", key)
		u.release(e, "", now, time.Millisecond, Answered)
		return e.addr
	}
	first := map[string]string{}
	per := map[string]int{}
	for i := range 1000 {
		k := fmt.Sprintf("session-%d", i)
		first[k] = where(u, k)
		per[first[k]]++
		if again, other := where(u, k), where(v, k); again != first[k] || other != first[k] {
			t.Fatalf("key %s: %s, then %s, and %s on another proxy; want one endpoint", k, first[k], again, other)
		}
	}
	for _, e := range u.Endpoints() {
		if n := per[e.addr]; n < 150 || n > 350 {
			t.Errorf("endpoint %s holds %d of 1000 keys, want about 250", e.addr, n)
		}
	}
	out := u.Endpoints()[2]
	u.eject(out, now, "test")
	moved := 0
	for k, was := range first {
		now := where(u, k)
		switch {
		case was == out.addr && now == out.addr:
			t.Fatalf("key %s still on the ejected endpoint", k)
		case was != out.addr && now != was:
			t.Fatalf("key %s moved from %s to %s though its endpoint is up", k, was, now)
		case now != was:
			moved++
		}
	}
	if moved != per[out.addr] {
		t.Errorf("%d keys moved, want the ejected endpoint's %d", moved, per[out.addr])
	}
	out.ejectedUntil.Store(0)
	for k, was := range first {
		if now := where(u, k); now != was {
			t.Fatalf("key %s on %s after the endpoint came back, want %s", k, now, was)
		}
	}
}
