package attack

import (
	"context"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/infergate/infergate/internal/stubserver"
)

// Each attack, scaled down, against grpc-go's own server (the stub): the
// frames are well formed enough for a real server to answer them, and
// the reports say what it did.

func stub(t *testing.T) string {
	t.Helper()
	srv, err := stubserver.Start(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	return srv.Addr
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func TestRapidReset(t *testing.T) {
	r, err := RapidReset(ctx(t), stub(t), RapidResetParams{Duration: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", r)
	if r.Streams < 100 || r.Frames < 3*r.Streams || r.Stopped != "" {
		t.Errorf("rapid reset sent %d streams in %d frames, stopped %q; want >= 100 streams of 3 frames each, to the end", r.Streams, r.Frames, r.Stopped)
	}
}

func TestEmptyHeaders(t *testing.T) {
	r, err := EmptyHeaders(ctx(t), stub(t), EmptyHeadersParams{Streams: 2000})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", r)
	// grpc-go answers each with INTERNAL (no request message), trailers only.
	if r.Streams != 2000 || r.Answered != 2000 {
		t.Errorf("%d streams sent, %d answered; want 2000 and 2000", r.Streams, r.Answered)
	}
}

func TestHoldStreams(t *testing.T) {
	r, err := HoldStreams(ctx(t), stub(t), HoldStreamsParams{Streams: 500, Hold: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", r)
	if r.Streams != 500 || r.Answered != 0 || r.GoAway != nil {
		t.Errorf("%d streams held, %d answered, GOAWAY %v; want 500 held, none answered, no GOAWAY", r.Streams, r.Answered, r.GoAway)
	}
}

func TestNeverRead(t *testing.T) {
	r, err := NeverRead(ctx(t), stub(t), NeverReadParams{Streams: 4, AnswerBytes: 256 << 10, Hold: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", r)
	if r.Streams != 4 || r.Uploaded != 4 || r.Stopped != "" || r.Bytes < 4*256<<10 {
		t.Errorf("%d streams, %d bytes sent, stopped %q; want 4 whole requests sent", r.Streams, r.Bytes, r.Stopped)
	}
	// grpc-go answers a unary call at its END_STREAM, which comes last.
	if r.AnswerBytes != 0 {
		t.Errorf("%d answer bytes read before the reader stopped, want none", r.AnswerBytes)
	}
}

func TestHugeLength(t *testing.T) {
	r, err := HugeLength(ctx(t), stub(t), HugeLengthParams{Duration: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", r)
	// The stub allows 256 MiB messages: grpc-go refuses a 1 GB one at
	// once and resets the stream.
	if r.GRPCStatus != "8" || r.Accepted == 0 || r.Accepted > 1<<20 {
		t.Errorf("grpc-status %q after %d bytes accepted; want RESOURCE_EXHAUSTED (8) after some, < 1 MiB", r.GRPCStatus, r.Accepted)
	}
}

func TestMalformedNeighbour(t *testing.T) {
	addr := stub(t)
	for _, m := range []string{"uppercase", "second-path"} {
		t.Run(m, func(t *testing.T) {
			r, err := MalformedNeighbour(ctx(t), addr, MalformedNeighbourParams{Malformation: m})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("\n%s", r)
			if !r.GoodAnswered || r.GoAway != nil || r.NeighbourReset != http2.ErrCodeProtocol.String() {
				t.Errorf("good call answered %v, GOAWAY %v, malformed stream reset %q; grpc-go answers the good call, resets the other PROTOCOL_ERROR",
					r.GoodAnswered, r.GoAway, r.NeighbourReset)
			}
		})
	}
	if _, err := MalformedNeighbour(ctx(t), addr, MalformedNeighbourParams{Malformation: "bogus"}); err == nil || !strings.Contains(err.Error(), "bogus") {
		t.Errorf("unknown malformation: %v, want an error naming it", err)
	}
}

func TestBigUploads(t *testing.T) {
	r, err := BigUploads(ctx(t), stub(t), BigUploadsParams{Callers: 3, Bytes: 64 << 10, Duration: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", r)
	if r.OK < 3 || r.Failed != 0 {
		t.Errorf("%d ok, %d failed (%s); want >= 3 ok, none failed", r.OK, r.Failed, r.FirstError)
	}
}
