package batcher

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"

	"github.com/infergate/infergate/batcher/merge"
	"github.com/infergate/infergate/proto/methods"
)

// fakeCodec batches text requests "key rows id" (e.g. "a 1 r7"); "bad"
// is malformed and "solo" unbatchable. A merged request is "batch id,id,..."
// and the fake upstream answers "resp " plus that; Split gives each item
// "resp <id>".
type fakeCodec struct {
	mu  sync.Mutex
	ids map[*merge.Item]string
}

func newFakeCodec() *fakeCodec { return &fakeCodec{ids: map[*merge.Item]string{}} }

func (f *fakeCodec) Parse(b []byte) (*merge.Item, error) {
	s := string(b)
	switch s {
	case "bad":
		return nil, fmt.Errorf("fake: shape mismatch: %w", merge.ErrInvalid)
	case "solo":
		return nil, fmt.Errorf("fake: sequence: %w", merge.ErrUnbatchable)
	}
	var key, id string
	var rows int
	if _, err := fmt.Sscanf(s, "%s %d %s", &key, &rows, &id); err != nil {
		return nil, fmt.Errorf("fake: %v: %w", err, merge.ErrInvalid)
	}
	it := &merge.Item{Rows: rows, Key: key}
	f.mu.Lock()
	f.ids[it] = id
	f.mu.Unlock()
	return it, nil
}

func (f *fakeCodec) Merge(items []*merge.Item) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ids := make([]string, len(items))
	for i, it := range items {
		ids[i] = f.ids[it]
	}
	return []byte("batch " + strings.Join(ids, ",")), nil
}

func (f *fakeCodec) Split(resp []byte, items []*merge.Item) ([][]byte, error) {
	s, ok := strings.CutPrefix(string(resp), "resp batch ")
	if !ok {
		return nil, fmt.Errorf("fake: %q: %w", resp, merge.ErrSplit)
	}
	ids := strings.Split(s, ",")
	if len(ids) != len(items) {
		return nil, fmt.Errorf("fake: %d parts for %d items: %w", len(ids), len(items), merge.ErrSplit)
	}
	out := make([][]byte, len(ids))
	for i, id := range ids {
		out[i] = []byte("resp " + id)
	}
	return out, nil
}

// upstreamCall is one call the fake upstream received.
type upstreamCall struct {
	req string
	md  metadata.MD
	at  time.Time
	tag any // the call context's callerTag value: set when it is the caller's own
}

// callerTag is a context key tests use to see whose context reached the
// upstream.
type callerTag struct{}

// fakeUpstream records calls and answers them: after latency(rows) of
// (fake) time, with the error err returns, if any. A batched request gets
// "resp batch ...", a single one "resp <id>".
type fakeUpstream struct {
	mu      sync.Mutex
	calls   []upstreamCall
	latency func(rows int) time.Duration
	fail    func(req string) error
	gate    chan struct{} // when set, each call waits for a value
}

func (u *fakeUpstream) invoke(ctx context.Context, method string, req []byte, md metadata.MD) ([]byte, metadata.MD, metadata.MD, error) {
	s := string(req)
	u.mu.Lock()
	u.calls = append(u.calls, upstreamCall{req: s, md: md, at: time.Now(), tag: ctx.Value(callerTag{})})
	lat, fail, gate := u.latency, u.fail, u.gate
	u.mu.Unlock()
	rows := 1
	if ids, ok := strings.CutPrefix(s, "batch "); ok {
		rows = len(strings.Split(ids, ","))
	}
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, nil, nil, ctx.Err()
		}
	}
	if lat != nil {
		time.Sleep(lat(rows))
	}
	hdr, trl := metadata.Pairs("x-upstream", "yes"), metadata.Pairs("x-trailer", "t")
	if fail != nil {
		if err := fail(s); err != nil {
			return nil, hdr, trl, err
		}
	}
	if strings.HasPrefix(s, "batch ") {
		return []byte("resp " + s), hdr, trl, nil
	}
	_, id, _ := strings.Cut(strings.TrimPrefix(s, strings.Fields(s)[0]+" "), " ")
	return []byte("resp " + id), hdr, trl, nil
}

// hold makes every upstream call wait from now until release, which lets
// the calls already waiting through and the later ones pass at once.
func (u *fakeUpstream) hold() (release func()) {
	gate := make(chan struct{})
	u.mu.Lock()
	u.gate = gate
	u.mu.Unlock()
	return func() {
		u.mu.Lock()
		u.gate = nil
		u.mu.Unlock()
		close(gate)
	}
}

// received returns the calls so far.
func (u *fakeUpstream) received() []upstreamCall {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]upstreamCall(nil), u.calls...)
}

// harness is a Batcher for model "m" over a fake codec and upstream.
type harness struct {
	t  *testing.T
	b  *Batcher
	up *fakeUpstream
}

func newHarness(t *testing.T, p Policy, opts ...Option) *harness {
	t.Helper()
	up := &fakeUpstream{}
	b, err := New(Config{Models: map[string]Policy{"m": p}}, append([]Option{WithCodec(methods.ModelInfer, newFakeCodec())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return &harness{t: t, b: b, up: up}
}

// outcome is one finished Do.
type outcome struct {
	res Result
	err error
}

// do calls Do for payload with md.
func (h *harness) do(ctx context.Context, payload string, md metadata.MD) (Result, error) {
	return h.b.Do(ctx, Request{
		Upstream: "up", Invoke: h.up.invoke, Method: methods.ModelInfer,
		Model: "m", Payload: []byte(payload), MD: md,
	})
}

// goDo runs do on a new goroutine and returns where its outcome arrives.
func (h *harness) goDo(ctx context.Context, payload string, md metadata.MD) <-chan outcome {
	ch := make(chan outcome, 1)
	go func() {
		res, err := h.do(ctx, payload, md)
		ch <- outcome{res, err}
	}()
	return ch
}

// stats returns the only queue's stats.
func (h *harness) stats() QueueStats {
	h.t.Helper()
	st := h.b.Stats()
	if len(st) != 1 {
		h.t.Fatalf("%d queues, want 1", len(st))
	}
	return st[0]
}
