package h2relay

import (
	"bytes"
	"encoding/binary"
	"io"
	"strings"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// Clients that break HTTP/2 lose their connection (or stream), and the
// relay goes on serving everyone else.
func TestProtocolAbuse(t *testing.T) {
	big := strings.Repeat("v", 1<<20)
	for _, tc := range []struct {
		name string
		// abuse misbehaves on c (its preface and SETTINGS sent).
		abuse func(t *testing.T, c *rawClient)
		// stream: only stream 1 is reset, the connection stays.
		stream bool
	}{
		{"DATA on stream 0", func(t *testing.T, c *rawClient) {
			writeRawFrame(c, http2.FrameData, 0, 0, []byte("x"))
		}, false},
		{"even stream ID", func(t *testing.T, c *rawClient) { c.headers(2, "/t.S/Echo", false) }, false},
		{"decreasing stream IDs", func(t *testing.T, c *rawClient) {
			c.headers(5, "/t.S/Echo", false)
			c.headers(3, "/t.S/Echo", false)
		}, false},
		{"header list over the limit", func(t *testing.T, c *rawClient) {
			// (One value over the limit ends the connection: the
			// HPACK decoder's string limit, as in x/net's server.)
			v := strings.Repeat("v", 30<<10)
			c.headers(1, "/t.S/Echo", false, hpack.HeaderField{Name: "x-a", Value: v},
				hpack.HeaderField{Name: "x-b", Value: v}, hpack.HeaderField{Name: "x-c", Value: v})
		}, true},
		{"malformed header field", func(t *testing.T, c *rawClient) {
			c.headers(1, "/t.S/Echo", false, hpack.HeaderField{Name: "Upper-Case", Value: "x"})
		}, true},
		{"frame over the max frame size", func(t *testing.T, c *rawClient) {
			c.headers(1, "/t.S/Echo", false)
			writeRawFrame(c, http2.FrameData, 0, 1, make([]byte, 2<<20))
		}, false},
		{"WINDOW_UPDATE overflow", func(t *testing.T, c *rawClient) {
			_ = c.fr.WriteWindowUpdate(0, 1<<31-1)
			_ = c.fr.WriteWindowUpdate(0, 1<<31-1)
		}, false},
		{"CONTINUATION flood", func(t *testing.T, c *rawClient) {
			c.hbuf.Reset()
			_ = c.enc.WriteField(hpack.HeaderField{Name: ":method", Value: "POST"})
			_ = c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: c.hbuf.Bytes()})
			frag := bytes.Repeat([]byte{0x40, 0x01, 'x', 0x7f, 0x7f}, 3000)
			for range 2000 {
				if c.fr.WriteContinuation(1, false, frag) != nil {
					return // the relay closed the connection
				}
			}
		}, false},
		{"SETTINGS_MAX_FRAME_SIZE 0", func(t *testing.T, c *rawClient) {
			// A call first, so that a response is on its way when
			// the setting is read (the relay ends the connection at
			// the setting; writes after it could fail).
			c.headers(1, "/t.S/Echo", false)
			c.message(1, []byte("hello"))
			_ = c.fr.WriteSettings(http2.Setting{ID: http2.SettingMaxFrameSize, Val: 0})
		}, false},
		{"SETTINGS_INITIAL_WINDOW_SIZE over 2^31-1", func(t *testing.T, c *rawClient) {
			_ = c.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 31})
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newRelayEnv(t, Options{MaxHeaderList: 64 << 10})
			ctx := testCtx(t)
			c := e.dialRaw()
			c.readLoop()
			tc.abuse(t, c)
			if tc.stream {
				f := c.expect("RST_STREAM", func(f http2.Frame) bool { r, ok := f.(*rstFrame); return ok && r.id == 1 })
				if f == nil {
					t.Fatal("the connection ended; only the stream should have")
				}
				// The connection still serves.
				c.headers(3, "/t.S/Echo", false)
				c.message(3, []byte("after"))
				if data, st := c.response(3); st != "0" || !bytes.Equal(data, grpcFrame([]byte("after"))) {
					t.Fatalf("next stream: status %q", st)
				}
			} else {
				c.closedWith()
			}
			e.stillServes(ctx)
			_ = c.nc.Close()
			e.settled()
		})
	}
	// A 1 MiB header value within the limit passes through.
	t.Run("1 MiB header value", func(t *testing.T) {
		e := newRelayEnv(t, Options{MaxHeaderList: 8 << 20})
		c := e.dialRaw()
		c.readLoop()
		c.headers(1, "/t.S/Echo", false, hpack.HeaderField{Name: "x-big", Value: big})
		c.message(1, []byte("hi"))
		if data, st := c.response(1); st != "0" || !bytes.Equal(data, grpcFrame([]byte("hi"))) {
			t.Fatalf("status %q", st)
		}
		e.stillServes(testCtx(t))
	})
}

