package byterelay

import (
	"bytes"
	"context"
	"io"
	"net"
	"testing"
)

// Bytes come out as they went in, both ways, and a client's half close
// reaches the upstream, which can still answer.
func TestRelayCopiesBothWaysAndHalfCloses(t *testing.T) {
	up, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	go func() {
		c, err := up.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		got, _ := io.ReadAll(c) // until the client's half close
		_, _ = c.Write(append([]byte("echo:"), got...))
	}()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- Serve(ctx, ln, up.Addr().String()) }()

	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	msg := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	if _, err := c.Write(msg); err != nil {
		t.Fatal(err)
	}
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, append([]byte("echo:"), msg...)) {
		t.Fatalf("got %d bytes back, want the %d sent after echo:", len(got), len(msg))
	}
	c.Close()
	cancel()
	if err := <-served; err != nil {
		t.Fatalf("Serve after cancel: %v", err)
	}
}

// With the upstream down, a client's connection is closed, not left open.
func TestRelayClosesWhenUpstreamIsDown(t *testing.T) {
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := dead.Addr().String()
	dead.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = Serve(ctx, ln, addr) }()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if n, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatalf("read %d bytes from a relay with no upstream", n)
	}
}
