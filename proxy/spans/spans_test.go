package spans

import (
	"testing"

	"google.golang.org/grpc/codes"
)

func TestSemconvFromEnv(t *testing.T) {
	for v, want := range map[string]Semconv{"": SemconvOld, "http": SemconvOld, "rpc": SemconvNew,
		"http,rpc/dup": SemconvDup, "rpc/dup,rpc": SemconvDup} {
		if got := SemconvFromEnv(v); got != want {
			t.Errorf("SemconvFromEnv(%q) = %v, want %v", v, got, want)
		}
	}
	for c, want := range map[codes.Code]string{codes.OK: "OK", codes.Canceled: "CANCELLED",
		codes.PermissionDenied: "PERMISSION_DENIED", codes.Unauthenticated: "UNAUTHENTICATED", 99: "99"} {
		if got := codeName(c); got != want {
			t.Errorf("codeName(%d) = %q, want %q", c, got, want)
		}
	}
}
