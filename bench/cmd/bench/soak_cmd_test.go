package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestSoakUsageErrors(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"missing binaries", []string{"soak", "-simserver", "/nonexistent/simserver", "-infergate", "/nonexistent/infergate"}, "binary not found"},
		{"zero rate", []string{"soak", "-rate", "0"}, "must be positive"},
		{"sample longer than run", []string{"soak", "-d", "10s", "-sample", "1m"}, "longer than the duration"},
		{"bad arrival", []string{"soak", "-arrival", "burst"}, `arrival "burst"`},
		{"stray argument", []string{"soak", "extra"}, `unexpected argument "extra"`},
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
