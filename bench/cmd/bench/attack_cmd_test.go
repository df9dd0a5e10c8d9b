package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/infergate/infergate/internal/attack"
	"github.com/infergate/infergate/internal/stubserver"
)

func TestAttackCommand(t *testing.T) {
	srv, err := stubserver.Start(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	var out, errOut bytes.Buffer
	if code := run(t.Context(), []string{"attack", "malformed-neighbour", "-addr", srv.Addr}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	for _, want := range []string{"attack: malformed-neighbour", "goaway: none", "good call answered: true"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}

	out.Reset()
	if code := run(t.Context(), []string{"attack", "empty-headers", "-addr", srv.Addr, "-streams", "100", "-json"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	var r attack.Report
	if err := json.Unmarshal(out.Bytes(), &r); err != nil || r.Attack != "empty-headers" || r.Streams != 100 {
		t.Errorf("-json report %+v, %v; want empty-headers with 100 streams", r, err)
	}
}

func TestAttackUsageErrors(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"no attack", []string{"attack"}, "name an attack"},
		{"unknown attack", []string{"attack", "slowloris"}, `unknown attack "slowloris"`},
		{"remote target", []string{"attack", "rapid-reset", "-addr", "192.0.2.1:9001"}, "only loopback"},
		{"stray argument", []string{"attack", "rapid-reset", "extra"}, `unexpected argument "extra"`},
		{"bad length", []string{"attack", "huge-length", "-length", "0", "-addr", "127.0.0.1:1"}, "-length 0"},
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
