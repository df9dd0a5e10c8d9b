package proxy

import (
	"context"
	"slices"
	"time"

	"google.golang.org/grpc/metadata"

	"github.com/infergate/infergate/proto/methods"
	"github.com/infergate/infergate/proto/tensors"
	"github.com/infergate/infergate/proto/wire"
	"github.com/infergate/infergate/release"
)

// A shadow copy is the cheapest call in the proxy: sent after the
// client's answer went out, on its own goroutine, only if the byte budget
// and the target's flow-control gate have room at once (skipped, never
// queued, otherwise), never recorded as a client's call, and its answer
// compared with the client's off the call path.

// shadowWait bounds a copy whose client sent no deadline.
const shadowWait = 5 * time.Second

// shadow sends a copy of the call to the choice's shadow target and
// compares the answer with stable, the client's (already sent; shadow
// keeps it and the request from the buffer pools). It never waits.
func (r *releaseCall) shadow(stable *Frame) {
	p, c := r.p, r.c
	rel := r.choice.Release
	st := *r.choice.Shadow
	if st == (release.Target{}) {
		st = rel.Spec().Candidate // a shadow without a target copies to the candidate
	}
	t, err := r.target(&st)
	dl, hasDeadline := c.ctx.Deadline()
	wait := shadowWait
	if hasDeadline {
		wait = min(wait, time.Until(dl))
	}
	n := int64(c.req.Len() + stable.Len())
	if err != nil || wait <= 0 || !p.budget.TryTake(n) {
		p.shadowSkipped.Add(1)
		return
	}
	x := new(exchange)
	x.h = handle{p: p, up: t.up, model: t.model}
	if cfg := p.flow.on(); cfg != nil && methods.IsInference(c.method) {
		if g := t.up.gate(cfg, t.model); g != nil {
			md, _ := metadata.FromIncomingContext(c.ctx)
			x.h.fc = cfg.flowCall(md, nil, c.req.Bytes(), dl)
			if !g.TryAcquire(x.h.fc) {
				p.budget.GiveBack(n)
				p.shadowSkipped.Add(1)
				return
			}
			x.h.gate = g
		}
	}
	x.turned = true // its turn, taken above or needed by none: invoke gives it back
	c.keepReq.Store(true)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.ctx), wait)
	p.shadows.Add(1)
	go func() {
		defer p.shadows.Done()
		defer cancel()
		defer p.budget.GiveBack(n)
		r.runShadow(ctx, t, x, stable)
	}()
}

// runShadow makes the copy's one upstream call, observes its latency as
// the candidate's and its agreement with the stable answer.
func (r *releaseCall) runShadow(ctx context.Context, t target, x *exchange, stable *Frame) {
	c, rel := r.c, r.choice.Release
	b, err := rewriteTarget(c.kind, c.req.Bytes(), t.model, t.version)
	if err != nil {
		x.h.done(sent{}, 0, false)
		return
	}
	t0 := time.Now()
	_, err = r.p.invoke(ctx, t.up, c.method, NewFrame(b), x, c.subtype)
	took := time.Since(t0)
	rel.Observe(release.Candidate, sizeClass(r.rows), took, !releaseFailed(ctx, err))
	if err != nil {
		return
	}
	r.p.shadowCompared.Add(1)
	sh := rel.Spec().Shadow
	rel.ObserveShadow(sameAnswer(c.kind, stable.Bytes(), x.resp.Bytes(), sh.Compare == release.CompareTop1, sh.Tolerance))
	x.resp.Free()
}

// sameAnswer says whether two serialized answers of one request agree:
// every output by name, the top class of each row when top1 and the
// output looks like a classifier's ([rows, classes], classes > 1), every
// value within tol otherwise. Answers that cannot be read disagree.
func sameAnswer(kind wire.TargetKind, a, b []byte, top1 bool, tol release.Tolerance) bool {
	tfs := kind == wire.TFServingTarget
	ta, erra := tensors.Decode(tfs, a)
	tb, errb := tensors.Decode(tfs, b)
	if erra != nil || errb != nil || len(ta) != len(tb) {
		return false
	}
	for _, x := range ta {
		i := slices.IndexFunc(tb, func(y tensors.Tensor) bool { return y.Name == x.Name })
		if i < 0 || !slices.Equal(x.Shape, tb[i].Shape) {
			return false
		}
		y := tb[i]
		if n := len(x.Shape); top1 && n >= 2 && x.Shape[n-1] > 1 {
			if agree, rows := release.Top1(x.Values, y.Values, int(x.Shape[n-1])); agree != rows {
				return false
			}
		} else if !release.CompareTensors(x.Values, y.Values, tol).Agree() {
			return false
		}
	}
	return true
}
