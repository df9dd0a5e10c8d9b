package h2codec

import (
	"bytes"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

type hpackField = hpack.HeaderField

// testBudget is a Budget with left bytes to give.
type testBudget struct{ left, taken int64 }

func (b *testBudget) TryTake(n int64) bool {
	if n > b.left {
		return false
	}
	b.left -= n
	b.taken += n
	return true
}

func (b *testBudget) GiveBack(n int64) {
	b.left += n
	b.taken -= n
}

func testConfig() *Config {
	return &Config{BufSize: 64 << 10, MaxReadFrame: 1 << 20, MaxHeaderList: 1 << 20, MaxStreams: 100,
		InitWindow: 64 << 10, StreamWindow: 256 << 10, ConnWindow: 1 << 20, OutCap: 4 << 20,
		Budget: &testBudget{left: 1 << 30}}
}

// newTestConn is a connection over one end of a pipe nothing reads: what
// it writes stays in out (a pipe has no descriptor for the non-blocking
// write, and nothing here kicks a flusher), for outFrames to read.
func newTestConn(t *testing.T, cfg *Config) *Conn {
	t.Helper()
	a, b := net.Pipe()
	c := NewConn(a, cfg, nil)
	t.Cleanup(func() {
		c.Close(ErrClosed)
		b.Close()
	})
	return c
}

// wire is a frame the connection wrote, as far as these tests look at it.
type wire struct {
	typ      http2.FrameType
	id       uint32
	end      bool
	n        int    // DATA's length
	incr     uint32 // WINDOW_UPDATE's increment
	settings []http2.Setting
}

func endsStream(w wire) bool { return w.end }

// outFrames reads and empties what c wrote.
func outFrames(t *testing.T, c *Conn) []wire {
	t.Helper()
	fr := http2.NewFramer(nil, bytes.NewReader(c.out[c.off:]))
	fr.SetMaxReadFrameSize(1 << 24)
	var ws []wire
	for {
		f, err := fr.ReadFrame()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("reading what the connection wrote: %v", err)
		}
		w := wire{typ: f.Header().Type, id: f.Header().StreamID}
		switch f := f.(type) {
		case *http2.DataFrame:
			w.end, w.n = f.StreamEnded(), len(f.Data())
		case *http2.HeadersFrame:
			w.end = f.StreamEnded()
		case *http2.WindowUpdateFrame:
			w.incr = f.Increment
		case *http2.SettingsFrame:
			_ = f.ForeachSetting(func(s http2.Setting) error {
				w.settings = append(w.settings, s)
				return nil
			})
		}
		ws = append(ws, w)
	}
	c.out, c.off = c.out[:0], 0
	return ws
}

// windowUpdates are the WINDOW_UPDATEs in ws, as stream ID and increment.
func windowUpdates(ws []wire) [][2]uint32 {
	var us [][2]uint32
	for _, w := range ws {
		if w.typ == http2.FrameWindowUpdate {
			us = append(us, [2]uint32{w.id, w.incr})
		}
	}
	return us
}

