package proxy

import (
	"context"
	"errors"
	"math/bits"
	"strconv"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	"github.com/infergate/infergate/budget"
	"github.com/infergate/infergate/proto/wire"
	"github.com/infergate/infergate/release"
)

// A release is a decision at the pick (package release): a served call
// of a model with a release is split once, before anything else sees it
// (chooseRelease), so routing, breakers, the batcher and flow control all
// see the version it goes to, and a batch holds one version's calls. The
// rest happens where the call's answer is written (reply: settle, then
// the shadow copy, shadow.go) and where it ends (serveCall: observe).

// releaseCall is one call of a model with a release, judged by it.
type releaseCall struct {
	p      *Proxy
	choice release.Choice
	// model and version are what the client asked for; home is the
	// director's upstream, where a target naming no upstream goes.
	model, version string
	home           *Upstream
	// answered is the response header's value (HeaderVersion) naming the
	// target that answered.
	answered string
	// c is the call, set once it exists (unary).
	c *call
	// rows is the request's batch rows (its size class), set at reply.
	rows int64
	// retried: the candidate failed before answering and the stable
	// target answered; the call's total then times neither alone.
	retried bool
}

// reasonReleaseStable is why a candidate's call is sent to the stable
// target (its trace span).
const reasonReleaseStable = "release_stable"

// chooseRelease splits a call of model (the client's target) when it has
// a release, and rewrites req once to the target chosen. It returns the
// call's release state (nil: no release, or the client named its own
// version), the upstream it goes to and its request.
func (p *Proxy) chooseRelease(ctx context.Context, kind wire.TargetKind, up *Upstream, req *Frame, model, version string) (*releaseCall, *Upstream, *Frame, error) {
	rt := p.releases.Route(model)
	if rt == nil {
		return nil, up, req, nil
	}
	var key []byte
	if h := rt.Sticky(); h == release.StickySequence {
		if kind == wire.KServeTarget {
			key = []byte(wire.SequenceOf(req.Bytes()).ID)
		}
	} else if h != "" {
		if v := metadata.ValueFromIncomingContext(ctx, h); len(v) > 0 {
			key = []byte(v[0])
		}
	}
	ch := rt.Choose(key, version != "")
	if ch.Release == nil {
		return nil, up, req, nil
	}
	rc := &releaseCall{p: p, choice: ch, model: model, version: version, home: up}
	t, err := rc.target(ch.Target)
	if err != nil {
		return nil, up, req, err
	}
	rc.answered = versionHeader(ch.Target, t)
	if t.rewrite {
		b, err := rewriteTarget(kind, req.Bytes(), t.model, t.version)
		if err != nil {
			return nil, up, req, &rewriteError{model: t.model, err: err}
		}
		req.Free()
		req = NewFrame(b)
	}
	return rc, t.up, req, nil
}

// target is where a release's target sends the call: a version or
// another model (rewritten) on the director's upstream, or the client's
// model on another upstream. An upstream the proxy does not know is an
// error, never a silent send to the director's.
func (r *releaseCall) target(t *release.Target) (target, error) {
	tg := target{up: r.home, model: r.model, version: r.version}
	if t == nil {
		return tg, nil
	}
	// Each part a target names replaces the client's: another model
	// (its version the target's, or the server's default), a version,
	// another upstream.
	if t.Model != "" {
		tg.model, tg.version, tg.rewrite = t.Model, "", true
	}
	if t.Version != "" {
		tg.version, tg.rewrite = t.Version, true
	}
	if t.Upstream != "" {
		if tg.up = r.p.upstreamNamed(t.Upstream); tg.up == nil {
			return tg, &directorError{method: r.model, err: errors.New("release target: no upstream named " + strconv.Quote(t.Upstream))}
		}
	}
	return tg, nil
}

// upstreamNamed is the director's or the router's upstream named name;
// nil if none is.
func (p *Proxy) upstreamNamed(name string) *Upstream {
	if fd, ok := p.director.(fixedDirector); ok && fd.fixed().Name() == name {
		return fd.fixed()
	}
	if p.router != nil {
		for _, u := range p.router.Upstreams() {
			if up, ok := u.(*Upstream); ok && up.Name() == name {
				return up
			}
		}
	}
	return nil
}

