package proxy

import (
	"context"
	"time"

	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	"github.com/infergate/infergate/flow"
	"github.com/infergate/infergate/proxy/flowstats"
	"github.com/infergate/infergate/proxy/pool"
)

// The endpoint handle. Whatever one attempt takes from an upstream to be
// sent (its flow-control turn, an endpoint's slot) is taken through a
// handle and given back by it, as grpc-go's picker returns its own Done
// with each pick and tower's load balancer its handle: both kinds of
// attempt (forwarded as bytes, sent through the gRPC client), a batched
// caller's turn, streams and the director's own calls hold one, and no
// other code pairs an acquire with a release. Each part is given back
// exactly once, whatever path the call ends on (an answer, an error, the
// client gone, its deadline, a hedge that lost, a retry): done is safe to
// call again, and gives back only what is still held.
//
// A handle lives inside what the call already allocated (the exchange,
// the relayed call): it costs no allocation of its own.
type handle struct {
	p  *Proxy
	up *Upstream
	// ep is the endpoint held (nil: none, or given back); model the
	// call's ("" none known), for the endpoint's per-model state.
	ep    *Endpoint
	model string
	// pinned: ep is the one a sequence is pinned to; the call must go
	// nowhere else.
	pinned bool

	// The flow-control turn: gate nil for none held. fc is who the call
	// is for, waited whether it queued, wait how long.
	gate   *flow.Gate
	fc     flow.Call
	waited bool
	wait   time.Duration
}

// sent is how one send on a handle's endpoint ended, as the endpoint's
// evidence.
type sent struct {
	// at is when it ended, took how long the endpoint had it.
	at   time.Time
	took time.Duration
	code codes.Code
	// fromUpstream: the replica itself answered (a status it sent, or
	// headers).
	fromUpstream bool
	// callEnded: the call's own end (the client left, its deadline)
	// ended it: no verdict on the endpoint.
	callEnded bool
}

// noVerdict is a send that says nothing of its endpoint: a stream's
// opening, a call never sent.
func noVerdict(at time.Time) sent { return sent{at: at, code: codes.Canceled, callEnded: true} }

// pickEndpoint holds an endpoint of h.up for a call of method whose
// request is msg, whose affinity header carries key ("" none), leaving
// avoid out unless it is the only choice (a hedge leaves its primary's
// out; nil none): the sequence's endpoint for a call of a pinned
// sequence, the key's for a keyed one, the picker's otherwise. It fails
// only for a sequence that cannot be kept (its replica gone, an id too
// long).
func (h *handle) pickEndpoint(now time.Time, method string, msg []byte, key string, avoid *Endpoint) error {
	u := h.up
	if avoid != nil || !u.Pooled(method) {
		h.ep = u.Pick(now.UnixNano(), h.model, avoid)
	} else {
		e, pinned, err := u.PickCall(now, method, h.model, msg, key)
		if err != nil {
			return err
		}
		h.ep, h.pinned = e, pinned
	}
	u.Begin(h.ep, h.model)
	return nil
}

// holdEndpoint is a handle on the endpoint the picker chooses now for a
// call of model ("" none), for calls that are neither sequences nor
// keyed (a stream, the director's own calls).
func (u *Upstream) holdEndpoint(now time.Time, model string) handle {
	h := handle{up: u, model: model, ep: u.Pick(now.UnixNano(), model, nil)}
	u.Begin(h.ep, model)
	return h
}

// moveTo gives back the endpoint held with s as its evidence and holds
// e instead (a call sent again to another replica, within its turn).
func (h *handle) moveTo(e *Endpoint, s sent) {
	h.releaseEndpoint(s)
	h.ep = e
	h.up.Begin(e, h.model)
}

// releaseEndpoint gives back the endpoint held, s its evidence: its
// slot, its latency sample or failure, and, when it answered NOT_FOUND,
// the mark that it lacks the model, so the next calls of the model go to
// replicas that hold it.
func (h *handle) releaseEndpoint(s sent) {
	e := h.ep
	if e == nil {
		return
	}
	h.ep = nil
	h.up.Release(e, h.model, s.at, s.took, pool.VerdictOf(s.code, s.fromUpstream, s.callEnded))
	if h.model != "" && pool.NotFound(s.code, s.fromUpstream) {
		e.MarkAbsent(h.model, s.at.UnixNano())
	}
}

// done gives back all that h still holds: the endpoint with s as its
// evidence, and the turn, counted for its tenant with the call's time
// upstream (took, the sends together) and whether it was answered (ok).
func (h *handle) done(s sent, took time.Duration, ok bool) {
	h.releaseEndpoint(s)
	g := h.gate
	if g == nil {
		return
	}
	h.gate = nil
	g.Done(took)
	outcome, answered := flowstats.AtOnce, time.Duration(0)
	if h.waited {
		outcome = flowstats.Waited
	}
	if ok {
		answered = h.wait + took
	}
	h.p.flowStats.Count(h.fc, outcome, h.wait, answered)
}

// abandon gives back all that h holds for a call that is not sent after
// all (the relay serves it instead): the endpoint with no verdict, the
// turn uncounted, as its tenant's call is counted where it is sent.
func (h *handle) abandon(at time.Time) {
	h.releaseEndpoint(noVerdict(at))
	if g := h.gate; g != nil {
		h.gate = nil
		g.Done(0)
	}
}

// waitTurn takes a turn of h.model for a gRPC-path call with ctx and
// request msg, waiting while the model's replicas are full; nothing is
// held when flow control does not order the call. It returns flow
// control's refusal, or the context's error. ownTimeout, when set, is
// the proxy's upstream timeout that stands for the deadline of a call
// that carried none.
func (h *handle) waitTurn(ctx context.Context, msg []byte, ownTimeout time.Duration) error {
	cfg := h.p.flow.on()
	if cfg == nil || h.model == "" {
		return nil
	}
	g := h.up.gate(cfg, h.model)
	if g == nil {
		return nil
	}
	w0 := h.p.now()
	md, _ := metadata.FromIncomingContext(ctx)
	dl, _ := ctx.Deadline()
	h.fc = cfg.flowCall(md, nil, msg, dl)
	waited, err := g.Wait(ctx, h.fc)
	h.waited, h.wait = waited, since(h.p.now, w0)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		h.p.flowStats.Count(h.fc, flowstats.Refused, 0, 0)
		return &flowError{model: h.model, err: err, timeout: ownTimeout}
	}
	h.gate = g
	return nil
}

// tryTurn takes a turn of h.model for a call the relay read (header
// fields hdr, request msg) only if there is room at once; it reports
// false when the call would have to wait. Nothing is held when flow
// control does not order the call.
func (h *handle) tryTurn(cfg *flowConfig, hdr []hpack.HeaderField, msg []byte, deadline time.Time) bool {
	g := h.up.gate(cfg, h.model)
	if g == nil {
		return true
	}
	h.fc = cfg.flowCall(nil, hdr, msg, deadline)
	if !g.TryAcquire(h.fc) {
		return false
	}
	h.gate = g
	return true
}
