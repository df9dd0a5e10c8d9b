package proxy_test

import (
	"log"
	"net"

	"github.com/infergate/infergate/proxy"
)

// ExampleNew puts a proxy in front of one Triton server.
func ExampleNew() {
	up, err := proxy.DialUpstream("127.0.0.1:8001", proxy.UpstreamOptions{})
	if err != nil {
		log.Fatal(err)
	}
	p, err := proxy.New(proxy.StaticDirector(up))
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()

	srv := p.NewServer()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	// ... on shutdown: let calls in flight finish, then close upstreams.
	srv.GracefulStop()
}
