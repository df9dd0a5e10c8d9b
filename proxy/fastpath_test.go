package proxy

import (
	"context"
	"reflect"
	"testing"

	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/metadata"

	"strings"

	"google.golang.org/grpc"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/infergate/infergate/monitor"
	"github.com/infergate/infergate/proto/kservepb"
	"github.com/infergate/infergate/proxy/h2relay"
	"github.com/infergate/infergate/proxy/route"
)

// TestFastPathTakesEachCallItsWay checks which path the relay gives each
// kind of call, so a change that quietly sends plain calls back through
// the gRPC stacks (a content-type it does not expect, a director it cannot
// see through) fails here and not only in a benchmark: plain calls are
// forwarded, a routed model's calls served by the handler, a malformed
// request handed to the grpc.Server, and each is recorded alike.
func TestFastPathTakesEachCallItsWay(t *testing.T) {
	if grpcPathOnly {
		t.Skip("the relay is off in this run")
	}
	b := startBackend(t)
	up, err := DialUpstream(b.addr, UpstreamOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = up.Close() })
	r, err := route.NewRouter(route.RouterOptions{Routes: []route.RouteConfig{{Model: "routed", Fallback: &route.FallbackTarget{Model: "simple"}}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	rec := newFakeRecorder()
	p, err := New(UpstreamDirector(up), WithRecorder(rec), WithRouter(r))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	cc := dial(t, serveFront(t, p, p.NewServer()))
	ks := kservepb.NewGRPCInferenceServiceClient(cc)

	want := Stats{}
	check := func(what string) {
		t.Helper()
		got := p.Stats()
		if got.Forwarded != want.Forwarded || got.Served != want.Served || got.HandedOn != want.HandedOn {
			t.Fatalf("after %s: forwarded/served/handed on %d/%d/%d, want %d/%d/%d", what,
				got.Forwarded, got.Served, got.HandedOn, want.Forwarded, want.Served, want.HandedOn)
		}
	}
	record := func(model string) monitor.Sample {
		t.Helper()
		r := rec.next(t)
		if r.key.Model != model || r.key.Method != "/inference.GRPCInferenceService/ModelInfer" || r.key.CodeClass != "ok" {
			t.Fatalf("record %+v, want an ok ModelInfer of %s", r.key, model)
		}
		return r.sm
	}

	req := simpleRequest("simple", 64)
	if _, err := ks.ModelInfer(ctxT(t), req); err != nil {
		t.Fatal(err)
	}
	want.Forwarded++
	check("a plain call")
	if sm := record("simple"); sm.BytesIn != int64(len(mustMarshal(t, req))) || sm.BytesOut == 0 || sm.Upstream <= 0 {
		t.Errorf("forwarded call's sample %+v: bytes in should be the request's %d, out and upstream time set", sm, len(mustMarshal(t, req)))
	}

	if _, err := ks.ModelInfer(ctxT(t), simpleRequest("routed", 64)); err != nil {
		t.Fatal(err)
	}
	want.Served++
	check("a routed model's call")
	record("routed")

	// Two messages where one belongs: grpc-go's answer (INTERNAL,
	// cardinality), on the fast path from the relay itself,
	// on the gRPC path from the grpc.Server.
	cs, err := cc.NewStream(ctxT(t), &grpc.StreamDesc{ClientStreams: true, ServerStreams: true},
		"/inference.GRPCInferenceService/ModelInfer", grpc.ForceCodecV2(Codec()))
	if err != nil {
		t.Fatal(err)
	}
	one := NewFrame(mustMarshal(t, req))
	if err := cs.SendMsg(one); err != nil {
		t.Fatal(err)
	}
	if err := cs.SendMsg(one); err != nil {
		t.Fatal(err)
	}
	if err := cs.CloseSend(); err != nil {
		t.Fatal(err)
	}
	err = cs.RecvMsg(new(Frame))
	if st := status.Convert(err); st.Code() != codes.Internal || !strings.Contains(st.Message(), "cardinality violation: received multiple request messages") {
		t.Fatalf("two messages: %v, want grpc-go's INTERNAL cardinality violation", err)
	}
	check("a request of two messages")
	if r := rec.next(t); r.key.Model != "simple" || r.sm.Code != "Internal" {
		t.Fatalf("two messages recorded as %+v %s, want model simple, Internal", r.key, r.sm.Code)
	}

	// A client's cancel reaches the upstream through the forwarded path.
	ctx, cancel := context.WithCancel(ctxT(t))
	done := make(chan error, 1)
	go func() {
		_, err := ks.ModelInfer(ctx, simpleRequest("block", 16))
		done <- err
	}()
	<-b.entered
	cancel()
	if err := <-done; status.Code(err) != codes.Canceled {
		t.Fatalf("cancelled call: %v, want Canceled", err)
	}
	if rep := <-b.blocked; rep.err == nil {
		t.Error("the upstream did not see the client's cancel")
	}
	if r := rec.next(t); r.key.Model != "block" || r.key.CodeClass != monitor.CodeClassClientError {
		t.Errorf("cancelled call recorded as %+v, want model block, client_error", r.key)
	}
}

// relayMetadata makes the metadata grpc-go's server would: reserved
// headers out (but content-type, user-agent, grpc-accept-encoding), binary
// values decoded padded or not, and a value that is not base64 reported.
func TestRelayMetadataAsGRPCGo(t *testing.T) {
	c := &h2relay.Call{Header: []hpack.HeaderField{
		{Name: "content-type", Value: "application/grpc"}, {Name: "user-agent", Value: "ua"},
		{Name: "te", Value: "trailers"}, {Name: "grpc-timeout", Value: "1S"}, {Name: "grpc-encoding", Value: "identity"},
		{Name: "x-id", Value: "a"}, {Name: "x-id", Value: "b"},
		{Name: "x-raw-bin", Value: "AQI"}, {Name: "x-pad-bin", Value: "AQI="},
	}}
	md, err := relayMetadata(c)
	if err != nil {
		t.Fatal(err)
	}
	want := metadata.MD{"content-type": {"application/grpc"}, "user-agent": {"ua"}, "x-id": {"a", "b"},
		"x-raw-bin": {"\x01\x02"}, "x-pad-bin": {"\x01\x02"}}
	if !reflect.DeepEqual(md, want) {
		t.Errorf("metadata %v, want %v", md, want)
	}
	c.Header = append(c.Header, hpack.HeaderField{Name: "x-bad-bin", Value: "!!"})
	if _, err := relayMetadata(c); err == nil {
		t.Error("a -bin value that is not base64 passed")
	}
}
