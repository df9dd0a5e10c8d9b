package proxy

import (
	"context"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/infergate/infergate/monitor"
	"github.com/infergate/infergate/proto/kservepb"
	"github.com/infergate/infergate/proto/tfservingpb"
)

func TestMetadataBothWays(t *testing.T) {
	bin := string([]byte{0, 1, 0x80, 0xff})
	check := func(t *testing.T, e *env, header, trailer metadata.MD) {
		t.Helper()
		var md metadata.MD
		select {
		case md = <-e.b.md:
		case <-time.After(testTimeout):
			t.Fatal("backend saw no call")
		}
		if got := md["x-foo"]; len(got) != 2 || got[0] != "bar" || got[1] != "baz" {
			t.Errorf("backend x-foo = %q", got)
		}
		if got := md["x-foo-bin"]; len(got) != 1 || got[0] != bin {
			t.Errorf("backend x-foo-bin = %q", got)
		}
		if got := md["grpc-accept-encoding"]; len(got) > 1 {
			t.Errorf("backend grpc-accept-encoding = %q", got)
		}
		if got := md["content-type"]; len(got) != 1 || got[0] != "application/grpc" {
			t.Errorf("backend content-type = %q", got)
		}
		if got := header["x-echo"]; len(got) != 2 || got[0] != "bar" || got[1] != "baz" {
			t.Errorf("client header x-echo = %q", got)
		}
		if got := header["x-echo-bin"]; len(got) != 1 || got[0] != bin {
			t.Errorf("client header x-echo-bin = %q", got)
		}
		if got := trailer["x-trl"]; len(got) != 1 || got[0] != "done" {
			t.Errorf("client trailer x-trl = %q", got)
		}
		if got := trailer["x-trl-bin"]; len(got) != 1 || got[0] != string([]byte{0, 0xfe, 0xff}) {
			t.Errorf("client trailer x-trl-bin = %q", got)
		}
	}
	outCtx := func(t *testing.T) context.Context {
		return metadata.AppendToOutgoingContext(ctxT(t), "x-foo", "bar", "x-foo", "baz", "x-foo-bin", bin)
	}
	e := newEnv(t)
	t.Run("unary", func(t *testing.T) {
		var header, trailer metadata.MD
		_, err := kservepb.NewGRPCInferenceServiceClient(e.viaPxy).ModelInfer(outCtx(t), simpleRequest(modelEcho, 16),
			grpc.Header(&header), grpc.Trailer(&trailer))
		if err != nil {
			t.Fatal(err)
		}
		check(t, e, header, trailer)
	})
	t.Run("stream", func(t *testing.T) {
		cs, err := e.viaPxy.NewStream(outCtx(t), &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, "/test.Streams/Bidi")
		if err != nil {
			t.Fatal(err)
		}
		if err := cs.SendMsg(wrapperspb.String(modelEcho)); err != nil {
			t.Fatal(err)
		}
		// Headers arrive before the stream ends.
		header, err := cs.Header()
		if err != nil {
			t.Fatal(err)
		}
		if err := cs.RecvMsg(new(wrapperspb.StringValue)); err != nil {
			t.Fatal(err)
		}
		if err := cs.CloseSend(); err != nil {
			t.Fatal(err)
		}
		if err := cs.RecvMsg(new(wrapperspb.StringValue)); err != io.EOF {
			t.Fatal(err)
		}
		check(t, e, header, cs.Trailer())
	})
	t.Run("content subtype", func(t *testing.T) {
		_, err := kservepb.NewGRPCInferenceServiceClient(e.viaPxy).ModelInfer(outCtx(t), simpleRequest(modelEcho, 16),
			grpc.CallContentSubtype("proto"))
		if err != nil {
			t.Fatal(err)
		}
		md := <-e.b.md
		if got := md["content-type"]; len(got) != 1 || got[0] != "application/grpc+proto" {
			t.Errorf("backend content-type = %q", got)
		}
	})
}

