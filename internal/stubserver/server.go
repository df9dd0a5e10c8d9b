package stubserver

import (
	"context"
	"fmt"
	"net"
	"sync/atomic"

	"google.golang.org/grpc"

	"github.com/infergate/infergate/proto/kservepb"
	"github.com/infergate/infergate/proto/tensorflowpb"
	"github.com/infergate/infergate/proto/tfservingpb"
)

// Hook runs at the start of every ModelInfer or Predict call with the
// 1-based sequence number of the call across both services and the model
// name. A non-nil error (use status.Error) becomes the call's status; a hook
// may block to stall the call. It is called concurrently.
type Hook func(ctx context.Context, n int64, model string) error

// Server is a running stub on 127.0.0.1.
type Server struct {
	// Addr is the listening address, host:port.
	Addr string

	grpc  *grpc.Server
	hook  Hook
	calls atomic.Int64
	last  atomic.Pointer[string]
}

// Start listens on 127.0.0.1:0 and serves both services; hook may be nil.
func Start(hook Hook) (*Server, error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("stubserver: listen: %w", err)
	}
	s := &Server{
		Addr: lis.Addr().String(),
		grpc: grpc.NewServer(grpc.MaxRecvMsgSize(256<<20), grpc.MaxSendMsgSize(256<<20)),
		hook: hook,
	}
	kservepb.RegisterGRPCInferenceServiceServer(s.grpc, kserve{s: s})
	tfservingpb.RegisterPredictionServiceServer(s.grpc, tf{s: s})
	go func() { _ = s.grpc.Serve(lis) }()
	return s, nil
}

// Stop closes the listener and every connection at once.
func (s *Server) Stop() { s.grpc.Stop() }

// Calls returns how many ModelInfer/Predict calls arrived.
func (s *Server) Calls() int64 { return s.calls.Load() }

// LastModel returns the model name of the most recent call.
func (s *Server) LastModel() string {
	if p := s.last.Load(); p != nil {
		return *p
	}
	return ""
}

func (s *Server) enter(ctx context.Context, model string) error {
	n := s.calls.Add(1)
	s.last.Store(&model)
	if s.hook != nil {
		return s.hook(ctx, n, model)
	}
	return nil
}

type kserve struct {
	kservepb.UnimplementedGRPCInferenceServiceServer
	s *Server
}

// ModelInfer echoes every input as an output named OUTPUTi.
func (k kserve) ModelInfer(ctx context.Context, req *kservepb.ModelInferRequest) (*kservepb.ModelInferResponse, error) {
	if err := k.s.enter(ctx, req.GetModelName()); err != nil {
		return nil, err
	}
	resp := &kservepb.ModelInferResponse{ModelName: req.GetModelName(), Id: req.GetId(), RawOutputContents: req.GetRawInputContents()}
	for i, in := range req.GetInputs() {
		resp.Outputs = append(resp.Outputs, &kservepb.ModelInferResponse_InferOutputTensor{
			Name: fmt.Sprintf("OUTPUT%d", i), Datatype: in.GetDatatype(), Shape: in.GetShape(),
		})
	}
	return resp, nil
}

type tf struct {
	tfservingpb.UnimplementedPredictionServiceServer
	s *Server
}

// Predict echoes every input under the same name.
func (t tf) Predict(ctx context.Context, req *tfservingpb.PredictRequest) (*tfservingpb.PredictResponse, error) {
	if err := t.s.enter(ctx, req.GetModelSpec().GetName()); err != nil {
		return nil, err
	}
	out := make(map[string]*tensorflowpb.TensorProto, len(req.GetInputs()))
	for name, tp := range req.GetInputs() {
		out[name] = tp
	}
	return &tfservingpb.PredictResponse{Outputs: out, ModelSpec: req.GetModelSpec()}, nil
}
