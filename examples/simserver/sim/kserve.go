package sim

import (
	"context"
	"io"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/infergate/infergate/proto/kservepb"
)

// kserveService implements inference.GRPCInferenceService. RPCs it does
// not override (shared memory, repository load/unload, trace, logging)
// answer UNIMPLEMENTED.
type kserveService struct {
	kservepb.UnimplementedGRPCInferenceServiceServer
	s *Server
}

// serverExtensions are the KServe v2 extensions simserver implements.
var serverExtensions = []string{"model_configuration", "statistics", "parameters"}

func (k *kserveService) ServerLive(context.Context, *kservepb.ServerLiveRequest) (*kservepb.ServerLiveResponse, error) {
	return &kservepb.ServerLiveResponse{Live: true}, nil
}

func (k *kserveService) ServerReady(context.Context, *kservepb.ServerReadyRequest) (*kservepb.ServerReadyResponse, error) {
	select {
	case <-k.s.closed:
		return &kservepb.ServerReadyResponse{Ready: false}, nil
	default:
		return &kservepb.ServerReadyResponse{Ready: true}, nil
	}
}

func (k *kserveService) ServerMetadata(context.Context, *kservepb.ServerMetadataRequest) (*kservepb.ServerMetadataResponse, error) {
	return &kservepb.ServerMetadataResponse{Name: "simserver", Version: Version, Extensions: serverExtensions}, nil
}

func (k *kserveService) ModelReady(_ context.Context, req *kservepb.ModelReadyRequest) (*kservepb.ModelReadyResponse, error) {
	_, err := k.s.kserveModel(req.Name, req.Version)
	return &kservepb.ModelReadyResponse{Ready: err == nil}, nil
}

func (k *kserveService) ModelMetadata(_ context.Context, req *kservepb.ModelMetadataRequest) (*kservepb.ModelMetadataResponse, error) {
	m, err := k.s.kserveModel(req.Name, req.Version)
	if err != nil {
		return nil, err
	}
	meta := func(specs []TensorSpec) []*kservepb.ModelMetadataResponse_TensorMetadata {
		out := make([]*kservepb.ModelMetadataResponse_TensorMetadata, len(specs))
		for i, ts := range specs {
			out[i] = &kservepb.ModelMetadataResponse_TensorMetadata{Name: ts.Name, Datatype: ts.Datatype, Shape: m.fullShape(ts)}
		}
		return out
	}
	return &kservepb.ModelMetadataResponse{
		Name:     m.cfg.Name,
		Versions: m.cfg.versions(),
		Platform: m.cfg.Platform,
		Inputs:   meta(m.cfg.Inputs),
		Outputs:  meta(m.cfg.Outputs),
	}, nil
}

func (k *kserveService) ModelConfig(_ context.Context, req *kservepb.ModelConfigRequest) (*kservepb.ModelConfigResponse, error) {
	m, err := k.s.kserveModel(req.Name, req.Version)
	if err != nil {
		return nil, err
	}
	return &kservepb.ModelConfigResponse{Config: m.kserveConfig()}, nil
}

func (k *kserveService) ModelStatistics(_ context.Context, req *kservepb.ModelStatisticsRequest) (*kservepb.ModelStatisticsResponse, error) {
	resp := &kservepb.ModelStatisticsResponse{}
	if req.Name == "" {
		for _, m := range k.s.order {
			if m.cfg.serves(ProtocolKServe) {
				resp.ModelStats = append(resp.ModelStats, m.kserveStatistics())
			}
		}
		return resp, nil
	}
	m, err := k.s.kserveModel(req.Name, req.Version)
	if err != nil {
		return nil, err
	}
	resp.ModelStats = append(resp.ModelStats, m.kserveStatistics())
	return resp, nil
}

func (k *kserveService) RepositoryIndex(context.Context, *kservepb.RepositoryIndexRequest) (*kservepb.RepositoryIndexResponse, error) {
	resp := &kservepb.RepositoryIndexResponse{}
	for _, m := range k.s.order {
		if m.cfg.serves(ProtocolKServe) {
			for _, v := range m.cfg.versions() {
				resp.Models = append(resp.Models, &kservepb.RepositoryIndexResponse_ModelIndex{Name: m.cfg.Name, Version: v, State: "READY"})
			}
		}
	}
	return resp, nil
}

func (k *kserveService) ModelInfer(ctx context.Context, req *kservepb.ModelInferRequest) (*kservepb.ModelInferResponse, error) {
	return k.s.modelInfer(ctx, req)
}