// Garbage instead of the preface ends that connection only.
func TestGarbagePreface(t *testing.T) {
	e := newRelayEnv(t, Options{})
	c := e.dialRaw()
	_, _ = io.WriteString(c.nc, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	// (dialRaw sent a valid preface first; send garbage on a fresh one.)
	nc := rawConnTo(t, e.addr)
	_, _ = io.WriteString(nc, "GET / HTTP/1.1\r\nHost: x\r\n\r\nxxxxxxxxxxxxxxxxxxxx")
	if _, err := io.ReadAll(nc); err != nil && !strings.Contains(err.Error(), "reset") {
		t.Fatal(err)
	}
	e.stillServes(testCtx(t))
}

// A client that floods PINGs and reads nothing is cut off instead of
// growing the relay's output without bound; others are still served.
func TestPingFloodNotReading(t *testing.T) {
	e := newRelayEnv(t, Options{})
	c := e.dialRaw()
	var sent int
	for ; sent < 2_000_000; sent++ {
		if c.fr.WritePing(false, [8]byte{byte(sent)}) != nil {
			break
		}
	}
	if sent == 2_000_000 {
		t.Fatalf("the relay took %d PINGs from a client that reads none of the answers", sent)
	}
	e.stillServes(testCtx(t))
}

func writeRawFrame(c *rawClient, typ http2.FrameType, flags http2.Flags, id uint32, payload []byte) {
	var h [9]byte
	h[0], h[1], h[2] = byte(len(payload)>>16), byte(len(payload)>>8), byte(len(payload))
	h[3], h[4] = byte(typ), byte(flags)
	binary.BigEndian.PutUint32(h[5:], id)
	_, _ = c.nc.Write(append(h[:], payload...))
}

// DATA after the client's END_STREAM is a stream error (RFC 9113 5.1): the
// relay resets that stream with STREAM_CLOSED and forwards nothing more;
// the connection serves on.
func TestDataAfterEndStream(t *testing.T) {
	e := newRelayEnv(t, Options{})
	c := e.dialRaw()
	c.readLoop()
	c.headers(1, "/t.S/Hang", false) // open until reset
	c.message(1, []byte("hello"))
	if err := c.fr.WriteData(1, false, []byte("late")); err != nil {
		t.Fatal(err)
	}
	f := c.expect("RST_STREAM STREAM_CLOSED", func(f http2.Frame) bool {
		r, ok := f.(*rstFrame)
		return ok && r.id == 1 && r.code == http2.ErrCodeStreamClosed
	})
	if f == nil {
		t.Fatal("connection ended instead of the stream")
	}
	c.headers(3, "/t.S/Echo", false)
	c.message(3, []byte("again"))
	if data, st := c.response(3); st != "0" || !bytes.HasSuffix(data, []byte("again")) {
		t.Fatalf("next call on the connection: status %q, data %q", st, data)
	}
}
