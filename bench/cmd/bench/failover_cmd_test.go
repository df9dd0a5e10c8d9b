package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestFailoverUsageErrors(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"missing binaries", []string{"failover", "-simserver", "/nonexistent/simserver", "-infergate", "/nonexistent/infergate"}, "binary not found"},
		{"zero rate", []string{"failover", "-rate", "0"}, "must be positive"},
		{"unknown fault", []string{"failover", "-faults", "hang,meteor"}, `fault "meteor"`},
		{"bad ratio", []string{"failover", "-failure-ratio", "2"}, "failure ratio 2"},
		{"stray argument", []string{"failover", "extra"}, `unexpected argument "extra"`},
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
