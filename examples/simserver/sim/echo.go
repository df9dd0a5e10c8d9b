package sim

import (
	"context"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// EchoPrefix marks request metadata that simserver sends back: a key
// "x-echo-foo" returns as response header "x-echo-foo" and as trailer
// "x-echo-foo-trailer" ("-bin" keys keep their suffix last). Triton does not
// do this; it exists so tests can check that a proxy carries metadata both
// ways, headers and trailers, binary values included.
const EchoPrefix = "x-echo-"

func echoMD(ctx context.Context) (header, trailer metadata.MD) {
	in, _ := metadata.FromIncomingContext(ctx)
	for k, vs := range in {
		if !strings.HasPrefix(k, EchoPrefix) {
			continue
		}
		if header == nil {
			header, trailer = metadata.MD{}, metadata.MD{}
		}
		header[k] = vs
		tk := k + "-trailer"
		if base, ok := strings.CutSuffix(k, "-bin"); ok {
			tk = base + "-trailer-bin"
		}
		trailer[tk] = vs
	}
	return header, trailer
}

func echoUnary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if h, t := echoMD(ctx); h != nil {
		grpc.SetHeader(ctx, h)
		grpc.SetTrailer(ctx, t)
	}
	return handler(ctx, req)
}

func echoStream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if h, t := echoMD(ss.Context()); h != nil {
		ss.SetHeader(h)
		ss.SetTrailer(t)
	}
	return handler(srv, ss)
}