// readFrame is the frame write makes, as a peer's frame is read.
func readFrame(t *testing.T, write func(*http2.Framer) error) http2.Frame {
	t.Helper()
	var buf bytes.Buffer
	if err := write(http2.NewFramer(&buf, nil)); err != nil {
		t.Fatal(err)
	}
	f, err := http2.NewFramer(nil, &buf).ReadFrame()
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func settingsFrame(t *testing.T, s ...http2.Setting) http2.Frame {
	return readFrame(t, func(fr *http2.Framer) error { return fr.WriteSettings(s...) })
}

func wantFlowControlError(t *testing.T, err error, stream uint32) {
	t.Helper()
	if stream == 0 {
		if err != http2.ConnectionError(http2.ErrCodeFlowControl) {
			t.Fatalf("got %v, want the connection error FLOW_CONTROL_ERROR", err)
		}
		return
	}
	var se http2.StreamError
	if !errors.As(err, &se) || se.StreamID != stream || se.Code != http2.ErrCodeFlowControl {
		t.Fatalf("got %v, want a FLOW_CONTROL_ERROR stream error on stream %d", err, stream)
	}
}

// A connection starts by telling the peer its stream window and by
// opening the connection's window (which SETTINGS cannot change, RFC 9113
// 6.9.2) to ConnWindow with a WINDOW_UPDATE.
func TestGreetAnnouncesWindows(t *testing.T) {
	for _, tt := range []struct {
		name       string
		client     bool
		connWindow int64
		wantUpdate uint32
	}{
		{"server", false, 1 << 20, 1<<20 - 65535},
		{"client", true, 1 << 20, 1<<20 - 65535},
		{"no wider than the default", false, 65535, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.ConnWindow = tt.connWindow
			c := newTestConn(t, cfg)
			c.GreetLocked(tt.client)
			if tt.client {
				if !bytes.HasPrefix(c.out, []byte(http2.ClientPreface)) {
					t.Fatal("no client preface")
				}
				c.off = len(http2.ClientPreface)
			}
			ws := outFrames(t, c)
			if len(ws) == 0 || ws[0].typ != http2.FrameSettings {
				t.Fatalf("wrote %v, want SETTINGS first", ws)
			}
			var initWin, maxFrame uint32
			for _, s := range ws[0].settings {
				switch s.ID {
				case http2.SettingInitialWindowSize:
					initWin = s.Val
				case http2.SettingMaxFrameSize:
					maxFrame = s.Val
				}
			}
			if int64(initWin) != cfg.InitWindow || maxFrame != cfg.MaxReadFrame {
				t.Fatalf("SETTINGS %v", ws[0].settings)
			}
			us := windowUpdates(ws)
			if tt.wantUpdate == 0 {
				if len(us) != 0 {
					t.Fatalf("window updates %v, want none", us)
				}
			} else if len(us) != 1 || us[0] != [2]uint32{0, tt.wantUpdate} {
				t.Fatalf("window updates %v, want [0 %d]", us, tt.wantUpdate)
			}
			if want := max(tt.connWindow, 65535); c.recv.avail != want {
				t.Fatalf("connection receive window %d, want %d", c.recv.avail, want)
			}
		})
	}
}

// The peer's WINDOW_UPDATE widens the window it names, the stream's or the
// connection's, and not the other; one that takes a window past 2^31-1 is
// a FLOW_CONTROL_ERROR, a stream error for a stream's window and a
// connection error for the connection's (RFC 9113 6.9.1). One for a stream
// the connection does not hold, or for one it ended (it sends nothing
// more there: RFC 9113 5.1), is ignored.
func TestWindowUpdate(t *testing.T) {
	tests := []struct {
		name               string
		id                 uint32
		incr               uint32
		wantErr            int // 0 none, 1 a stream error, 2 a connection error
		wantStream, wantCn int64
	}{
		{"a stream's", 1, 1000, 0, 66535, 65535},
		{"the connection's", 0, 1000, 0, 65535, 66535},
		{"a stream's to the largest window", 1, maxWindow - 65535, 0, maxWindow, 65535},
		{"the connection's to the largest window", 0, maxWindow - 65535, 0, 65535, maxWindow},
		{"a stream's past it", 1, maxWindow - 65535 + 1, 1, -1, 65535},
		{"the connection's past it", 0, maxWindow - 65535 + 1, 2, 65535, -1},
		{"a stream it does not hold", 7, maxWindow, 0, 65535, 65535},
		{"a stream it ended, past the largest window", 1, maxWindow - 65535 + 1, 0, -1, 65535},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newTestConn(t, testConfig())
			h := c.AddHalfLocked(1, nil)
			if strings.Contains(tt.name, "ended") {
				h.endLocal() // our END_STREAM went out: nothing more to send
			}
			_, err := c.OnControl(readFrame(t, func(fr *http2.Framer) error { return fr.WriteWindowUpdate(tt.id, tt.incr) }), &Batch{})
			switch tt.wantErr {
			case 0:
				if err != nil {
					t.Fatal(err)
				}
			case 1:
				wantFlowControlError(t, err, tt.id)
			case 2:
				wantFlowControlError(t, err, 0)
			}
			if tt.wantStream >= 0 && h.send.available() != tt.wantStream {
				t.Fatalf("stream window %d, want %d", h.send.available(), tt.wantStream)
			}
			if tt.wantCn >= 0 && c.send.available() != tt.wantCn {
				t.Fatalf("connection window %d, want %d", c.send.available(), tt.wantCn)
			}
			if len(outFrames(t, c)) != 0 {
				t.Fatal("a WINDOW_UPDATE is not answered")
			}
		})
	}
}

