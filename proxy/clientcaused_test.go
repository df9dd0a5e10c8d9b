package proxy

import (
	"context"
	"github.com/infergate/infergate/proxy/route"
	"io"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/infergate/infergate/monitor"
)

// TestCallClassClientDeadline: a DEADLINE_EXCEEDED is the client's when
// the deadline the client sent ran out, the server's when the proxy's
// upstream timeout did or the call carried no deadline.
func TestCallClassClientDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Millisecond)
		defer cancel()
		dl := status.Error(codes.DeadlineExceeded, "context deadline exceeded")
		if got := callClass(ctx, codes.DeadlineExceeded, dl); got != monitor.CodeClassServerError {
			t.Errorf("deadline not yet passed: %q, want server_error", got)
		}
		time.Sleep(3 * time.Millisecond)
		if got := callClass(ctx, codes.DeadlineExceeded, dl); got != monitor.CodeClassClientError {
			t.Errorf("client's deadline ran out: %q, want client_error", got)
		}
		if got := callClass(ctx, codes.DeadlineExceeded, &proxyTimeoutError{timeout: time.Second}); got != monitor.CodeClassServerError {
			t.Errorf("proxy's upstream timeout: %q, want server_error", got)
		}
		if got := callClass(context.Background(), codes.DeadlineExceeded, dl); got != monitor.CodeClassServerError {
			t.Errorf("no client deadline: %q, want server_error", got)
		}
		if got := callClass(ctx, codes.Unavailable, dl); got != monitor.CodeClassServerError {
			t.Errorf("UNAVAILABLE: %q, want server_error", got)
		}
	})
}

// TestBreakerIgnoresClientDeadlines: calls whose client's own deadline
// ran out never open a healthy upstream's breaker; the proxy's own
// deadline and a call slower than slow_call still count.
func TestBreakerIgnoresClientDeadlines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := BreakerConfig{ConsecutiveFailures: 3, OpenFor: time.Minute, SlowCall: time.Second}
		b := route.NewBreaker("up", "m", cfg, time.Now, nil)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Millisecond)
		defer cancel()
		time.Sleep(3 * time.Millisecond)
		expired := attemptResult{err: status.Error(codes.DeadlineExceeded, "context deadline exceeded"), upstream: 2 * time.Millisecond}
		for range 100 {
			reportTo(b, ctx, true, nil, expired)
		}
		if b.State() != BreakerClosed {
			t.Fatalf("state %s after 100 client deadlines, want closed", b.State())
		}
		for range 3 {
			reportTo(b, ctx, false, nil, expired) // the proxy's own deadline
		}
		if b.State() != BreakerOpen {
			t.Fatalf("state %s after 3 proxy deadlines, want open", b.State())
		}
		b2 := route.NewBreaker("up2", "m", cfg, time.Now, nil)
		slow := attemptResult{err: expired.err, upstream: 2 * time.Second}
		for range 3 {
			reportTo(b2, ctx, true, nil, slow)
		}
		if b2.State() != BreakerOpen {
			t.Fatalf("state %s after 3 calls slower than slow_call, want open", b2.State())
		}
	})
}

// TestConnectionClosingIsUnavailable: CANCELED made by the proxy's own
// client ("the client connection is closing") while the client's call is
// live reaches the client as UNAVAILABLE naming the upstream; a call the
// client cancelled stays CANCELED.
func TestConnectionClosingIsUnavailable(t *testing.T) {
	p, err := New(StaticDirector(namedUpstream("fb")), WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		t.Fatal(err)
	}
	closing := status.Error(codes.Canceled, "grpc: the client connection is closing")
	st := status.Convert(statusOf(p.upstreamFailed(context.Background(), namedUpstream("fb"), "/m", closing, false)))
	if st.Code() != codes.Unavailable || !strings.Contains(st.Message(), "fb") || !strings.Contains(st.Message(), "closing") {
		t.Errorf("live call: %v %q, want UNAVAILABLE naming the upstream and the closing connection", st.Code(), st.Message())
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if c := status.Code(statusOf(p.upstreamFailed(ctx, namedUpstream("fb"), "/m", status.Error(codes.Canceled, "context canceled"), false))); c != codes.Canceled {
		t.Errorf("client cancelled: %v, want CANCELED", c)
	}
}

// TestClientDeadlineHit: an upstream's DEADLINE_EXCEEDED a hair before
// the client's deadline fires here is the client's deadline running out
// (the upstream enforces it on its own clock); one well before it is
// not.
func TestClientDeadlineHit(t *testing.T) {
	deadlineErr := &upstreamError{err: status.Error(codes.DeadlineExceeded, "stream terminated by RST_STREAM with error code: CANCEL")}
	cases := []struct {
		name string
		left time.Duration
		err  error
		want bool
	}{
		{"upstream's DEADLINE_EXCEEDED 1ms before the deadline", time.Millisecond, deadlineErr, true},
		{"upstream's DEADLINE_EXCEEDED 1s before the deadline", time.Second, deadlineErr, false},
		{"another code near the deadline", time.Millisecond, &upstreamError{err: status.Error(codes.Unavailable, "x")}, false},
	}
	for _, tc := range cases {
		ctx, cancel := context.WithTimeout(context.Background(), tc.left)
		if got := clientDeadlineHit(ctx, tc.err); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
		cancel()
	}
	ctx, cancel := context.WithTimeout(context.Background(), -time.Second)
	defer cancel()
	if !clientDeadlineHit(ctx, nil) {
		t.Error("an expired context is the deadline running out")
	}
}
