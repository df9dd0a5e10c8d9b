package h2relay

import (
	"bytes"
	"context"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
)

// A call the Handler serves gets what the Handler wrote through its
// Responder, header, message and trailer, and nothing reaches the upstream
// or Done.
func TestServedCallAnswersThroughResponder(t *testing.T) {
	e := newRelayEnv(t, Options{})
	cc := e.dial()
	for _, size := range []int{3, 1 << 20} {
		req := bytes.Repeat([]byte("s"), size)
		var header, trailer metadata.MD
		got, err := call(testCtx(t), cc, "/t.S/Served", req, grpc.Header(&header), grpc.Trailer(&trailer))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, req) || header.Get("x-served")[0] != "yes" || trailer.Get("x-trailer")[0] != "t" {
			t.Fatalf("served call: %d bytes (want %d), header %v, trailer %v", len(got), len(req), header, trailer)
		}
	}
	e.settled()
	select {
	case r := <-e.h.done:
		t.Fatalf("Done heard a served call: %+v", r)
	default:
	}
}

// A served call's context ends when its client cancels, and the relay
// forgets the stream.
func TestServedCallSeesClientCancel(t *testing.T) {
	e := newRelayEnv(t, Options{})
	cc := e.dial()
	ctx, cancel := context.WithCancel(testCtx(t))
	errc := make(chan error, 1)
	go func() {
		_, err := call(ctx, cc, "/t.S/ServedWait", []byte("x"))
		errc <- err
	}()
	// Cancel once the handler waits: its context must end with it.
	receive(t, e.h.waiting, "the handler's start")
	cancel()
	if err := receive(t, errc, "client's end"); codeOf(err) != codes.Canceled {
		t.Fatalf("client got %v", err)
	}
	if err := receive(t, e.h.served, "handler's context end"); err != context.Canceled {
		t.Fatalf("handler's context ended with %v, want Canceled", err)
	}
	e.settled()
}
