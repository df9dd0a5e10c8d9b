package proxy

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/infergate/infergate/proto/kservepb"
	"github.com/infergate/infergate/proto/tensorflowpb"
	"github.com/infergate/infergate/proto/tfservingpb"
)

// Models the test backend treats specially.
const (
	modelFail  = "fail"    // FAILED_PRECONDITION with details
	modelBlock = "block"   // reports its context, blocks until it is done
	modelSlow  = "slow"    // blocks until the test releases it
	modelEcho  = "echo-md" // echoes metadata into headers and trailers
	// modelTimeout answers DEADLINE_EXCEEDED by itself, at once.
	modelTimeout = "own-timeout"
)

// failStatus is what the backend answers for modelFail.
func failStatus() *status.Status {
	st, err := status.New(codes.FailedPrecondition, "model fail is not ready").WithDetails(
		&errdetails.ErrorInfo{Reason: "MODEL_NOT_READY", Domain: "infergate.test", Metadata: map[string]string{"model": "fail"}},
		&errdetails.RetryInfo{},
	)
	if err != nil {
		panic(err)
	}
	return st
}

// blockReport is what the backend saw in a blocked call's context.
type blockReport struct {
	hadDeadline bool
	err         error
}

// backend is an in-process model server speaking KServe v2, TF-Serving,
// grpc.health.v1 and a hand-written streaming test service.
type backend struct {
	kservepb.UnimplementedGRPCInferenceServiceServer
	tfservingpb.UnimplementedPredictionServiceServer

	addr    string
	md      chan metadata.MD // incoming metadata of modelEcho calls
	blocked chan blockReport // one report per modelBlock call
	entered chan struct{}    // a modelBlock or modelSlow call started
	release chan struct{}    // closed by a test to end modelSlow calls
	mu      sync.Mutex       // guards lastInfer
	last    *kservepb.ModelInferRequest
}

func startBackend(t *testing.T) *backend {
	t.Helper()
	b, srv := newBackend()
	b.addr = serve(t, srv)
	return b
}

// newBackend is a backend and its server, not yet serving.
func newBackend() (*backend, *grpc.Server) {
	b := &backend{
		md:      make(chan metadata.MD, 16),
		blocked: make(chan blockReport, 16),
		entered: make(chan struct{}, 16),
		release: make(chan struct{}),
	}
	srv := grpc.NewServer(grpc.MaxRecvMsgSize(DefaultMaxMsgSize), grpc.MaxSendMsgSize(DefaultMaxMsgSize))
	kservepb.RegisterGRPCInferenceServiceServer(srv, b)
	tfservingpb.RegisterPredictionServiceServer(srv, b)
	hs := health.NewServer()
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(srv, hs)
	srv.RegisterService(&streamsDesc, b)
	return b, srv
}

// serve runs srv on a fresh loopback port until the test ends.
func serve(t *testing.T, srv *grpc.Server) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}

