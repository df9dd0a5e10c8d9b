package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestUploadsUsageErrors(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"missing binaries", []string{"uploads", "-simserver", "/nonexistent/simserver", "-infergate", "/nonexistent/infergate"}, "binary not found"},
		{"no proxy", []string{"uploads", "-infergate", "", "-nginx", "", "-haproxy", ""}, "no proxy to measure"},
		{"zero callers", []string{"uploads", "-c", "0"}, "must be positive"},
		{"bad size", []string{"uploads", "-bytes", "lots"}, `-bytes "lots": want a size`},
		{"odd size", []string{"uploads", "-bytes", "6B"}, "multiple of 4"},
		{"stray argument", []string{"uploads", "extra"}, `unexpected argument "extra"`},
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
