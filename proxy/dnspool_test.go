package proxy

import (
	"context"
	"net"
	"testing"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/infergate/infergate/internal/dnstest"
)

// A dns:/// upstream is a pool of the name's addresses: one that appears
// takes calls at the next resolution, one that goes is retired, and no
// call fails meanwhile.
func TestDNSPoolFollowsTheName(t *testing.T) {
	// Three backends on one port of three loopback addresses, as pods of
	// a headless Service listen on one port.
	first, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(first.Addr().String())
	lis := []net.Listener{first}
	for _, ip := range []string{"127.0.0.2", "127.0.0.3"} {
		l, err := net.Listen("tcp", net.JoinHostPort(ip, port))
		if err != nil {
			t.Skipf("loopback %s:%s: %v", ip, port, err)
		}
		lis = append(lis, l)
	}
	for _, l := range lis {
		_, srv := newBackend()
		go func() { _ = srv.Serve(l) }()
		t.Cleanup(srv.Stop)
	}
	dns := dnstest.Start(t)
	dns.Set("127.0.0.1", "127.0.0.2")
	up, err := DialUpstream("dns:///models.example:"+port, UpstreamOptions{Resolver: dns.Resolver(), ResolveEvery: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	addrsOf := func() map[string]bool {
		m := map[string]bool{}
		for _, e := range up.Endpoints() {
			m[e.Address()] = true
		}
		return m
	}
	if got := addrsOf(); len(got) != 2 || !got["127.0.0.1:"+port] || !got["127.0.0.2:"+port] {
		t.Fatalf("endpoints %v, want the name's two addresses", got)
	}
	if up.Address() != "dns:///models.example:"+port {
		t.Errorf("address %q, want the target", up.Address())
	}
	hc := healthpb.NewHealthClient(up)
	call := func() {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := hc.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
			t.Fatalf("call: %v", err)
		}
	}
	dns.Set("127.0.0.1", "127.0.0.2", "127.0.0.3")
	deadline := time.Now().Add(10 * time.Second)
	for !addrsOf()["127.0.0.3:"+port] {
		if time.Now().After(deadline) {
			t.Fatalf("the new address never became an endpoint: %v", addrsOf())
		}
		call()
		time.Sleep(20 * time.Millisecond)
	}
	dns.Set("127.0.0.1", "127.0.0.3")
	for addrsOf()["127.0.0.2:"+port] {
		if time.Now().After(deadline) {
			t.Fatalf("the address gone from the name is still an endpoint: %v", addrsOf())
		}
		call()
		time.Sleep(20 * time.Millisecond)
	}
	for range 20 {
		call()
	}
}
