package proxy

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/infergate/infergate/budget"
	"github.com/infergate/infergate/grpcwire"
	"github.com/infergate/infergate/monitor"
	"github.com/infergate/infergate/proto/methods"
	"github.com/infergate/infergate/proto/wire"
	"github.com/infergate/infergate/proxy/h2relay"
)

// The relay's side of the pipeline. The relay (package h2relay) owns the
// client connections; for each unary call it read, Route asks sendWay
// (pipeline.go) how it is sent. Plain calls, the ones that would go to the director's upstream
// as they are and come back as they are, are relayed frame by frame
// instead of crossing two gRPC stacks; Done records them with recordCall and
// the same statuses (statusOf) as any other call. Calls the proxy must
// act on are served on the relay's side (Serve, fastpath_serve.go);
// streams, compressed requests and messages over the relay's size go on
// to the proxy's own grpc.Server exactly as without the relay.

// Relay returns the h2relay server that serves the proxy's fast path in
// front of srv, the proxy's grpc.Server (NewServer). Serve srv on the
// relay's LocalListener, and the client listener with the relay: calls the
// relay does not take go to srv over a socket pair per client connection.
// Register srv's own services before: their calls always go to srv.
func (p *Proxy) Relay(srv *grpc.Server) *h2relay.Server {
	p.relayOnce.Do(func() {
		own := map[string]bool{}
		for name := range srv.GetServiceInfo() {
			own["/"+name+"/"] = true
		}
		p.relay = h2relay.NewServer(relayHandler{p: p, own: own}, h2relay.Options{
			MaxBody:       min(p.maxMsgSize, relayMaxBody),
			MaxMessage:    p.maxMsgSize,
			MaxStreams:    p.frontDoor.MaxConcurrentStreams,
			MaxConns:      p.frontDoor.MaxConnections,
			IdleTimeout:   p.frontDoor.idle(),
			Budget:        p.budget,
			StreamWindow:  transportWindow,
			ConnWindow:    transportConnWindow,
			BufferSize:    relayBuffer,
			MaxHeaderList: relayMaxHeaderList,
			Now:           p.now,
		})
	})
	return p.relay
}

// bufferStats are the byte budget's figures, both paths together.
func (p *Proxy) bufferStats() budget.Stats { return p.budget.Stats() }

const (
	// relayMaxBody is the largest request the relay reads whole; larger
	// ones take the gRPC path (which streams its own way and applies the
	// message size limit).
	relayMaxBody = 64 << 20
	// relayBuffer is each relayed connection's read buffer.
	relayBuffer = 64 << 10
	// relayMaxHeaderList bounds a call's header list: grpc-go's server
	// default (16 MiB) is far more than a gRPC client sends; 8 MiB still
	// passes the longest metadata the tests send (a 1 MiB model name
	// travels in the body).
	relayMaxHeaderList = 8 << 20
)

// relayHandler is the proxy's h2relay.Handler.
type relayHandler struct {
	p *Proxy
	// own holds "/service/" of the services registered on the proxy's
	// grpc.Server, which serves them itself.
	own map[string]bool
}

// relayCall is what sendWay keeps of a forwarded call for Done.
type relayCall struct {
	// h holds what the call took to be sent: its turn, its endpoint.
	h handle
	// upName is the upstream's name when the call was routed: a call in
	// flight when the upstream moves (Upstream.Move) is recorded where it
	// went.
	upName  string
	gauge   *monitor.Gauge
	version string
	bytesIn int64
	feat    monitor.CallFeatures
	// wf is the request's scan, kept for feat.Lazy.
	wf wire.Features
}

func (r relayHandler) Unary(method string) bool {
	if !methods.Lookup(method).Unary {
		return false
	}
	if len(r.own) > 0 {
		if i := strings.LastIndexByte(method, '/'); i > 0 && r.own[method[:i+1]] {
			return false
		}
	}
	return true
}

// Route sends a call the relay read whole where sendWay says:
// forwarded to a Pool, served here (Serve), or handed on to the
// grpc.Server.
func (r relayHandler) Route(c *h2relay.Call) (*h2relay.Pool, bool) {
	p := r.p
	msg, one := c.Message()
	switch w, rc := p.sendWay(c, one, msg, int64(len(msg)), "", ""); w {
	case wayForward:
		p.forwarded.Add(1)
		return p.relayPool(rc.h.up, rc.h.ep), false
	case wayServe:
		p.served.Add(1)
		return nil, true
	}
	p.handedOn.Add(1)
	return nil, false
}

// Scan says which requests name their model where the relay can read it
// as they arrive, and how: proto/wire's scanner of that layout.
func (r relayHandler) Scan(method string) func() h2relay.Scanner {
	switch methods.Lookup(method).Target {
	case wire.KServeTarget:
		return newKServeScanner
	case wire.TFServingTarget:
		return newTFServingScanner
	}
	return nil
}