// versionHeader is the HeaderVersion value of target t (resolved as tg):
// its version, its model (model:version), or its upstream.
func versionHeader(t *release.Target, tg target) string {
	switch {
	case t == nil || t.Version != "":
		return tg.version
	case t.Model != "" && tg.version != "":
		return tg.model + ":" + tg.version
	case t.Model != "":
		return tg.model
	}
	return t.Upstream
}

// settle is what reply asks before it writes a: a candidate's call that
// failed before the model answered (unavailable, not found, refused
// before it was sent) goes once to the stable target, so nothing is
// lost, and a candidate the server no longer holds rolls the release
// back. It returns the stable target's result and upstream when it sent
// the call there (resent).
func (r *releaseCall) settle(a attemptResult, up *Upstream) (_ attemptResult, _ *Upstream, resent bool) {
	c := r.c
	if r.choice.Version != release.Candidate || a.err == nil || c == nil || c.ctx.Err() != nil {
		return a, up, false
	}
	code := codeOf(a.err)
	notFound := code == codes.NotFound && fromServer(a.err)
	if !notFound && !a.queueFull && code != codes.Unavailable {
		return a, up, false
	}
	rel := r.choice.Release
	rel.Observe(release.Candidate, sizeClass(r.rows), 0, false)
	r.retried = true
	if notFound {
		_, _ = r.p.releases.Rollback(r.model, "the candidate was not found on the server")
	}
	// Only an UNAVAILABLE may have run on the model: a model that must not
	// run twice is not sent again after one.
	if code == codes.Unavailable && (c.once || !rel.Spec().IsIdempotent()) {
		return a, up, false
	}
	if r.p.router != nil && !r.p.router.Budget().Take() {
		return a, up, false
	}
	st := rel.Spec().Stable
	t, err := r.target(&st)
	if err != nil {
		return a, up, false
	}
	t.rewrite = true // from the candidate's request back to the client's model
	if a.resp != nil {
		a.resp.Free()
	}
	b := c.attempt(c.ctx, t, reasonReleaseStable)
	r.choice.Version, r.answered = release.Stable, versionHeader(&st, t)
	return b, t.up, true
}

// fromServer says the model server itself sent err's status.
func fromServer(err error) bool {
	var up *upstreamError
	return errors.As(err, &up) && up.fromUpstream
}

// observe feeds the release the call's outcome when it ends: the side it
// went to, its size class, its total time at the proxy and whether the
// server or the path failed it (ctx is the client's).
func (r *releaseCall) observe(ctx context.Context, total time.Duration, err error, rows int64) {
	if r.retried {
		return // the candidate's failure was observed; the stable answer's time includes it
	}
	r.choice.Release.Observe(r.choice.Version, sizeClass(rows), total, !releaseFailed(ctx, err))
}

// releaseFailed says whether a call's error counts against the version
// it went to: what the server or the path caused, not what the client
// did (a bad request, its cancellation, its own short deadline) nor the
// proxy's refusals before the call reached the version.
func releaseFailed(ctx context.Context, err error) bool {
	if err == nil {
		return false
	}
	var (
		cl  *clientError
		inf *inFlightError
		bud *budget.Error
	)
	if errors.As(err, &cl) || errors.As(err, &inf) || errors.As(err, &bud) || errors.Is(err, errNoRequest) {
		return false
	}
	switch codeOf(err) {
	case codes.OK, codes.Canceled, codes.InvalidArgument, codes.AlreadyExists, codes.PermissionDenied,
		codes.FailedPrecondition, codes.OutOfRange, codes.Unauthenticated:
		return false
	case codes.DeadlineExceeded:
		return !clientDeadlineRanOut(ctx, err)
	}
	return true
}

// sizeClass is a call's input-size class: the bit length of its rows
// less one (1 row: 0; 2-3: 1; 4-7: 2; ...). RowsClassName names it.
func sizeClass(rows int64) int {
	if rows <= 1 {
		return 0
	}
	return bits.Len64(uint64(rows)) - 1
}

// RowsClassName names the proxy's input-size classes for the evidence
// ("1 row", "2-3 rows", "4-7 rows", ...): give it to
// release.WithClassNames.
func RowsClassName(class int) string {
	if class <= 0 {
		return "1 row"
	}
	lo := int64(1) << class
	if class >= release.MaxClasses-1 {
		return strconv.FormatInt(lo, 10) + "+ rows"
	}
	return strconv.FormatInt(lo, 10) + "-" + strconv.FormatInt(2*lo-1, 10) + " rows"
}
