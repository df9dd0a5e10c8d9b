// Package dnstest is a DNS server on loopback for tests: it answers A
// queries for any name with the addresses the test sets, as a Kubernetes
// headless Service's DNS answers with the pods ready now. Resolvers ask
// it over UDP, the real protocol (golang.org/x/net/dns/dnsmessage).
package dnstest

import (
	"context"
	"net"
	"sync"
	"testing"

	"golang.org/x/net/dns/dnsmessage"
)

// Server is a DNS server on loopback UDP that answers A queries for
// one name with the addresses the test sets: what a Kubernetes headless
// Service's DNS does as pods come and go.
type Server struct {
	// Addr is its host:port.
	Addr string
	mu   sync.Mutex
	ips  []net.IP
}

func Start(t testing.TB) *Server {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	s := &Server{Addr: pc.LocalAddr().String()}
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			var p dnsmessage.Parser
			h, err := p.Start(buf[:n])
			if err != nil {
				continue
			}
			q, err := p.Question()
			if err != nil {
				continue
			}
			b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true})
			b.EnableCompression()
			_ = b.StartQuestions()
			_ = b.Question(q)
			_ = b.StartAnswers()
			if q.Type == dnsmessage.TypeA {
				s.mu.Lock()
				for _, ip := range s.ips {
					var a [4]byte
					copy(a[:], ip.To4())
					_ = b.AResource(dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 1}, dnsmessage.AResource{A: a})
				}
				s.mu.Unlock()
			}
			out, err := b.Finish()
			if err == nil {
				_, _ = pc.WriteTo(out, from)
			}
		}
	}()
	return s
}

// Set makes the name resolve to ips from now on.
func (s *Server) Set(ips ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ips = nil
	for _, ip := range ips {
		s.ips = append(s.ips, net.ParseIP(ip))
	}
}

// Resolver is a resolver that asks s.
func (s *Server) Resolver() *net.Resolver {
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp", s.Addr)
	}}
}
