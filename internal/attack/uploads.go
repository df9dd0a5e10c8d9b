package attack

import (
	"context"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"

	"github.com/infergate/infergate/proto/methods"
)

// BigUploadsParams configures BigUploads.
type BigUploadsParams struct {
	// Callers is the number of callers, each on its own connection; 0
	// means 100.
	Callers int
	// Bytes is each request's size; 0 means 4 MiB.
	Bytes int
	// Model is an identity model; "" means identity_fp32.
	Model string
	// Duration is how long callers start new calls; 0 means 10 s. Calls
	// in flight at the end finish.
	Duration time.Duration
	// CallTimeout is each call's deadline; 0 means 30 s.
	CallTimeout time.Duration
}

// BigUploads is an honest but heavy load: Callers grpc-go clients on as
// many connections, each sending Bytes-byte ModelInfer requests in a loop
// for Duration (Callers x Bytes in flight). Report.OK and Failed count the
// calls, Codes the failures by gRPC code.
func BigUploads(ctx context.Context, addr string, p BigUploadsParams) (*Report, error) {
	callers := p.Callers
	if callers <= 0 {
		callers = 100
	}
	size := p.Bytes
	if size <= 0 {
		size = 4 << 20
	}
	model := p.Model
	if model == "" {
		model = "identity_fp32"
	}
	d := p.Duration
	if d <= 0 {
		d = 10 * time.Second
	}
	callTimeout := p.CallTimeout
	if callTimeout <= 0 {
		callTimeout = 30 * time.Second
	}
	req := marshal(IdentityRequest(model, size))
	limit := 2*len(req) + 1<<20
	conns := make([]*grpc.ClientConn, callers)
	for i := range conns {
		cc, err := grpc.NewClient(addr,
			grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(limit), grpc.MaxCallRecvMsgSize(limit), grpc.ForceCodecV2(rawCodec{})))
		if err != nil {
			for _, c := range conns[:i] {
				c.Close()
			}
			return nil, fmt.Errorf("attack: big-uploads: %w", err)
		}
		conns[i] = cc
	}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	r := &Report{Attack: "big-uploads", Codes: map[string]int64{}}
	var mu sync.Mutex
	start := time.Now()
	end := start.Add(d)
	var wg sync.WaitGroup
	for _, cc := range conns {
		wg.Go(func() {
			for time.Now().Before(end) && ctx.Err() == nil {
				cctx, cancel := context.WithTimeout(ctx, callTimeout)
				var resp sink
				err := cc.Invoke(cctx, methods.ModelInfer, &req, &resp)
				cancel()
				mu.Lock()
				r.Streams++
				r.Bytes += int64(len(req))
				if err == nil {
					r.OK++
				} else {
					r.Failed++
					st := status.Convert(err)
					r.Codes[st.Code().String()]++
					if r.FirstError == "" {
						r.FirstError = err.Error()
					}
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	r.Elapsed = time.Since(start)
	return r, nil
}

// rawCodec sends pre-marshalled request bytes and only measures the
// response, so the callers spend no CPU on protobuf. It names itself
// "proto": the content-subtype model servers accept.
type rawCodec struct{}

func (rawCodec) Name() string { return "proto" }

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	b, ok := v.(*[]byte)
	if !ok {
		return nil, fmt.Errorf("attack: raw codec: cannot marshal %T", v)
	}
	return mem.BufferSlice{mem.SliceBuffer(*b)}, nil
}

// sink receives a response; only its size is kept.
type sink struct{ n int }

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	s, ok := v.(*sink)
	if !ok {
		return fmt.Errorf("attack: raw codec: cannot unmarshal into %T", v)
	}
	s.n = data.Len()
	return nil
}
