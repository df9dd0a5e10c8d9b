package proxy

import (
	"context"
	"errors"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/infergate/infergate/batcher"
)

// Batcher is what the proxy needs of a batcher; *batcher.Batcher is one.
// Handles says cheaply whether calls of method to model may be batched; Do
// takes one such call and returns its own response, or
// batcher.ErrNotBatched when the proxy should forward it alone (see
// batcher.Batcher.Do for its errors, which the proxy turns into statuses).
type Batcher interface {
	Handles(method, model string) bool
	Do(ctx context.Context, r batcher.Request) (batcher.Result, error)
}

var _ Batcher = (*batcher.Batcher)(nil)

// WithBatcher hands unary ModelInfer and Predict calls of the models b
// batches to b instead of forwarding each alone. Nil (a nil
// *batcher.Batcher included), the default, batches nothing and costs
// nothing on the path. The proxy does not close b: close it after the
// server has stopped.
func WithBatcher(b Batcher) Option {
	return optionFunc(func(o *options) {
		if bb, ok := b.(*batcher.Batcher); ok && bb == nil {
			b = nil
		}
		o.batcher = b
	})
}

// batch hands a received unary request to the batcher. It reports false
// when the batcher does not take it (batcher.ErrNotBatched); the caller then
// forwards req itself. The request frame is not freed on this path: the
// batcher may still read its bytes after a caller gave up, so the garbage
// collector reclaims it instead of gRPC's pool.
func (p *Proxy) batch(ctx context.Context, up *Upstream, method string, req *Frame,
	ss grpc.ServerStream, o outcome) (outcome, bool) {
	md, _ := metadata.FromOutgoingContext(ctx)
	res, err := p.batcher.Do(ctx, batcher.Request{
		Upstream: up.name,
		Invoke:   p.invoker(up),
		Method:   method,
		Model:    o.model,
		Version:  o.version,
		Payload:  req.Bytes(),
		MD:       md,
	})
	if errors.Is(err, batcher.ErrNotBatched) {
		return o, false
	}
	o.queue, o.upstream = res.Queue, res.Upstream
	if res.Header != nil {
		_ = ss.SetHeader(res.Header)
	}
	if len(res.Trailer) > 0 {
		ss.SetTrailer(res.Trailer)
	}
	if err != nil {
		o.err = batchStatus(err)
		return o, true
	}
	o.bytesOut = int64(len(res.Payload))
	o.err = ss.SendMsg(NewFrame(res.Payload))
	return o, true
}

// invoker returns the batcher.Invoker of up, built once.
func (p *Proxy) invoker(up *Upstream) batcher.Invoker {
	if inv, ok := p.invokers.Load(up); ok {
		return inv.(batcher.Invoker)
	}
	inv, _ := p.invokers.LoadOrStore(up, p.newInvoker(up))
	return inv.(batcher.Invoker)
}

// newInvoker returns the batcher.Invoker that calls up with raw frames. A
// status the upstream sent passes unchanged; one the proxy's own client
// made says which upstream failed.
func (p *Proxy) newInvoker(up *Upstream) batcher.Invoker {
	return func(ctx context.Context, method string, req []byte, md metadata.MD) ([]byte, metadata.MD, metadata.MD, error) {
		resp := new(Frame)
		header, trailer, _, err := p.invoke(metadata.NewOutgoingContext(ctx, md), up, method, NewFrame(req), resp, p.callOpts)
		if err != nil {
			return nil, header, trailer, err
		}
		// Not freed: the split responses may alias these bytes after this
		// returns, so the garbage collector reclaims them, not gRPC's pool.
		return resp.Bytes(), header, trailer, nil
	}
}