// A change of the peer's SETTINGS_INITIAL_WINDOW_SIZE moves every open
// stream's send window by the difference, below zero if need be, and new
// streams start at the new size; the connection's window stays (RFC 9113
// 6.9.2). Data waiting for window goes once there is some. A change that
// takes a stream's window past 2^31-1 is a connection error
// FLOW_CONTROL_ERROR.
func TestPeerInitialWindowChange(t *testing.T) {
	c := newTestConn(t, testConfig())
	h1 := c.AddHalfLocked(1, nil)
	h3 := c.AddHalfLocked(3, nil)
	c.WriteDataLocked(h1, make([]byte, 60000), false, false, nil)
	outFrames(t, c)

	apply := func(win uint32) {
		t.Helper()
		settings, err := c.OnControl(settingsFrame(t, http2.Setting{ID: http2.SettingInitialWindowSize, Val: win}), &Batch{})
		if err != nil || !settings {
			t.Fatalf("SETTINGS_INITIAL_WINDOW_SIZE %d: %v, %v", win, settings, err)
		}
	}
	apply(0)
	if h1.send.available() != -60000 || h3.send.available() != 0 || c.send.available() != 5535 {
		t.Fatalf("windows after shrinking to 0: streams %d and %d, connection %d; want -60000, 0, 5535",
			h1.send.available(), h3.send.available(), c.send.available())
	}
	if ws := outFrames(t, c); len(ws) != 1 || ws[0].typ != http2.FrameSettings {
		t.Fatalf("wrote %v, want the SETTINGS ack", ws)
	}
	h5 := c.AddHalfLocked(5, nil)
	if h5.send.available() != 0 {
		t.Fatalf("a new stream's window %d, want the new initial window 0", h5.send.available())
	}
	// Nothing may go on a stream with no window.
	c.WriteDataLocked(h3, make([]byte, 3000), true, false, nil)
	c.WriteDataLocked(h1, make([]byte, 10), false, false, nil)
	if ws := outFrames(t, c); len(ws) != 0 {
		t.Fatalf("wrote %v with no window", ws)
	}

	apply(100000)
	if h1.send.available() != 40000-10 || h3.send.available() != 100000-3000 || h5.send.available() != 100000 {
		t.Fatalf("windows after growing to 100000: %d, %d, %d", h1.send.available(), h3.send.available(), h5.send.available())
	}
	if c.send.available() != 5535-3010 {
		t.Fatalf("connection window %d, want %d", c.send.available(), 5535-3010)
	}
	sent := map[uint32]int{}
	var ended []uint32
	for _, w := range outFrames(t, c) {
		if w.typ == http2.FrameData {
			sent[w.id] += w.n
			if w.end {
				ended = append(ended, w.id)
			}
		}
	}
	if sent[1] != 10 || sent[3] != 3000 || len(ended) != 1 || ended[0] != 3 {
		t.Fatalf("queued data sent: %v, ended %v", sent, ended)
	}

	// Past the largest window: stream 5 at 2^31-1 less 10, then the
	// initial window grows by 11.
	if _, err := c.OnControl(readFrame(t, func(fr *http2.Framer) error { return fr.WriteWindowUpdate(5, maxWindow-100000-10) }), &Batch{}); err != nil {
		t.Fatal(err)
	}
	_, err := c.OnControl(settingsFrame(t, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 100011}), &Batch{})
	wantFlowControlError(t, err, 0)
}

