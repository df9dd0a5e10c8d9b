// Package byterelay is the floor any proxy's cost is measured against: a
// TCP relay that copies bytes and parses nothing. Between two TCP
// connections io.Copy uses splice(2) on Linux, so the bytes do not even
// pass through user space; what is left is what every proxy pays for a
// second TCP hop (the kernel's send and receive path, a wakeup per read).
//
// bench overhead runs it as the path "tcp-relay" (bench relay) beside
// infergate and nginx: on a machine where the load generator, the model
// server and the proxy share the CPUs, the throughput a byte relay keeps
// against a direct connection bounds what an HTTP/2 proxy can keep.
package byterelay

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

// Serve relays each connection accepted on ln to a new connection to
// upstream until ctx ends or ln fails; then it closes ln and every relayed
// connection and returns.
func Serve(ctx context.Context, ln net.Listener, upstream string) error {
	var (
		mu    sync.Mutex
		conns = map[net.Conn]struct{}{}
		wg    sync.WaitGroup
	)
	track := func(c net.Conn, add bool) {
		mu.Lock()
		defer mu.Unlock()
		if add {
			conns[c] = struct{}{}
		} else {
			delete(conns, c)
		}
	}
	stop := context.AfterFunc(ctx, func() { _ = ln.Close() })
	defer stop()
	var err error
	for {
		var c net.Conn
		c, err = ln.Accept()
		if err != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			track(c, true)
			defer track(c, false)
			relay(c, upstream)
		}()
	}
	mu.Lock()
	for c := range conns {
		_ = c.Close()
	}
	mu.Unlock()
	wg.Wait()
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// relay copies c to a new upstream connection and back until both sides
// closed. A side's end of stream is passed on as a half close, so a peer
// that stops sending can still read its answer.
func relay(c net.Conn, upstream string) {
	defer c.Close()
	u, err := net.DialTimeout("tcp", upstream, 5*time.Second)
	if err != nil {
		return
	}
	defer u.Close()
	done := make(chan struct{})
	go func() {
		pipe(u, c)
		close(done)
	}()
	pipe(c, u)
	<-done
}

// pipe copies src to dst, then half-closes dst (or closes it when it
// cannot half-close, or when the copy failed).
func pipe(dst, src net.Conn) {
	_, err := io.Copy(dst, src)
	if tc, ok := dst.(*net.TCPConn); ok && (err == nil || errors.Is(err, io.EOF)) {
		_ = tc.CloseWrite()
		return
	}
	_ = dst.Close()
	_ = src.Close()
}