func newKServeScanner() h2relay.Scanner    { return newTargetScanner(wire.KServeTarget) }
func newTFServingScanner() h2relay.Scanner { return newTargetScanner(wire.TFServingTarget) }

// targetScanner is wire's TargetScanner as the relay's Scanner: its
// unroutable errors are the relay's.
type targetScanner struct{ wire.TargetScanner }

func newTargetScanner(kind wire.TargetKind) *targetScanner {
	s := new(targetScanner)
	s.Reset(kind)
	return s
}

func (s *targetScanner) Feed(chunk []byte) error {
	err := s.TargetScanner.Feed(chunk)
	if err != nil && errors.Is(err, wire.ErrUnroutable) {
		return fmt.Errorf("%w: %w", h2relay.ErrUnroutable, err)
	}
	return err
}

// RouteEarly forwards a big request as it arrives when sendWay says to
// forward it; anything else (batching, a route, serving it) needs it
// whole, and Route decides then.
func (r relayHandler) RouteEarly(c *h2relay.Call, model, version string) *h2relay.Pool {
	var size int64
	var first []byte // the message's first bytes: its features are Partial
	if _, n, ok := grpcwire.ReadPrefix(c.Body); ok {
		size = int64(n)
		first = c.Body[grpcwire.PrefixLen:min(len(c.Body), grpcwire.PrefixLen+n)]
	}
	w, rc := r.p.sendWay(c, true, first, size, model, version)
	if w != wayForward {
		return nil
	}
	r.p.forwarded.Add(1)
	return r.p.relayPool(rc.h.up, rc.h.ep)
}

// relayEntry is the relay's pools to an upstream's endpoints, for one
// set of them (set): replaced when the set changes (Upstream.Move).
type relayEntry struct {
	set   any // the upstream's pool.Members
	pools map[*Endpoint]*h2relay.Pool
}

// relayPool returns the relay's pool to endpoint e of up. The relay
// (whose map is behind a lock) is asked once per endpoint, and again
// after up's endpoints changed.
func (p *Proxy) relayPool(up *Upstream, e *Endpoint) *h2relay.Pool {
	if v, ok := p.relayPools.Load(up); ok {
		if set, _ := up.Members(); v.(*relayEntry).set == set {
			en := v.(*relayEntry)
			if pool := en.pools[e]; pool != nil {
				return pool
			}
		}
	}
	return p.newRelayPools(up, e)
}

// newRelayPools makes up's entry hold a pool to each endpoint of its
// current set, keeping the pools of endpoints still there and draining
// the others: calls already sent there finish on their connections,
// which then close. It returns e's pool.
func (p *Proxy) newRelayPools(up *Upstream, e *Endpoint) *h2relay.Pool {
	p.relayMu.Lock()
	defer p.relayMu.Unlock()
	set, list := up.Members()
	var old *relayEntry
	if v, ok := p.relayPools.Load(up); ok {
		old = v.(*relayEntry)
		if pool := old.pools[e]; pool != nil && old.set == set {
			return pool
		}
	}
	next := &relayEntry{set: set, pools: make(map[*Endpoint]*h2relay.Pool, len(list))}
	byAddr := map[string]*h2relay.Pool{}
	if old != nil {
		for oe, pool := range old.pools {
			byAddr[oe.RelayAddr()] = pool
		}
	}
	for _, x := range list {
		pool := byAddr[x.RelayAddr()]
		if pool == nil {
			pool = p.relay.Pool(x.RelayAddr(), up.relayConns)
		}
		next.pools[x] = pool
		delete(byAddr, x.RelayAddr())
	}
	pool := next.pools[e]
	if pool == nil {
		// e left the set between the pick and now (a Move): the call
		// goes where the operator pointed the upstream last.
		pool = next.pools[list[0]]
	}
	p.relayPools.Store(up, next)
	for _, old := range byAddr {
		p.relay.DrainPool(old)
	}
	return pool
}