// What the peer sends comes off the stream's and the connection's receive
// windows; a frame past either is a FLOW_CONTROL_ERROR, a stream error for
// the stream's and a connection error for the connection's. The
// connection's window is given back as data arrives, a quarter of
// ConnWindow at a time; a stream's as its data leaves (GiveBackLocked), a
// quarter of its window at a time; nothing for a stream forgotten.
func TestReceiveWindows(t *testing.T) {
	t.Run("the connection's", func(t *testing.T) {
		c := newTestConn(t, testConfig())
		c.GreetLocked(false)
		outFrames(t, c)
		const quarter = 1 << 18
		if err := c.TakeDataLocked(nil, quarter-1, false); err != nil {
			t.Fatal(err)
		}
		if ws := outFrames(t, c); len(ws) != 0 {
			t.Fatalf("wrote %v before a quarter of the window was taken", ws)
		}
		if err := c.TakeDataLocked(nil, 1, false); err != nil {
			t.Fatal(err)
		}
		if us := windowUpdates(outFrames(t, c)); len(us) != 1 || us[0] != [2]uint32{0, quarter} {
			t.Fatalf("window updates %v, want [0 %d]", us, quarter)
		}
		if c.recv.avail != 1<<20 {
			t.Fatalf("connection window %d, want it whole again", c.recv.avail)
		}
		// One frame more than the window: a connection error.
		wantFlowControlError(t, c.TakeDataLocked(nil, 1<<20+1, false), 0)
	})
	t.Run("exactly the connection's window", func(t *testing.T) {
		c := newTestConn(t, testConfig())
		c.GreetLocked(false)
		outFrames(t, c)
		if err := c.TakeDataLocked(nil, 1<<20, false); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("a stream's", func(t *testing.T) {
		c := newTestConn(t, testConfig())
		c.GreetLocked(false)
		outFrames(t, c)
		h := c.AddHalfLocked(1, nil)
		const win, quarter = 64 << 10, 16 << 10
		if err := c.TakeDataLocked(h, win, false); err != nil {
			t.Fatal(err)
		}
		wantFlowControlError(t, c.TakeDataLocked(h, 1, false), 1)
		c.GiveBackLocked(h, quarter-1)
		if ws := outFrames(t, c); len(ws) != 0 {
			t.Fatalf("wrote %v before a quarter of the window was given back", ws)
		}
		c.GiveBackLocked(h, 1)
		if us := windowUpdates(outFrames(t, c)); len(us) != 1 || us[0] != [2]uint32{1, quarter} {
			t.Fatalf("window updates %v, want [1 %d]", us, quarter)
		}
		c.GiveBackLocked(h, quarter-1)
		c.RemoveHalfLocked(h)
		c.GiveBackLocked(h, quarter)
		c.GiveBackLocked(nil, quarter)
		if ws := outFrames(t, c); len(ws) != 0 {
			t.Fatalf("wrote %v for a forgotten stream", ws)
		}
	})
	t.Run("none once closed", func(t *testing.T) {
		c := newTestConn(t, testConfig())
		h := c.AddHalfLocked(1, nil)
		_ = c.TakeDataLocked(h, 20000, false)
		c.Lock()
		c.FailLocked(ErrClosed)
		c.Unlock()
		c.GiveBackLocked(h, 20000)
		if len(c.out) != 0 {
			t.Fatal("a window update on a closed connection")
		}
	})
}

// A stream's receive window widens only for a stream that moved half of
// it, doubles up to StreamWindow, only with the budget's room, and gives
// the budget back when the stream is forgotten. WidenToLocked opens it at
// once or says how much room it lacks; every widening tells the peer with
// what was owed besides.
func TestWidenTakesFromTheBudget(t *testing.T) {
	cfg := testConfig()
	b := cfg.Budget.(*testBudget)
	b.left = 1 << 20
	c := newTestConn(t, cfg)
	c.GreetLocked(false)
	outFrames(t, c)
	h := c.AddHalfLocked(1, nil)

	take := func(n int64) {
		t.Helper()
		if err := c.TakeDataLocked(h, n, false); err != nil {
			t.Fatal(err)
		}
	}
	widen := func(wantWin int64, wantUpdate uint32) {
		t.Helper()
		c.WidenLocked(h)
		if h.WindowLocked() != wantWin {
			t.Fatalf("window %d, want %d", h.WindowLocked(), wantWin)
		}
		us := windowUpdates(outFrames(t, c))
		if wantUpdate == 0 && len(us) != 0 || wantUpdate != 0 && (len(us) != 1 || us[0] != [2]uint32{1, wantUpdate}) {
			t.Fatalf("window updates %v, want [1 %d]", us, wantUpdate)
		}
	}
	take(32<<10 - 1)
	widen(64<<10, 0) // under half moved
	take(1)
	c.GiveBackLocked(h, 100) // owed, under the batch
	widen(128<<10, 64<<10+100)
	if b.taken != 64<<10 || h.extra != 64<<10 {
		t.Fatalf("budget took %d, the stream holds %d; want 64 KiB", b.taken, h.extra)
	}
	if h.recv.avail != 64<<10-32<<10+64<<10+100 {
		t.Fatalf("receive window %d", h.recv.avail)
	}
	widen(128<<10, 0) // 32 KiB moved of 128
	take(32 << 10)
	widen(256<<10, 128<<10)
	take(128 << 10)
	widen(256<<10, 0) // at StreamWindow
	if b.taken != 192<<10 {
		t.Fatalf("budget took %d, want 192 KiB", b.taken)
	}
	c.RemoveHalfLocked(h)
	if b.taken != 0 || b.left != 1<<20 {
		t.Fatalf("budget after the stream is forgotten: %d taken, %d left", b.taken, b.left)
	}

	// No room: the window stays.
	b.left = 1000
	h = c.AddHalfLocked(1, nil)
	take(32 << 10)
	widen(64<<10, 0)
	if short := c.WidenToLocked(h, 1<<30); short != 256<<10-64<<10 {
		t.Fatalf("WidenToLocked short of %d, want %d", short, 256<<10-64<<10)
	}
	if h.WindowLocked() != 64<<10 || len(outFrames(t, c)) != 0 {
		t.Fatal("WidenToLocked without room widened")
	}
	b.left = 1 << 20
	if short := c.WidenToLocked(h, 1<<30); short != 0 || h.WindowLocked() != 256<<10 {
		t.Fatalf("WidenToLocked with room: short %d, window %d", short, h.WindowLocked())
	}
	if us := windowUpdates(outFrames(t, c)); len(us) != 1 || us[0] != [2]uint32{1, 192 << 10} {
		t.Fatalf("window updates %v", us)
	}
	if short := c.WidenToLocked(h, 100); short != 0 || len(c.out) != 0 {
		t.Fatal("WidenToLocked narrower than the window did something")
	}
}

// Through a pipe, with x/net's Framer as the peer: data goes as far as
// both the stream's and the connection's windows allow, in frames of the
// peer's size, one stream's data waiting while another's took the
// connection's window; the peer's WINDOW_UPDATEs let the rest go, in
// order, END_STREAM on the last frame, and the stream is half-closed
// (local) only then.
func TestSendWindowsThroughPipe(t *testing.T) {
	a, b := net.Pipe()
	defer b.Close()
	// A failsafe against a hang, not a timing: every read below has its
	// bytes on the way.
	_ = b.SetDeadline(time.Now().Add(30 * time.Second))
	c := NewConn(a, testConfig(), nil)
	defer c.Close(ErrClosed)
	peerR := http2.NewFramer(nil, b)
	peerW := http2.NewFramer(b, nil)

	body1 := make([]byte, 100000)
	for i := range body1 {
		body1[i] = byte(i * 7)
	}
	body3 := bytes.Repeat([]byte{3}, 20000)
	c.Lock()
	c.GreetLocked(false)
	h1 := c.AddHalfLocked(1, nil)
	h3 := c.AddHalfLocked(3, nil)
	c.WriteDataLocked(h1, body1, true, false, nil)
	c.WriteDataLocked(h3, body3, true, false, nil)
	c.KickLocked()
	c.Unlock()

	for _, want := range []http2.FrameType{http2.FrameSettings, http2.FrameWindowUpdate} {
		f, err := peerR.ReadFrame()
		if err != nil || f.Header().Type != want {
			t.Fatalf("read %v, %v; want %v", f, err, want)
		}
	}
	got := map[uint32][]byte{}
	ended := map[uint32]bool{}
	// readData reads DATA frames until n bytes of data came.
	readData := func(n int) {
		t.Helper()
		for n > 0 {
			f, err := peerR.ReadFrame()
			if err != nil {
				t.Fatal(err)
			}
			d, ok := f.(*http2.DataFrame)
			if !ok {
				t.Fatalf("read %v, want DATA", f.Header())
			}
			if len(d.Data()) > 16384 {
				t.Fatalf("a %d-byte DATA frame, past the peer's frame size", len(d.Data()))
			}
			if ended[d.StreamID] {
				t.Fatalf("DATA on stream %d after its END_STREAM", d.StreamID)
			}
			got[d.StreamID] = append(got[d.StreamID], d.Data()...)
			ended[d.StreamID] = d.StreamEnded()
			n -= len(d.Data())
		}
		if n < 0 {
			t.Fatalf("%d bytes more than the windows allowed", -n)
		}
	}
	// The peer grants a window; the codec reads it as its reader does.
	grant := func(id, incr uint32) {
		t.Helper()
		done := make(chan error, 1)
		go func() { done <- peerW.WriteWindowUpdate(id, incr) }()
		f, _, _, err := c.ReadFrame()
		if err != nil {
			t.Fatal(err)
		}
		var batch Batch
		if _, err := c.OnControl(f, &batch); err != nil {
			t.Fatal(err)
		}
		batch.Flush()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	state := func(h *Half) State {
		c.Lock()
		defer c.Unlock()
		return h.StateLocked()
	}

	readData(65535) // the connection's default window, all stream 1's
	if len(got[1]) != 65535 || len(got[3]) != 0 || ended[1] {
		t.Fatalf("first: %d and %d bytes, stream 1 ended %v", len(got[1]), len(got[3]), ended[1])
	}
	if state(h1) != StateOpen || state(h3) != StateOpen {
		t.Fatal("a stream ended with its END_STREAM still queued")
	}

	grant(0, 30000) // stream 1 has no window left: stream 3 goes, whole
	readData(20000)
	if len(got[3]) != 20000 || !ended[3] || !bytes.Equal(got[3], body3) {
		t.Fatalf("stream 3: %d bytes, ended %v", len(got[3]), ended[3])
	}
	if state(h3) != StateHalfClosedLocal || state(h1) != StateOpen {
		t.Fatalf("states %v and %v", state(h1), state(h3))
	}

	grant(1, 100000-65535) // the connection has 10000 left of its 30000
	readData(10000)
	grant(0, 100000-65535-10000)
	readData(100000 - 65535 - 10000)
	if !bytes.Equal(got[1], body1) || !ended[1] {
		t.Fatalf("stream 1: %d bytes (equal %v), ended %v", len(got[1]), bytes.Equal(got[1], body1), ended[1])
	}
	if state(h1) != StateHalfClosedLocal {
		t.Fatalf("stream 1 %v after its END_STREAM went", state(h1))
	}
	c.Lock()
	defer c.Unlock()
	if c.send.available() != 0 || h1.send.available() != 0 || h3.send.available() != 65535-20000 {
		t.Fatalf("windows left: connection %d, streams %d and %d", c.send.available(), h1.send.available(), h3.send.available())
	}
}

// Our SETTINGS_INITIAL_WINDOW_SIZE binds the peer only once it has read
// them: until their ACK it may send on a stream as much as the window it
// knew before, 65535 (RFC 9113 6.9.3: the receiver "MUST be prepared to
// receive data that exceeds this window size"). Client connections
// announce 16 KiB, and a client may send a request right after its
// preface. On the ACK, every stream's window moves by the difference, as
// the peer moved its own (6.9.2).
func TestSmallerInitialWindowBindsOnceAcknowledged(t *testing.T) {
	for _, initWin := range []int64{16 << 10, 64 << 10} {
		cfg := testConfig()
		cfg.InitWindow = initWin
		c := newTestConn(t, cfg)
		c.GreetLocked(false)
		outFrames(t, c)
		// Before the peer read our SETTINGS: its default window.
		h1 := c.AddHalfLocked(1, nil)
		before := max(initWin, 65535)
		if err := c.TakeDataLocked(h1, before, false); err != nil {
			t.Fatalf("initial window %d: %d bytes before the ACK: %v", initWin, before, err)
		}
		h7 := c.AddHalfLocked(7, nil)
		wantFlowControlError(t, c.TakeDataLocked(h7, before+1, false), 7)
		c.RemoveHalfLocked(h7)
		c.GiveBackLocked(h1, before) // all of it left: a WINDOW_UPDATE of as much
		if us := windowUpdates(outFrames(t, c)); len(us) != 1 || us[0] != [2]uint32{1, uint32(before)} {
			t.Fatalf("initial window %d: window updates %v", initWin, us)
		}
		h3 := c.AddHalfLocked(3, nil) // opened before the ACK, nothing sent yet

		if _, err := c.OnControl(readFrame(t, func(fr *http2.Framer) error { return fr.WriteSettingsAck() }), &Batch{}); err != nil {
			t.Fatal(err)
		}
		// As the peer counts them now: moved by initWin-65535 if smaller.
		if want := initWin; h1.recv.avail != want || h3.recv.avail != want {
			t.Fatalf("initial window %d: after the ACK streams have %d and %d, want %d", initWin, h1.recv.avail, h3.recv.avail, want)
		}
		h5 := c.AddHalfLocked(5, nil)
		if err := c.TakeDataLocked(h5, initWin, false); err != nil {
			t.Fatal(err)
		}
		wantFlowControlError(t, c.TakeDataLocked(h5, 1, false), 5)
		// A second ACK (the peer's to nothing) changes nothing.
		if _, err := c.OnControl(readFrame(t, func(fr *http2.Framer) error { return fr.WriteSettingsAck() }), &Batch{}); err != nil {
			t.Fatal(err)
		}
		if h3.recv.avail != initWin {
			t.Fatalf("initial window %d: a second ACK moved a window to %d", initWin, h3.recv.avail)
		}
	}
}
