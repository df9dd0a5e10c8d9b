package sim

import (
	"context"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/infergate/infergate/proto/kservepb"
)

// Parameters of a token_stream model's responses. FinalParam is Triton's;
// the two stamps are simserver's own, so that a test can bound what a
// proxy between it and its client measured: the proxy received the
// request before ReceivedParam and sent each response after SentParam.
const (
	// FinalParam (bool) marks the last response to a request, on every
	// response of a decoupled model, as Triton does.
	FinalParam = "triton_final_response"
	// EmptyFinalParam (bool), a request parameter, asks for the final
	// flag on an extra response without outputs instead of on the last
	// one (Triton's triton_enable_empty_final_response).
	EmptyFinalParam = "triton_enable_empty_final_response"
	// ReceivedParam (int64) is when the request arrived, SentParam
	// (int64) when this response was handed to gRPC: Unix nanoseconds of
	// the server's clock (Config.Now).
	ReceivedParam = "simserver_received_unix_ns"
	SentParam     = "simserver_sent_unix_ns"
)

// maxStreamResponses bounds the responses one request may ask for.
const maxStreamResponses = 100_000

// errDecoupledUnary is Triton's answer to ModelInfer on a decoupled model.
var errDecoupledUnary = status.Error(codes.Unimplemented, "ModelInfer RPC doesn't support models with decoupled transaction policy")

// streamSender serialises the Sends of one stream (gRPC allows one sender
// at a time) and stamps each response as it goes.
type streamSender struct {
	mu     sync.Mutex
	stream grpc.BidiStreamingServer[kservepb.ModelInferRequest, kservepb.ModelStreamInferResponse]
	now    func() time.Time
}

// send sends out; when stamp, it first sets SentParam, under the lock so
// that stamps follow the order of the stream.
func (ss *streamSender) send(out *kservepb.ModelStreamInferResponse, stamp bool) error {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if stamp {
		out.InferResponse.Parameters[SentParam] = int64Param(ss.now().UnixNano())
	}
	return ss.stream.Send(out)
}

func int64Param(v int64) *kservepb.InferParameter {
	return &kservepb.InferParameter{ParameterChoice: &kservepb.InferParameter_Int64Param{Int64Param: v}}
}

func boolParam(v bool) *kservepb.InferParameter {
	return &kservepb.InferParameter{ParameterChoice: &kservepb.InferParameter_BoolParam{BoolParam: v}}
}

// streamTokens answers one request to a token_stream model: the first
// response after an execution (the prefill: slots, latency and every
// fault apply, delay_ms included), then one every Stream.TokenMS (times
// the fault's slowdown and the GPU's throttle) plus the fault's stalls,
// the last flagged final. A failure is one error response, flagged
// final. It returns when the request is answered or the stream is gone.
func (s *Server) streamTokens(ctx context.Context, m *model, req *kservepb.ModelInferRequest, snd *streamSender) {
	start := s.now()
	version, _ := m.cfg.resolve(req.ModelVersion) // the caller checked it
	in, _, outIdx, err := s.decodeInfer(m, req, start)
	if err == nil {
		// A token stream's outputs count tokens, not predictions:
		// flip_rate and perturb leave them alone.
		_, err = s.execute(ctx, m, version, 1, start)
	}
	if err != nil {
		out := &kservepb.ModelStreamInferResponse{ErrorMessage: status.Convert(err).Message(),
			InferResponse: &kservepb.ModelInferResponse{ModelName: req.ModelName, ModelVersion: req.ModelVersion, Id: req.Id,
				Parameters: map[string]*kservepb.InferParameter{FinalParam: boolParam(true)}}}
		_ = snd.send(out, false)
		return
	}
	n := int(rawToInt32s(in[0].raw)[0])
	if n <= 0 {
		n = m.cfg.Stream.Responses
	}
	n = min(n, maxStreamResponses)
	emptyFinal := req.Parameters[EmptyFinalParam].GetBoolParam()
	for i := range n {
		if i > 0 {
			if err := s.sleep(ctx, s.tokenGap(m, version)); err != nil {
				return // the stream is gone
			}
		}
		resp := &kservepb.ModelInferResponse{
			ModelName: m.cfg.Name, ModelVersion: version, Id: req.Id,
			Parameters: map[string]*kservepb.InferParameter{
				FinalParam:    boolParam(i == n-1 && !emptyFinal),
				ReceivedParam: int64Param(start.UnixNano()),
			},
		}
		for _, j := range outIdx {
			spec := m.cfg.Outputs[j]
			resp.Outputs = append(resp.Outputs, &kservepb.ModelInferResponse_InferOutputTensor{Name: spec.Name, Datatype: spec.Datatype, Shape: []int64{1}})
			resp.RawOutputContents = append(resp.RawOutputContents, int32sToRaw([]int32{int32(i)}))
		}
		if snd.send(&kservepb.ModelStreamInferResponse{InferResponse: resp}, true) != nil {
			return
		}
	}
	if emptyFinal {
		_ = snd.send(&kservepb.ModelStreamInferResponse{InferResponse: &kservepb.ModelInferResponse{
			ModelName: m.cfg.Name, ModelVersion: version, Id: req.Id,
			Parameters: map[string]*kservepb.InferParameter{FinalParam: boolParam(true)},
		}}, false)
	}
}

// tokenGap is the wait before a token_stream model's next response under
// the model's fault now, so that a fault set mid-stream applies at once.
func (s *Server) tokenGap(m *model, version string) time.Duration {
	slowdown := s.gpu.slowdown()
	var stall time.Duration
	if f := s.faults.Load().lookup(m.cfg.Name, version); f != nil {
		slowdown *= f.Slowdown
		if f.StallMS > 0 && s.chance(f.StallRate) {
			stall = time.Duration(f.StallMS * float64(time.Millisecond))
		}
	}
	return time.Duration(m.cfg.Stream.TokenMS*slowdown*float64(time.Millisecond)) + stall
}