// Done records a relayed call as recordCall records every call, and returns
// the status the client gets when the relay ended the call itself.
func (r relayHandler) Done(c *h2relay.Call, res *h2relay.Result) (codes.Code, string) {
	p := r.p
	rc := c.Data.(*relayCall)
	p.leave()
	if rc.gauge != nil {
		rc.gauge.Dec()
	}
	rc.h.done(relaySent(c, res), res.Upstream, res.Err == nil && res.Status == codes.OK)
	ctx := context.Context(relayContext{deadline: c.Deadline})
	if p.reqLog != nil {
		md, _ := relayMetadata(c)
		ctx = metadata.NewIncomingContext(ctx, md)
	}
	o := outcome{upstream: res.Upstream, bytesIn: rc.bytesIn, bytesOut: max(res.BytesOut-5, 0),
		model: rc.h.model, version: rc.version, upName: rc.upName, feat: rc.feat, attempts: 1}
	switch e := res.Err; {
	case e == nil && res.Status == codes.OK:
	case e == nil:
		o.err = &upstreamError{upstream: rc.upName, fromUpstream: true, err: status.Error(res.Status, res.Message)}
	case e.Kind == h2relay.ErrTargetChanged:
		o.err = status.Error(codes.InvalidArgument, e.Msg)
	case e.Kind == h2relay.ErrTimeout:
		// The relay's timer for the proxy's own deadline: the verdict
		// below names it; the upstream did not fail.
		o.err = status.Error(e.Code, e.Msg)
	case e.Kind == h2relay.ErrClientGone:
		code := codes.Canceled
		if !c.Deadline.IsZero() && !time.Now().Before(c.Deadline) {
			code = codes.DeadlineExceeded
		}
		o.err = &upstreamError{upstream: rc.upName, err: status.Error(code, e.Msg)}
	default:
		o.err = p.upstreamFailed(ctx, rc.h.up, c.Method, status.Error(e.Code, e.Msg), res.Answered)
	}
	clientGone := res.Err != nil && res.Err.Kind == h2relay.ErrClientGone
	o.err = p.timeoutVerdict(res.TimeoutAt, time.Now(), clientGone, o.err)
	st := status.Convert(p.recordCall(ctx, nil, c.Start, c.Method, rc.upName, o))
	return st.Code(), st.Message()
}

// relaySent is what a relayed call's result says of its endpoint.
func relaySent(c *h2relay.Call, res *h2relay.Result) sent {
	now := time.Now()
	s := sent{at: now, took: res.Upstream, code: res.Status, fromUpstream: true,
		callEnded: !c.Deadline.IsZero() && !now.Before(c.Deadline)}
	if e := res.Err; e != nil {
		s.code, s.fromUpstream = e.Code, res.Answered
		if e.Kind == h2relay.ErrClientGone || e.Kind == h2relay.ErrTimeout || e.Kind == h2relay.ErrTargetChanged {
			// The endpoint is not in question.
			s.code, s.fromUpstream = codes.Canceled, true
		}
	}
	return s
}

// Refused records a call the relay answered itself, as recordCall records
// every call.
func (r relayHandler) Refused(c *h2relay.Call, code codes.Code, msg string) {
	p := r.p
	o := outcome{err: status.Error(code, msg)}
	// The first message says the model, of a body of two too.
	if msg, ok := grpcwire.FirstMessage(c.Body); ok {
		o.model, o.version = bytesTarget(methods.Lookup(c.Method).Target, msg)
		o.bytesIn = int64(len(msg))
	}
	upName := ""
	if fd, ok := p.director.(fixedDirector); ok {
		upName = fd.fixed().Name()
	}
	_ = p.recordCall(relayContext{deadline: c.Deadline}, nil, c.Start, c.Method, upName, o)
}

// bytesTarget is frameTarget for a request held in one slice.
func bytesTarget(kind wire.TargetKind, msg []byte) (model, version string) {
	var err error
	switch kind {
	case 0:
		return "", ""
	case wire.KServeTarget:
		model, version, err = wire.ModelInferTarget(msg)
	default:
		model, version, err = wire.PredictTarget(msg)
	}
	if err != nil {
		return "", ""
	}
	return model, version
}

// contentSubtypeOf is the call's content-subtype ("" for application/grpc).
func contentSubtypeOf(c *h2relay.Call) string {
	for _, f := range c.Header {
		if f.Name == "content-type" {
			return grpcwire.ContentSubtype(f.Value)
		}
	}
	return ""
}

// relayMetadata is the call's metadata as grpc-go's server makes it
// (grpcwire.ServerMetadataKey), binary values decoded from base64.
// A binary value that is not base64 is left out and reported, as grpc-go's
// server refuses such a call.
func relayMetadata(c *h2relay.Call) (metadata.MD, error) {
	var bad error
	md := make(metadata.MD, len(c.Header))
	for _, f := range c.Header {
		k, v := strings.ToLower(f.Name), f.Value
		switch {
		case !grpcwire.ServerMetadataKey(k):
			continue
		case strings.HasSuffix(k, "-bin"):
			b, err := grpcwire.DecodeBinHeader(v)
			if err != nil {
				if bad == nil {
					bad = fmt.Errorf("malformed binary metadata %q in header %q: %v", v, k, err)
				}
				continue
			}
			v = string(b)
		}
		md[k] = append(md[k], v)
	}
	return md, bad
}

// relayContext stands in for a relayed call's server context where recordCall
// and callClass read one: its deadline, and whether it ran out.
type relayContext struct {
	context.Context
	deadline time.Time
}

func (c relayContext) Deadline() (time.Time, bool) { return c.deadline, !c.deadline.IsZero() }

func (c relayContext) Err() error {
	if !c.deadline.IsZero() && !time.Now().Before(c.deadline) {
		return context.DeadlineExceeded
	}
	return nil
}

func (c relayContext) Value(key any) any {
	if c.Context == nil {
		return nil
	}
	return c.Context.Value(key)
}

func (c relayContext) Done() <-chan struct{} { return nil }