// ModelStreamInfer answers each request on the stream with one response,
// as Triton does for a non-decoupled model, or with many for a
// token_stream model (streamTokens): requests run concurrently, so
// responses come in completion order (match them by id), and a failed
// request is reported in error_message while the stream stays open.
func (k *kserveService) ModelStreamInfer(stream grpc.BidiStreamingServer[kservepb.ModelInferRequest, kservepb.ModelStreamInferResponse]) error {
	ctx := stream.Context()
	var wg sync.WaitGroup
	snd := &streamSender{stream: stream, now: k.s.now}
	defer wg.Wait()
	for {
		req, err := stream.Recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if m := k.s.lookup(req.ModelName, ProtocolKServe); m != nil && m.cfg.Kind == KindTokenStream &&
				hasVersion(m, req.ModelVersion) {
				k.s.streamTokens(ctx, m, req, snd)
				return
			}
			out := &kservepb.ModelStreamInferResponse{}
			resp, err := k.s.modelInfer(ctx, req)
			if err != nil {
				out.ErrorMessage = status.Convert(err).Message()
				resp = &kservepb.ModelInferResponse{ModelName: req.ModelName, ModelVersion: req.ModelVersion, Id: req.Id}
			}
			out.InferResponse = resp
			// A failed Send means the stream is gone; Recv will
			// report it to the loop.
			_ = snd.send(out, false)
		}()
	}
}

// hasVersion reports whether m serves version v ("" for its default).
func hasVersion(m *model, v string) bool { _, ok := m.cfg.resolve(v); return ok }

// kserveModel finds a model served over KServe, with Triton's NOT_FOUND
// messages.
func (s *Server) kserveModel(name, version string) (*model, error) {
	m := s.lookup(name, ProtocolKServe)
	if m == nil {
		return nil, status.Errorf(codes.NotFound, "Request for unknown model: '%s' is not found", name)
	}
	if _, ok := m.cfg.resolve(version); !ok {
		return nil, status.Errorf(codes.NotFound, "Request for unknown model: '%s' version %s is not found", name, version)
	}
	return m, nil
}

// decodeInfer validates a request's inputs (decodeKServe) and requested
// outputs (kserveOutputs), counting a failure as Triton does; start is
// when the request arrived.
func (s *Server) decodeInfer(m *model, req *kservepb.ModelInferRequest, start time.Time) (in []tensor, batch int, outIdx []int, err error) {
	in, batch, err = m.decodeKServe(req)
	if err == nil {
		outIdx, err = m.kserveOutputs(req.Outputs)
	}
	if err != nil {
		m.stats.recordFailure(ReasonOther, s.now().Sub(start))
	}
	return in, batch, outIdx, err
}

// modelInfer serves one KServe inference request.
func (s *Server) modelInfer(ctx context.Context, req *kservepb.ModelInferRequest) (*kservepb.ModelInferResponse, error) {
	start := s.now()
	s.requests.note(ctx, req.ModelName, req.Id)
	m, err := s.kserveModel(req.ModelName, req.ModelVersion)
	if err != nil {
		return nil, err
	}
	if m.cfg.Kind == KindTokenStream {
		return nil, errDecoupledUnary
	}
	m.stats.countPriority(priorityOf(req))
	in, batch, outIdx, err := s.decodeInfer(m, req, start)
	if err != nil {
		return nil, err
	}
	version, _ := m.cfg.resolve(req.ModelVersion) // kserveModel checked it
	f, err := s.execute(ctx, m, version, batch, start)
	if err != nil {
		return nil, err
	}
	outs := f.alter(m, m.compute(in))
	resp := &kservepb.ModelInferResponse{
		ModelName:         m.cfg.Name,
		ModelVersion:      version,
		Id:                req.Id,
		Outputs:           make([]*kservepb.ModelInferResponse_InferOutputTensor, len(outIdx)),
		RawOutputContents: make([][]byte, len(outIdx)),
	}
	for i, j := range outIdx {
		spec := m.cfg.Outputs[j]
		resp.Outputs[i] = &kservepb.ModelInferResponse_InferOutputTensor{Name: spec.Name, Datatype: spec.Datatype, Shape: outs[j].shape}
		resp.RawOutputContents[i] = outs[j].raw
	}
	return resp, nil
}

// priorityOf is a request's priority parameter (Triton reads it as a
// level, 1 the highest); 0 when it carries none.
func priorityOf(req *kservepb.ModelInferRequest) uint64 {
	p := req.GetParameters()["priority"]
	switch v := p.GetParameterChoice().(type) {
	case *kservepb.InferParameter_Uint64Param:
		return v.Uint64Param
	case *kservepb.InferParameter_Int64Param:
		return uint64(max(v.Int64Param, 0))
	}
	return 0
}
