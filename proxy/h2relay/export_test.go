package h2relay

import "github.com/infergate/infergate/proxy/h2relay/h2codec"

// openHalves counts the streams the relay still holds, on client
// connections, their Local connections and the pools' connections, so a
// test can check that every stream it ended was forgotten.
func (s *Server) openHalves() int {
	s.mu.Lock()
	var conns []*h2codec.Conn
	for cc := range s.conns {
		conns = append(conns, cc.c)
		cc.mu.Lock()
		if cc.local != nil {
			conns = append(conns, cc.local.c)
		}
		cc.mu.Unlock()
	}
	pools := make([]*Pool, 0, len(s.pools))
	for _, p := range s.pools {
		pools = append(pools, p)
	}
	s.mu.Unlock()
	for _, p := range pools {
		p.mu.Lock()
		for _, d := range p.conns {
			conns = append(conns, d.c)
		}
		p.mu.Unlock()
	}
	n := 0
	for _, c := range conns {
		c.Lock()
		if !c.ClosedLocked() {
			n += c.OpenLocked()
		}
		c.Unlock()
	}
	return n
}

// poolConns is how many connections the pool to addr holds.
func (s *Server) poolConns(addr string) int {
	s.mu.Lock()
	p := s.pools[addr]
	s.mu.Unlock()
	if p == nil {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns)
}
