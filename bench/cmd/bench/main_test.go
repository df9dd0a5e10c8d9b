package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/infergate/infergate/bench/load"
	"github.com/infergate/infergate/internal/stubserver"
)

func TestLoadCommand(t *testing.T) {
	srv, err := stubserver.Start(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	dir := t.TempDir()
	jsonPath, mdPath := filepath.Join(dir, "r.json"), filepath.Join(dir, "r.md")
	var stdout, stderr bytes.Buffer
	code := run(t.Context(), []string{"load", "-target", srv.Addr, "-proto", "tf", "-model", "half_plus_two",
		"-c", "2", "-n", "30", "-warmup", "0", "-d", "0", "-q", "-out", jsonPath, "-md", mdPath}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "### tf half_plus_two @ "+srv.Addr) || !strings.Contains(stdout.String(), "| half_plus_two | closed | c=2  |  30 |") {
		t.Errorf("stdout:\n%s", stdout.String())
	}
	md, err := os.ReadFile(mdPath)
	if err != nil || string(md) != stdout.String() {
		t.Errorf("markdown file = %q, %v", md, err)
	}
	var res load.Result
	data, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &res); err != nil || res.Completed != 30 || res.Model != "half_plus_two" {
		t.Errorf("json result %+v, %v", res, err)
	}
	if srv.LastModel() != "half_plus_two" {
		t.Errorf("server saw model %q", srv.LastModel())
	}
}

func TestUsageErrors(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want int
	}{
		{"no command", nil, 2},
		{"unknown command", []string{"stress"}, 2},
		{"help", []string{"help"}, 0},
		{"flag help", []string{"load", "-h"}, 0},
		{"remote target", []string{"load", "-target", "192.0.2.1:8001", "-n", "1"}, 2},
		{"bad protocol", []string{"load", "-proto", "http"}, 2},
		{"bad shape", []string{"load", "-shape", "1,-3"}, 2},
		{"missing simserver", []string{"overhead", "-simserver", "/nonexistent/simserver", "-infergate", ""}, 2},
		{"stray argument", []string{"overhead", "extra"}, 2},
		{"bad conns", []string{"overhead", "-conns", "1,x"}, 2},
		{"bad callers", []string{"overhead", "-c", "0"}, 2},
		{"bad size", []string{"overhead", "-size", "simple,huge"}, 2},
		{"missing ghz", []string{"overhead", "-simserver", os.Args[0], "-infergate", "", "-nginx", "", "-ghz", "/nonexistent/ghz"}, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			if got := run(t.Context(), tc.args, &out, &errOut); got != tc.want {
				t.Errorf("exit %d, want %d; stderr: %s", got, tc.want, errOut.String())
			}
		})
	}
}

func TestResolveInputs(t *testing.T) {
	cases := []struct {
		name                       string
		model, names, shape, dtype string
		want                       []load.Tensor
	}{
		{"known model", "simple", "", "", "", []load.Tensor{
			{Name: "INPUT0", Datatype: "INT32", Shape: []int64{1, 16}}, {Name: "INPUT1", Datatype: "INT32", Shape: []int64{1, 16}}}},
		{"unknown model", "custom", "", "", "", []load.Tensor{{Name: "INPUT0", Datatype: "FP32", Shape: []int64{1, 1024}}}},
		{"shape override keeps names", "resnet50", "", "8,64", "", []load.Tensor{{Name: "input", Datatype: "FP32", Shape: []int64{8, 64}}}},
		{"all flags", "m", "a,b", "2", "int32", []load.Tensor{
			{Name: "a", Datatype: "INT32", Shape: []int64{2}}, {Name: "b", Datatype: "INT32", Shape: []int64{2}}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := resolveInputs(tc.model, tc.names, tc.shape, tc.dtype)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.EqualFunc(got, tc.want, func(a, b load.Tensor) bool {
				return a.Name == b.Name && a.Datatype == b.Datatype && slices.Equal(a.Shape, b.Shape)
			}) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestSizeName(t *testing.T) {
	for _, tc := range []struct {
		shape []int64
		want  string
	}{{[]int64{1, 1024}, "4KiB"}, {[]int64{1, 262144}, "1MiB"}, {[]int64{1, 10}, "40B"}} {
		if got := sizeName("x", tc.shape, "FP32"); got != tc.want {
			t.Errorf("sizeName(%v) = %q, want %q", tc.shape, got, tc.want)
		}
	}
}

func TestParseSizes(t *testing.T) {
	got, err := parseSizes("simple, 1MiB,16MiB,4096", "INPUT0", "FP32", 8)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 4 {
		t.Fatalf("payloads = %+v", got)
	}
	if s := got[0]; s.Name != "simple" || s.Model != "simple" || len(s.Inputs) != 2 || s.Concurrency != 8 {
		t.Errorf("simple = %+v", s)
	}
	for i, want := range []struct {
		name  string
		elems int64
	}{{"1MiB", 1 << 18}, {"16MiB", 1 << 22}, {"4KiB", 1024}} {
		s := got[i+1]
		if s.Name != want.name || !slices.Equal(s.Shape, []int64{1, want.elems}) || len(s.Inputs) != 0 {
			t.Errorf("payload %d = %+v, want %s of shape [1 %d]", i+1, s, want.name, want.elems)
		}
	}
	for _, bad := range []string{"huge", "1MiB,", "6B", "-1KiB"} {
		if _, err := parseSizes(bad, "INPUT0", "FP32", 8); err == nil || !strings.Contains(err.Error(), "-size") {
			t.Errorf("parseSizes(%q) = %v, want an error naming -size", bad, err)
		}
	}
	if n, err := parseInts("c", "8, 32"); err != nil || !slices.Equal(n, []int{8, 32}) {
		t.Errorf("parseInts = %v, %v", n, err)
	}
}