func dial(t testing.TB, addr string) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient(addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(DefaultMaxMsgSize), grpc.MaxCallSendMsgSize(DefaultMaxMsgSize)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// special handles the models that behave differently in every method.
func (b *backend) special(ctx context.Context, model string) error {
	switch model {
	case modelFail:
		return failStatus().Err()
	case modelTimeout:
		return status.Error(codes.DeadlineExceeded, "model server: inference timed out")
	case modelBlock:
		_, ok := ctx.Deadline()
		b.entered <- struct{}{}
		<-ctx.Done()
		b.blocked <- blockReport{hadDeadline: ok, err: ctx.Err()}
		return ctx.Err()
	case modelSlow:
		b.entered <- struct{}{}
		<-b.release
	case modelEcho:
		md, _ := metadata.FromIncomingContext(ctx)
		b.md <- md
		if err := grpc.SetHeader(ctx, metadata.MD{"x-echo": md["x-foo"], "x-echo-bin": md["x-foo-bin"]}); err != nil {
			return err
		}
		return grpc.SetTrailer(ctx, metadata.Pairs("x-trl", "done", "x-trl-bin", string([]byte{0, 0xfe, 0xff})))
	}
	return nil
}

func (b *backend) ModelInfer(ctx context.Context, req *kservepb.ModelInferRequest) (*kservepb.ModelInferResponse, error) {
	b.mu.Lock()
	b.last = proto.Clone(req).(*kservepb.ModelInferRequest)
	b.mu.Unlock()
	if err := b.special(ctx, req.ModelName); err != nil {
		return nil, err
	}
	return inferResponse(req), nil
}

// inferResponse adds up the INT32 raw inputs element by element, like
// Triton's "simple" model.
func inferResponse(req *kservepb.ModelInferRequest) *kservepb.ModelInferResponse {
	var sum []byte
	for _, raw := range req.RawInputContents {
		if sum == nil {
			sum = make([]byte, len(raw))
		}
		for i := 0; i+4 <= len(raw) && i+4 <= len(sum); i += 4 {
			v := binary.LittleEndian.Uint32(sum[i:]) + binary.LittleEndian.Uint32(raw[i:])
			binary.LittleEndian.PutUint32(sum[i:], v)
		}
	}
	return &kservepb.ModelInferResponse{
		ModelName: req.ModelName, ModelVersion: req.ModelVersion, Id: req.Id,
		Parameters: map[string]*kservepb.InferParameter{
			"sequence_end": {ParameterChoice: &kservepb.InferParameter_BoolParam{BoolParam: true}},
		},
		Outputs: []*kservepb.ModelInferResponse_InferOutputTensor{
			{Name: "OUTPUT0", Datatype: "INT32", Shape: []int64{1, int64(len(sum) / 4)}},
		},
		RawOutputContents: [][]byte{sum},
	}
}

func (b *backend) ModelMetadata(ctx context.Context, req *kservepb.ModelMetadataRequest) (*kservepb.ModelMetadataResponse, error) {
	if err := b.special(ctx, req.Name); err != nil {
		return nil, err
	}
	return &kservepb.ModelMetadataResponse{
		Name: req.Name, Versions: []string{"1", "2"}, Platform: "onnxruntime_onnx",
		Inputs:  []*kservepb.ModelMetadataResponse_TensorMetadata{{Name: "INPUT0", Datatype: "INT32", Shape: []int64{-1, 16}}},
		Outputs: []*kservepb.ModelMetadataResponse_TensorMetadata{{Name: "OUTPUT0", Datatype: "INT32", Shape: []int64{-1, 16}}},
	}, nil
}

func (b *backend) ModelStreamInfer(stream grpc.BidiStreamingServer[kservepb.ModelInferRequest, kservepb.ModelStreamInferResponse]) error {
	for {
		req, err := stream.Recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if err := b.special(stream.Context(), req.ModelName); err != nil {
			return err
		}
		resp := &kservepb.ModelStreamInferResponse{InferResponse: inferResponse(req)}
		if req.Id == "bad" {
			resp = &kservepb.ModelStreamInferResponse{ErrorMessage: "request bad failed"}
		}
		if err := stream.Send(resp); err != nil {
			return err
		}
	}
}

func (b *backend) Predict(ctx context.Context, req *tfservingpb.PredictRequest) (*tfservingpb.PredictResponse, error) {
	if err := b.special(ctx, req.GetModelSpec().GetName()); err != nil {
		return nil, err
	}
	x := req.Inputs["x"]
	y := &tensorflowpb.TensorProto{Dtype: tensorflowpb.DataType_DT_FLOAT, TensorShape: x.GetTensorShape()}
	for _, v := range x.GetFloatVal() {
		y.FloatVal = append(y.FloatVal, 0.5*v+2)
	}
	return &tfservingpb.PredictResponse{ModelSpec: req.ModelSpec, Outputs: map[string]*tensorflowpb.TensorProto{"y": y}}, nil
}

func (b *backend) GetModelMetadata(ctx context.Context, req *tfservingpb.GetModelMetadataRequest) (*tfservingpb.GetModelMetadataResponse, error) {
	if err := b.special(ctx, req.GetModelSpec().GetName()); err != nil {
		return nil, err
	}
	sigs, err := anypb.New(&tfservingpb.SignatureDefMap{SignatureDef: map[string]*tensorflowpb.SignatureDef{
		"serving_default": {MethodName: "tensorflow/serving/predict"},
	}})
	if err != nil {
		return nil, err
	}
	return &tfservingpb.GetModelMetadataResponse{ModelSpec: req.ModelSpec, Metadata: map[string]*anypb.Any{"signature_def": sigs}}, nil
}

// streamsDesc is a service the proxy knows nothing about, with every
// streaming shape. Its messages are wrapperspb.StringValue.
var streamsDesc = grpc.ServiceDesc{
	ServiceName: "test.Streams",
	HandlerType: (*any)(nil),
	Streams: []grpc.StreamDesc{
		{StreamName: "ServerStream", ServerStreams: true, Handler: serverStream},
		{StreamName: "ClientStream", ClientStreams: true, Handler: clientStream},
		{StreamName: "Bidi", ServerStreams: true, ClientStreams: true, Handler: bidiStream},
	},
	Methods: []grpc.MethodDesc{{MethodName: "Unary", Handler: unaryEcho}},
}

// serverStream answers one request "word n" with n messages.
func serverStream(srv any, ss grpc.ServerStream) error {
	var req wrapperspb.StringValue
	if err := ss.RecvMsg(&req); err != nil {
		return err
	}
	for i := range 5 {
		if err := ss.SendMsg(wrapperspb.String(req.Value + string(rune('0'+i)))); err != nil {
			return err
		}
	}
	if req.Value == modelFail {
		return failStatus().Err()
	}
	return nil
}

// clientStream joins every request into one reply.
func clientStream(srv any, ss grpc.ServerStream) error {
	var buf bytes.Buffer
	for {
		var req wrapperspb.StringValue
		err := ss.RecvMsg(&req)
		if errors.Is(err, io.EOF) {
			return ss.SendMsg(wrapperspb.String(buf.String()))
		}
		if err != nil {
			return err
		}
		buf.WriteString(req.Value)
	}
}

// bidiStream echoes each message at once; the special model names work as
// message values.
func bidiStream(srv any, ss grpc.ServerStream) error {
	b := srv.(*backend)
	for {
		var req wrapperspb.StringValue
		err := ss.RecvMsg(&req)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if req.Value == modelEcho {
			md, _ := metadata.FromIncomingContext(ss.Context())
			b.md <- md
			if err := ss.SendHeader(metadata.MD{"x-echo": md["x-foo"], "x-echo-bin": md["x-foo-bin"]}); err != nil {
				return err
			}
			ss.SetTrailer(metadata.Pairs("x-trl", "done", "x-trl-bin", string([]byte{0, 0xfe, 0xff})))
		} else if err := b.special(ss.Context(), req.Value); err != nil {
			return err
		}
		if err := ss.SendMsg(&req); err != nil {
			return err
		}
	}
}

func unaryEcho(srv any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
	var req wrapperspb.StringValue
	if err := dec(&req); err != nil {
		return nil, err
	}
	if err := srv.(*backend).special(ctx, req.Value); err != nil {
		return nil, err
	}
	return &req, nil
}
