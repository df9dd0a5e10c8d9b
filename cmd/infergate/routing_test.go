package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/infergate/infergate/proxy"
)

func TestRoutingConfigFromYAMLAndFlags(t *testing.T) {
	c, err := parseConfig([]string{"--config", "testdata/config.routes.yaml", "--fallback", "bert=127.0.0.1:9999/tinybert:1"})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Upstreams) != 2 || c.Upstreams[0].Breaker.SlowCall != 250*time.Millisecond {
		t.Errorf("upstreams: %+v", c.Upstreams)
	}
	if len(c.Routes) != 2 {
		t.Fatalf("routes: %+v", c.Routes)
	}
	if fb := c.Routes[1].Fallback; fb.Address != "127.0.0.1:9999" || fb.Model != "tinybert" || fb.Version != "1" {
		t.Errorf("--fallback did not replace the file's fallback of bert: %+v", fb)
	}
	// The plan validation made is what startRouting opens.
	rt, err := proxy.OpenRouting(c.routes, proxy.UpstreamOptions{Conns: c.UpstreamConns}, fakeDial)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	if bc := rt.Router.Breakers[rt.Default]; len(bc.FailureCodes) != 2 || bc.SlowCall != 250*time.Millisecond {
		t.Errorf("breaker config %+v", bc)
	}
	if len(rt.Router.Routes) != 2 || rt.Router.Routes[1].Fallback.Upstream.Name() != "127.0.0.1:9999" {
		t.Errorf("routes %+v", rt.Router.Routes)
	}

	c, err = parseConfig([]string{"--upstream", "127.0.0.1:8001", "--fallback", "resnet50=127.0.0.1:8501/mobilenet_v3",
		"--fallback", "bert=127.0.0.1:8601"})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Routes) != 2 || c.Routes[0].Fallback.Model != "mobilenet_v3" || c.Routes[1].Fallback.Model != "" {
		t.Errorf("routes from flags: %+v", c.Routes)
	}
}

func TestRoutingConfigErrorsNameTheField(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"routes: [{model: a, fallback: {upstream: nope}}]\nupstream: 127.0.0.1:1", `config: routes[a].fallback.upstream: no upstream named "nope" in upstreams`},
		{"routes: [{model: a, mode: cascade, fallback: {model: b}}]\nupstream: 127.0.0.1:1", "config: routes[a].cascade.output: required in cascade mode"},
		{"routes: [{model: a, mode: cascade, fallback: {model: b}, cascade: {output: p, threshold: 2}}]\nupstream: 127.0.0.1:1", "config: routes[a].cascade.threshold: must be in (0, 1], got 2"},
		{"routes: [{model: a, hedge_after: soon}]\nupstream: 127.0.0.1:1", `config: routes[a].hedge_after: must be a positive duration (e.g. 100ms), auto or off, got "soon"`},
		{"routes: [{model: a, mode: edge}]\nupstream: 127.0.0.1:1", `config: routes[a].mode: must be fallback or cascade, got "edge"`},
		{"routes: [{model: a}, {model: a}]\nupstream: 127.0.0.1:1", `config: routes[a].model: "a" has two routes`},
		{"upstreams: [{name: p, address: nowhere}]", `config: upstreams[0].address: "nowhere" is not host:port`},
		{"upstreams: [{name: p, address: 127.0.0.1:1, breaker: {failure_codes: [SOMETIMES]}}]", `config: upstreams[0].breaker: failure_codes: unknown gRPC code "SOMETIMES"`},
		{"upstreams: [{name: p, address: 127.0.0.1:1, breaker: {window: 10ms}}]", "config: upstreams[0].breaker: window: must be at least 1s, got 10ms"},
		{"upstream: 127.0.0.1:1\nbreaker: {failure_ratio: 1.5}", "config: breaker: failure_ratio: must be at most 1, got 1.5"},
		{"upstream: 127.0.0.1:1\nretry_budget: {ratio: 3}", "config: retry_budget.ratio: must be at most 1, got 3"},
		{"upstreams: [{name: p, address: 127.0.0.1:1, conns: 0}]", "config: upstreams[0].conns: must be between 1 and 64, got 0"},
	} {
		path := filepath.Join(t.TempDir(), "c.yaml")
		if err := os.WriteFile(path, []byte(tc.yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := parseConfig([]string{"--config", path})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.yaml, err, tc.want)
		}
	}
	for _, v := range []string{"resnet50", "=127.0.0.1:1", "resnet50=nowhere/m"} {
		if _, err := parseConfig([]string{"--upstream", "127.0.0.1:1", "--fallback", v}); err == nil || !strings.Contains(err.Error(), "fallback") {
			t.Errorf("--fallback %q: error %v", v, err)
		}
	}
}

// TestUpstreamConnsFromFile: a named upstream without conns gets
// upstream_conns (the flag's, which wins over the file's); its own conns
// wins over both.
func TestUpstreamConnsFromFile(t *testing.T) {
	file := writeYAML(t, "upstream_conns: 3", "upstreams:", "  - {name: p, address: 127.0.0.1:1}", "  - {name: q, address: 127.0.0.1:2, conns: 5}")
	c, err := parseConfig([]string{"--config", file, "--upstream-conns", "4"})
	if err != nil {
		t.Fatal(err)
	}
	conns := map[string]int{}
	rt, err := proxy.OpenRouting(c.routes, proxy.UpstreamOptions{Conns: c.UpstreamConns}, func(target string, o proxy.UpstreamOptions) (*proxy.Upstream, error) {
		conns[o.Name] = o.Conns
		return fakeDial(target, o)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	if conns["p"] != 4 || conns["q"] != 5 {
		t.Errorf("conns %v, want p 4 (--upstream-conns) and q 5 (its own)", conns)
	}
}

// fakeDial opens an upstream without I/O: its connection never connects.
func fakeDial(target string, o proxy.UpstreamOptions) (*proxy.Upstream, error) {
	cc, err := grpc.NewClient("passthrough:///"+target, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	return proxy.NewUpstream(o.Name, cc)
}
