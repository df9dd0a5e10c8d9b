package main

import (
	"bytes"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestHealthcheckCommand: the image's HEALTHCHECK exits 0 only on a 2xx
// answer, 1 when not ready or unreachable, 2 on bad usage, and prints the
// readiness body (the reason) for the container runtime to keep.
func TestHealthcheckCommand(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ok":
			w.Write([]byte(`{"ready":true}`))
		case "/hang":
			time.Sleep(time.Second)
		default:
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte(`{"ready":false,"reason":"draining"}`))
		}
	}))
	defer srv.Close()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + lis.Addr().String() + "/readyz"
	lis.Close()

	for _, tc := range []struct {
		name string
		args []string
		code int
		out  string
	}{
		{"ready", []string{srv.URL + "/ok"}, 0, "200 OK"},
		{"not ready", []string{srv.URL + "/readyz"}, 1, `"reason":"draining"`},
		{"unreachable", []string{closed}, 1, ""},
		{"timeout", []string{"--timeout", "50ms", srv.URL + "/hang"}, 1, ""},
		{"not a URL", []string{"127.0.0.1:9091/readyz"}, 2, ""},
		{"two URLs", []string{srv.URL, srv.URL}, 2, ""},
		{"zero timeout", []string{"--timeout", "0s", srv.URL}, 2, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			if code := healthcheckCommand(tc.args, &out, &errOut); code != tc.code {
				t.Fatalf("exit %d, want %d; stdout %q stderr %q", code, tc.code, out.String(), errOut.String())
			}
			if !strings.Contains(out.String(), tc.out) {
				t.Errorf("stdout %q lacks %q", out.String(), tc.out)
			}
		})
	}
}
