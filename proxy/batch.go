package proxy

import (
	"context"
	"strconv"

	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/metadata"

	"github.com/infergate/infergate/batcher"
	"github.com/infergate/infergate/grpcwire"
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

// invoker returns the batcher.Invoker of up, built once.
func (p *Proxy) invoker(up *Upstream) batcher.Invoker {
	if inv, ok := p.invokers.Load(up); ok {
		return inv.(batcher.Invoker)
	}
	inv, _ := p.invokers.LoadOrStore(up, p.newInvoker(up))
	return inv.(batcher.Invoker)
}

// newInvoker returns the batcher.Invoker that calls up with raw frames.
// The batcher takes statuses (it retries a batch alone on
// INVALID_ARGUMENT), so the error crosses the status edge here: a status
// the upstream sent passes unchanged; one the proxy's own client made
// says which upstream failed.
func (p *Proxy) newInvoker(up *Upstream) batcher.Invoker {
	return func(ctx context.Context, method string, req []byte, md metadata.MD) (_ []byte, header, trailer metadata.MD, err error) {
		if b := batcher.BatchOf(ctx); b != nil {
			// The merged call carries the headers its callers share; what
			// differs (a request id, a trace context) stays with each
			// caller (its span, its request log line), and this names the
			// batch those point to. md may be a caller's own (a batch of
			// one): copied once, here, before it is written.
			md = md.Copy()
			if md == nil {
				md = metadata.MD{}
			}
			md.Set(grpcwire.HeaderBatchID, strconv.FormatUint(b.ID, 10))
			if p.tracing != nil {
				var span trace.Span
				ctx, span = p.tracing.startBatch(ctx, method, up, b, md)
				defer func() { p.tracing.endClient(span, err, 0, nil) }()
			}
		}
		x := new(exchange)
		_, err = p.invoke(metadata.NewOutgoingContext(ctx, md), up, method, NewFrame(req), x, nil)
		if err != nil {
			return nil, x.header, x.trailer, statusOf(err)
		}
		// Not freed: the split responses may alias these bytes after this
		// returns, so the garbage collector reclaims them, not gRPC's pool.
		return x.resp.Bytes(), x.header, x.trailer, nil
	}
}
