package grpcwire

import (
	"testing"
	"time"
)

// grpc-timeout round-trips: what is sent upstream is never less than the
// time left, at most one unit more, in 8 digits; bad values are refused.
func TestGRPCTimeoutRoundTrip(t *testing.T) {
	for _, d := range []time.Duration{time.Nanosecond, 999 * time.Microsecond, 1500 * time.Millisecond, 3 * time.Hour, 1<<63 - 1} {
		s := EncodeTimeout(d)
		if len(s) > 9 {
			t.Errorf("%v: %q has more than 8 digits", d, s)
		}
		got, ok := DecodeTimeout(s)
		if !ok || got < d && s != "99999999H" {
			t.Errorf("%v: %q decodes to %v, %v", d, s, got, ok)
		}
	}
	for s, want := range map[string]time.Duration{"10m": 10 * time.Millisecond, "3S": 3 * time.Second, "1H": time.Hour, "7u": 7 * time.Microsecond} {
		if got, ok := DecodeTimeout(s); !ok || got != want {
			t.Errorf("%q: %v %v, want %v", s, got, ok, want)
		}
	}
	for _, s := range []string{"", "5", "5x", "-1S", "1234567890S", "aS"} {
		if _, ok := DecodeTimeout(s); ok {
			t.Errorf("%q accepted", s)
		}
	}
}