func TestErrorStatusPassesThroughUnchanged(t *testing.T) {
	e := newEnv(t)
	want := failStatus()
	checkStatus := func(t *testing.T, err error) {
		t.Helper()
		got, ok := status.FromError(err)
		if !ok {
			t.Fatalf("not a status: %v", err)
		}
		if !proto.Equal(got.Proto(), want.Proto()) {
			t.Errorf("status %v, want %v", got.Proto(), want.Proto())
		}
		if len(got.Details()) != 2 {
			t.Errorf("details %v", got.Details())
		}
	}
	t.Run("unary ModelInfer", func(t *testing.T) {
		_, err := kservepb.NewGRPCInferenceServiceClient(e.viaPxy).ModelInfer(ctxT(t), simpleRequest(modelFail, 16))
		checkStatus(t, err)
	})
	t.Run("unary Predict", func(t *testing.T) {
		_, err := tfservingpb.NewPredictionServiceClient(e.viaPxy).Predict(ctxT(t), predictRequest(modelFail))
		checkStatus(t, err)
	})
	t.Run("stream after messages", func(t *testing.T) {
		cs, err := e.viaPxy.NewStream(ctxT(t), &grpc.StreamDesc{ServerStreams: true}, "/test.Streams/ServerStream")
		if err != nil {
			t.Fatal(err)
		}
		if err := cs.SendMsg(wrapperspb.String(modelFail)); err != nil {
			t.Fatal(err)
		}
		_ = cs.CloseSend()
		n := 0
		for {
			err = cs.RecvMsg(new(wrapperspb.StringValue))
			if err != nil {
				break
			}
			n++
		}
		if n != 5 {
			t.Errorf("%d messages before the status, want 5", n)
		}
		checkStatus(t, err)
	})
	t.Run("ModelStreamInfer", func(t *testing.T) {
		stream, err := kservepb.NewGRPCInferenceServiceClient(e.viaPxy).ModelStreamInfer(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		if err := stream.Send(simpleRequest(modelFail, 16)); err != nil {
			t.Fatal(err)
		}
		_, err = stream.Recv()
		checkStatus(t, err)
	})
	// A status from the upstream is the upstream's: the proxy classifies it.
	for range 4 {
		rec := e.rec.next(t)
		if rec.sm.Code != "FailedPrecondition" || rec.key.CodeClass != monitor.CodeClassClientError {
			t.Errorf("record %+v", rec)
		}
	}
}

func TestDeadlineAndCancelReachUpstream(t *testing.T) {
	e := newEnv(t)
	ctxWithin := func(t *testing.T) (context.Context, context.CancelFunc) {
		return context.WithTimeout(t.Context(), testTimeout)
	}
	calls := []struct {
		name string
		call func(ctx context.Context) error
	}{
		{"unary", func(ctx context.Context) error {
			_, err := kservepb.NewGRPCInferenceServiceClient(e.viaPxy).ModelInfer(ctx, simpleRequest(modelBlock, 16))
			return err
		}},
		{"stream", func(ctx context.Context) error {
			cs, err := e.viaPxy.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, "/test.Streams/Bidi")
			if err != nil {
				return err
			}
			if err := cs.SendMsg(wrapperspb.String(modelBlock)); err != nil {
				return err
			}
			return cs.RecvMsg(new(wrapperspb.StringValue))
		}},
	}
	for _, c := range calls {
		t.Run(c.name+" cancel", func(t *testing.T) {
			ctx, cancel := ctxWithin(t)
			errc := make(chan error, 1)
			go func() { errc <- c.call(ctx) }()
			<-e.b.entered
			cancel()
			if err := <-errc; status.Code(err) != codes.Canceled {
				t.Errorf("client got %v, want Canceled", err)
			}
			rep := <-e.b.blocked
			if !rep.hadDeadline {
				t.Error("backend context had no deadline")
			}
			if rep.err == nil {
				t.Error("backend context not done")
			}
		})
		t.Run(c.name+" deadline", func(t *testing.T) {
			// The deadline is short so the test is quick; nothing asserts
			// how long anything took.
			ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
			defer cancel()
			if err := c.call(ctx); status.Code(err) != codes.DeadlineExceeded {
				t.Errorf("client got %v, want DeadlineExceeded", err)
			}
			<-e.b.entered
			rep := <-e.b.blocked
			if !rep.hadDeadline || rep.err == nil {
				t.Errorf("backend saw %+v", rep)
			}
		})
	}
}

// closedPort returns a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	if err := lis.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

