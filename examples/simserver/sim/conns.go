package sim

import (
	"context"
	"net"
	"sync"

	"google.golang.org/grpc/peer"
)

// connTracker remembers accepted connections by remote address so the
// drop_connections fault can close the one a request came in on.
type connTracker struct {
	mu    sync.Mutex
	conns map[string]net.Conn
}

// trackingListener wraps a listener and registers each accepted conn.
type trackingListener struct {
	net.Listener
	t *connTracker
}

func (l *trackingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	key := c.RemoteAddr().String()
	tc := &trackedConn{Conn: c, t: l.t, key: key}
	l.t.mu.Lock()
	l.t.conns[key] = tc
	l.t.mu.Unlock()
	return tc, nil
}

// trackedConn forgets itself when closed.
type trackedConn struct {
	net.Conn
	t    *connTracker
	key  string
	once sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.t.mu.Lock()
		if c.t.conns[c.key] == c {
			delete(c.t.conns, c.key)
		}
		c.t.mu.Unlock()
	})
	return c.Conn.Close()
}

// drop closes the connection the request in ctx arrived on; it reports
// whether one was found.
func (t *connTracker) drop(ctx context.Context) bool {
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return false
	}
	t.mu.Lock()
	c := t.conns[p.Addr.String()]
	t.mu.Unlock()
	if c == nil {
		return false
	}
	c.Close()
	return true
}

// count is the number of open tracked connections.
func (t *connTracker) count() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.conns)
}
