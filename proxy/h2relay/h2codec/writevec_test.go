package h2codec

import (
	"bytes"
	"math/rand/v2"
	"net"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// Big data the relay owns goes out by writev straight from its memory;
// when the kernel takes only part of it (a small socket buffer and a peer
// that reads late), the frames still arrive whole and in order, with
// END_STREAM on the last, whatever is left going out through out and the
// flusher, and after other frames already waiting in out.
func TestVectoredWriteSurvivesPartialWrites(t *testing.T) {
	for _, sndbuf := range []int{8 << 10, 64 << 10, 1 << 20} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		accepted := make(chan net.Conn, 1)
		go func() {
			c, _ := ln.Accept()
			accepted <- c
		}()
		wc, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		rc := <-accepted
		ln.Close()
		_ = wc.(*net.TCPConn).SetWriteBuffer(sndbuf)

		rng := rand.New(rand.NewPCG(uint64(sndbuf), 9))
		body := make([]byte, 3<<20+777)
		for i := range body {
			body[i] = byte(rng.Uint32())
		}
		c := NewConn(wc, &Config{BufSize: 64 << 10, MaxReadFrame: 1 << 20, MaxHeaderList: 16 << 20,
			InitWindow: 64 << 10, StreamWindow: 4 << 20, ConnWindow: 16 << 20, OutCap: 4 << 20}, nil)
		c.mu.Lock()
		// A frame already waiting in out goes first.
		_ = c.wr.WritePing(false, [8]byte{1, 2, 3})
		h := c.AddHalfLocked(1, nil)
		h.send, c.send = outflow{n: 1 << 30}, outflow{n: 1 << 30}
		first := 1<<20 + 100<<10                             // not a multiple of writeAt's frames
		c.WriteDataLocked(h, body[:first], false, true, nil) // the request read whole
		if sndbuf == 1<<20 && len(c.out)-c.off > 0 {
			// Room for it all in the socket: nothing is copied to out
			// (copied, the frames after the last writeAt would wait).
			t.Fatalf("sndbuf %d: %d bytes copied to out, want none", sndbuf, len(c.out)-c.off)
		}
		c.WriteDataLocked(h, body[first:], true, true, nil) // more, then the end
		c.KickLocked()
		c.mu.Unlock()

		time.Sleep(10 * time.Millisecond) // the peer reads late: the socket fills
		fr := http2.NewFramer(nil, rc)
		fr.SetMaxReadFrameSize(1 << 24)
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := f.(*http2.PingFrame); !ok {
			t.Fatalf("sndbuf %d: first frame %v, want the PING waiting in out", sndbuf, f.Header())
		}
		var got []byte
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				t.Fatalf("sndbuf %d: after %d bytes: %v", sndbuf, len(got), err)
			}
			d, ok := f.(*http2.DataFrame)
			if !ok || d.StreamID != 1 {
				t.Fatalf("sndbuf %d: unexpected frame %v", sndbuf, f.Header())
			}
			if len(d.Data()) > 16384 {
				t.Fatalf("sndbuf %d: a %d-byte frame, over the peer's max", sndbuf, len(d.Data()))
			}
			got = append(got, d.Data()...)
			if d.StreamEnded() {
				break
			}
		}
		if !bytes.Equal(got, body) {
			t.Fatalf("sndbuf %d: %d bytes arrived, not the %d sent (or not in order)", sndbuf, len(got), len(body))
		}
		c.Close(ErrClosed)
		rc.Close()
	}
}