func TestUnreachableUpstreamIsUnavailable(t *testing.T) {
	rec := newFakeRecorder()
	up, err := DialUpstream(closedPort(t), UpstreamOptions{Name: "down"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(StaticDirector(up), WithRecorder(rec))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	cc := dial(t, serve(t, p.NewServer()))
	check := func(t *testing.T, err error) {
		t.Helper()
		// Unavailable, not DeadlineExceeded: the call failed fast instead
		// of waiting for the upstream until the deadline.
		if status.Code(err) != codes.Unavailable {
			t.Fatalf("got %v, want Unavailable", err)
		}
		if msg := status.Convert(err).Message(); !strings.HasPrefix(msg, "infergate: upstream down: ") {
			t.Errorf("message %q", msg)
		}
	}
	t.Run("unary", func(t *testing.T) {
		_, err := kservepb.NewGRPCInferenceServiceClient(cc).ModelInfer(ctxT(t), simpleRequest("simple", 16))
		check(t, err)
		r := rec.next(t)
		if r.key.Upstream != "down" || r.sm.Code != "Unavailable" || r.key.CodeClass != monitor.CodeClassServerError || r.key.Model != "simple" {
			t.Errorf("record %+v", r)
		}
	})
	t.Run("stream", func(t *testing.T) {
		stream, err := kservepb.NewGRPCInferenceServiceClient(cc).ModelStreamInfer(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		_ = stream.Send(simpleRequest("simple", 16))
		_, err = stream.Recv()
		check(t, err)
	})
	if v := rec.InFlight("down").Value(); v != 0 {
		t.Errorf("in flight %d after the calls", v)
	}
}

func TestOversizedMessageAndGarbage(t *testing.T) {
	e := newEnv(t, WithMaxMsgSize(64<<10))
	client := kservepb.NewGRPCInferenceServiceClient(e.viaPxy)
	_, err := client.ModelInfer(ctxT(t), simpleRequest("simple", 48<<10))
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("oversized request: %v, want ResourceExhausted", err)
	}
	// gRPC's server answers this itself, before the proxy sees the bytes.
	if !strings.Contains(status.Convert(err).Message(), "larger than max") {
		t.Errorf("message %q", status.Convert(err).Message())
	}
	if _, err := client.ModelInfer(ctxT(t), simpleRequest("simple", 1024)); err != nil {
		t.Fatalf("normal call after an oversized one: %v", err)
	}

	garbage := []byte{0xff, 0xff, 0xff, 0x0a}
	const method = "/inference.GRPCInferenceService/ModelInfer"
	_, wantErr := rawInvoke(ctxT(t), e.direct, method, garbage)
	_, gotErr := rawInvoke(ctxT(t), e.viaPxy, method, garbage)
	if status.Code(wantErr) != codes.Internal || !proto.Equal(status.Convert(gotErr).Proto(), status.Convert(wantErr).Proto()) {
		t.Errorf("garbage: proxy %v, direct %v", gotErr, wantErr)
	}
	if _, err := client.ModelInfer(ctxT(t), simpleRequest("simple", 1024)); err != nil {
		t.Fatalf("normal call after garbage: %v", err)
	}

	// The same on the stream path: the stream fails, the next one works.
	for _, raw := range []int{48 << 10, 1024} {
		stream, err := client.ModelStreamInfer(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		_ = stream.Send(simpleRequest("simple", raw))
		_, err = stream.Recv()
		if raw > 1024 && status.Code(err) != codes.ResourceExhausted {
			t.Errorf("oversized stream message: %v, want ResourceExhausted", err)
		} else if raw == 1024 && err != nil {
			t.Errorf("stream after an oversized one: %v", err)
		}
		_ = stream.CloseSend()
	}

	// Records may come in another order than the calls.
	got := map[string]int{}
	for range 6 {
		r := e.rec.next(t)
		got[r.key.Method[strings.LastIndexByte(r.key.Method, '/')+1:]+" "+r.key.Model+" "+r.sm.Code]++
	}
	want := map[string]int{
		"ModelInfer  ResourceExhausted": 1, "ModelInfer simple OK": 2, "ModelInfer  Internal": 1,
		"ModelStreamInfer  ResourceExhausted": 1, "ModelStreamInfer simple OK": 1,
	}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("%d records %q, want %d; all: %v", got[k], k, n, got)
		}
	}
}

// TestOversizedResponse: an upstream answer over the proxy's message size
// limit fails the upstream call with RESOURCE_EXHAUSTED, whether the upstream's connections
// default to the proxy's limit (the proxy then leaves its own limit
// options off the call) or to another (the proxy's options then decide).
func TestOversizedResponse(t *testing.T) {
	const limit = 64 << 10
	// The backend answers with as many bytes as x-size asks for.
	backend := grpc.NewServer(grpc.ForceServerCodecV2(rawCodec{}),
		grpc.UnknownServiceHandler(func(_ any, ss grpc.ServerStream) error {
			f := new(Frame)
			if err := ss.RecvMsg(f); err != nil {
				return err
			}
			f.Free()
			size, err := strconv.Atoi(metadata.ValueFromIncomingContext(ss.Context(), "x-size")[0])
			if err != nil {
				return err
			}
			return ss.SendMsg(NewFrame(make([]byte, size)))
		}))
	addr := serve(t, backend)
	for _, tc := range []struct {
		name          string
		upstreamLimit int
	}{{"upstream default equals the proxy's", limit}, {"upstream default larger", 0}} {
		t.Run(tc.name, func(t *testing.T) {
			up, err := DialUpstream(addr, UpstreamOptions{MaxMsgSize: tc.upstreamLimit})
			if err != nil {
				t.Fatal(err)
			}
			p, err := New(StaticDirector(up), WithMaxMsgSize(limit))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = p.Close() })
			via := dial(t, serve(t, p.NewServer()))
			req := mustMarshal(t, simpleRequest("simple", 16))
			for _, size := range []int{limit / 2, limit + 1} {
				ctx := metadata.AppendToOutgoingContext(ctxT(t), "x-size", strconv.Itoa(size))
				resp, err := rawInvoke(ctx, via, "/inference.GRPCInferenceService/ModelInfer", req)
				switch {
				case size <= limit && (err != nil || len(resp) != size):
					t.Errorf("%d-byte answer: %v, %d bytes", size, err, len(resp))
				case size > limit && (status.Code(err) != codes.ResourceExhausted ||
					// The proxy's upstream call refused it, not its
					// server's send limit further on.
					!strings.Contains(status.Convert(err).Message(), "received message larger than max")):
					t.Errorf("%d-byte answer over the %d-byte limit: %v, want ResourceExhausted from the upstream call", size, limit, err)
				}
			}
		})
	}
}
