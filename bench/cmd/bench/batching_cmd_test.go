package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestBatchingUsageErrors(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"missing binaries", []string{"batching", "-simserver", "/nonexistent/simserver", "-infergate", "/nonexistent/infergate"}, "binary not found"},
		{"bad static", []string{"batching", "-static", "64"}, "want SIZE:DELAY"},
		{"bad loads", []string{"batching", "-loads", "0.1,x"}, `number "x"`},
		{"bad plot format", []string{"batching", "-plot", "gif"}, `plot format "gif"`},
		{"stray argument", []string{"batching", "extra"}, `unexpected argument "extra"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			if got := run(t.Context(), tc.args, &out, &errOut); got != 2 {
				t.Errorf("exit %d, want 2; stderr: %s", got, errOut.String())
			}
			if !strings.Contains(errOut.String(), tc.want) {
				t.Errorf("stderr %q lacks %q", errOut.String(), tc.want)
			}
		})
	}
}
