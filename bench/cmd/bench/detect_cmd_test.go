package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestDetectUsageErrors(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"missing binaries", []string{"detect", "-simserver", "/nonexistent/simserver", "-infergate", "/nonexistent/infergate"}, "binary not found"},
		{"scale below 1", []string{"detect", "-scale", "0.5"}, "scale 0.5"},
		{"negative rate", []string{"detect", "-rate-min", "-1"}, "must be positive"},
		{"stray argument", []string{"detect", "extra"}, `unexpected argument "extra"`},
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
