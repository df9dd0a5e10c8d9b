package h2relay

import (
	"bytes"
	"strconv"
	"testing"

	"golang.org/x/net/http2"
)

// stalledCalls has c ask for n responses each larger than a stream
// window, while granting the relay one byte of window per stream, and
// waits until each has started to come back.
func stalledCalls(t *testing.T, c *rawClient, n int) {
	t.Helper()
	for i := range n {
		id := uint32(2*i + 1)
		c.headers(id, "/t.S/Size", false)
		c.message(id, []byte(strconv.Itoa(6<<20)))
	}
	started := map[uint32]bool{}
	for len(started) < n {
		f := c.expect("first byte of a stalled response", func(f http2.Frame) bool {
			d, ok := f.(*dataFrame)
			return ok && len(d.data) > 0
		})
		if f == nil {
			t.Fatal("connection ended")
		}
		started[f.(*dataFrame).id] = true
	}
}

// Clients that do not take their responses hold back only their own
// streams: calls from other connections, sharing the same upstream
// connection, keep being answered.
func TestStalledClientDoesNotBlockOthers(t *testing.T) {
	for _, tc := range []struct {
		name  string
		dial  func(e *relayEnv) *rawClient
		reads bool
	}{
		{"tiny window", func(e *relayEnv) *rawClient {
			return e.dialRaw(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1})
		}, true},
		{"not reading", func(e *relayEnv) *rawClient {
			c := e.dialRaw(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 30})
			_ = c.fr.WriteWindowUpdate(0, 1<<30)
			return c
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newRelayEnv(t, Options{})
			ctx := testCtx(t)
			c := tc.dial(e)
			if tc.reads {
				c.readLoop()
				stalledCalls(t, c, 6)
			} else {
				for i := range 6 {
					id := uint32(2*i + 1)
					c.headers(id, "/t.S/Size", false)
					c.message(id, []byte(strconv.Itoa(6<<20)))
				}
			}
			// 36 MiB asked for, more than the upstream connection's
			// window: unless the relay gives that window back as the
			// data arrives, it is all held for the stalled client.
			other := e.dial()
			for i := range 20 {
				want := pattern(100<<10, byte(i))
				got, err := call(ctx, other, "/t.S/Echo", want)
				if err != nil || !bytes.Equal(got, want) {
					t.Fatalf("call %d from another client: %v", i, err)
				}
			}
			_ = c.nc.Close()
			e.settled()
		})
	}
}

// A client that starts with a tiny window and raises it later gets its
// whole response.
func TestWindowRaisedLater(t *testing.T) {
	e := newRelayEnv(t, Options{})
	c := e.dialRaw(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1})
	c.readLoop()
	c.headers(1, "/t.S/Size", false)
	c.message(1, []byte("300000"))
	first := c.expect("first byte", func(f http2.Frame) bool {
		d, ok := f.(*dataFrame)
		return ok && d.id == 1
	})
	if first == nil {
		t.Fatal("connection ended")
	}
	got := first.(*dataFrame).data
	if len(got) != 1 {
		t.Fatalf("%d bytes sent against a window of 1", len(got))
	}
	_ = c.fr.WriteWindowUpdate(0, 1<<20)
	_ = c.fr.WriteWindowUpdate(1, 1<<20)
	rest, st := c.response(1)
	got = append(got, rest...)
	if st != "0" || !bytes.Equal(got, grpcFrame(pattern(300000, 7))) {
		t.Fatalf("status %q, %d bytes of %d", st, len(got), 300005)
	}
	e.settled()
}

// A client that resets its stream, or goes away, while its response waits
// for window leaves nothing behind: the relay forgets the stream and the
// upstream connection's window is not used up.
func TestStalledResponseAbandoned(t *testing.T) {
	e := newRelayEnv(t, Options{})
	ctx := testCtx(t)
	for round := range 3 {
		c := e.dialRaw(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1})
		c.readLoop()
		stalledCalls(t, c, 3)
		if round%2 == 0 {
			for i := range 3 {
				_ = c.fr.WriteRSTStream(uint32(2*i+1), http2.ErrCodeCancel)
			}
			// The relay answers a PING after the resets it read.
			_ = c.fr.WritePing(false, [8]byte{1})
			c.expect("ping ack", func(f http2.Frame) bool { p, ok := f.(*pingFrame); return ok && p.ack })
		} else {
			_ = c.nc.Close()
		}
		e.settled()
	}
	// 9 × 4 MiB abandoned: more than the upstream connection's window.
	other := e.dial()
	want := pattern(1<<20, 9)
	if got, err := call(ctx, other, "/t.S/Echo", want); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("call after abandoned responses: %v", err)
	}
}
