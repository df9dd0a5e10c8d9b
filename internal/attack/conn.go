package attack

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// Windows the reading attacks advertise: generous enough that a server is
// never held back by the attacker's receive window (answers are read and
// discarded), so what a reading attack costs is what it sends.
const (
	readStreamWindow = 4 << 20
	readConnWindow   = 1 << 30
	// replenishAt is how many connection-window bytes are read before one
	// WINDOW_UPDATE returns them.
	replenishAt = 16 << 20
	// chunk is the largest DATA frame written: the default
	// SETTINGS_MAX_FRAME_SIZE, which every server accepts.
	chunk = 16 << 10
)

// errClosed is returned by writes and waits once the server has ended the
// connection.
var errClosed = errors.New("connection closed by the server")

// dialOpts configures a raw connection.
type dialOpts struct {
	// settings go in the client's first SETTINGS frame; connWindow, when
	// > 0, is granted on stream 0 right after it.
	settings   []http2.Setting
	connWindow uint32
	// decode turns on HPACK decoding of the server's header blocks, which
	// watched streams need for grpc-status.
	decode bool
}

// readingOpts are the settings of an attacker that reads and discards.
func readingOpts(decode bool) dialOpts {
	return dialOpts{
		settings:   []http2.Setting{{ID: http2.SettingInitialWindowSize, Val: readStreamWindow}},
		connWindow: readConnWindow - 65535,
		decode:     decode,
	}
}

// watch is what the reader keeps for one stream an attack follows.
type watch struct {
	win             int64 // the client's send window on the stream
	status, message string
	gotHeaders      bool
	gotData         bool // DATA with a payload arrived
	ended           bool // the server sent END_STREAM
	reset           bool
	resetCode       http2.ErrCode
	endAt           time.Duration // when it ended or was reset, from the start
}

// finish notes when the stream first ended or was reset.
func (w *watch) finish(since time.Time) {
	if w.endAt == 0 {
		w.endAt = time.Since(since)
	}
}

// conn is one raw HTTP/2 client connection: the attack writes frames
// under wmu; a reader goroutine reads every frame the server sends and
// keeps the windows, GOAWAY and resets; a control goroutine answers
// SETTINGS and PING and returns connection window, so the reader never
// blocks on a write.
type conn struct {
	nc     net.Conn
	start  time.Time
	frames atomic.Int64
	bytes  atomic.Int64

	wmu  sync.Mutex
	bw   *bufio.Writer
	fr   *http2.Framer
	enc  *hpack.Encoder
	hbuf bytes.Buffer

	mu          sync.Mutex
	changed     chan struct{} // closed and replaced at every change below
	goAway      *GoAway
	closedAt    time.Duration
	readDone    bool
	resets      map[http2.ErrCode]int64
	answered    int64
	answerBytes int64
	connWin     int64 // the client's send window on the connection
	initWin     int64 // the server's SETTINGS_INITIAL_WINDOW_SIZE
	watched     map[uint32]*watch
	stalled     time.Duration
	pings       [][8]byte
	settingsAck int

	over       atomic.Bool  // GOAWAY came or the connection ended
	closing    atomic.Bool  // the attack closes the connection itself
	stopRead   atomic.Bool  // the attack stopped reading on purpose
	pendingWin atomic.Int64 // bytes read, not yet returned
	kick       chan struct{}
	quit       chan struct{}
	readExited chan struct{}
	ctlExited  chan struct{}
	stopAfter  func() bool
}

// countingWriter counts the bytes written to the socket.
type countingWriter struct {
	w net.Conn
	n *atomic.Int64
}

func (c countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n.Add(int64(n))
	return n, err
}

// dial opens a connection to addr, writes the preface, the client's
// SETTINGS and window, and starts the reader. When ctx ends, blocked
// writes fail at once.
func dial(ctx context.Context, addr string, o dialOpts) (*conn, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("attack: dial %s: %w", addr, err)
	}
	c := &conn{
		nc:         nc,
		start:      time.Now(),
		changed:    make(chan struct{}),
		resets:     map[http2.ErrCode]int64{},
		connWin:    65535,
		initWin:    65535,
		watched:    map[uint32]*watch{},
		kick:       make(chan struct{}, 1),
		quit:       make(chan struct{}),
		readExited: make(chan struct{}),
		ctlExited:  make(chan struct{}),
	}
	c.bw = bufio.NewWriterSize(countingWriter{nc, &c.bytes}, 64<<10)
	c.fr = http2.NewFramer(c.bw, bufio.NewReaderSize(nc, 64<<10))
	c.fr.AllowIllegalWrites = true
	if o.decode {
		c.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
		c.fr.MaxHeaderListSize = 1 << 20
	}
	c.enc = hpack.NewEncoder(&c.hbuf)
	c.stopAfter = context.AfterFunc(ctx, func() { nc.SetWriteDeadline(time.Now()) })

	c.wmu.Lock()
	_, err = c.bw.WriteString(http2.ClientPreface)
	if err == nil {
		err = c.fr.WriteSettings(o.settings...)
		c.frames.Add(1)
	}
	if err == nil && o.connWindow > 0 {
		err = c.fr.WriteWindowUpdate(0, o.connWindow)
		c.frames.Add(1)
	}
	if err == nil {
		err = c.bw.Flush()
	}
	c.wmu.Unlock()
	if err != nil {
		c.stopAfter()
		nc.Close()
		return nil, fmt.Errorf("attack: preface to %s: %w", addr, err)
	}
	go c.readLoop()
	go c.control()
	return c, nil
}

// notifyLocked wakes everyone waiting for a change; c.mu is held.
func (c *conn) notifyLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}

func (c *conn) readLoop() {
	defer close(c.readExited)
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			var se http2.StreamError
			if errors.As(err, &se) {
				continue // a header block x/net finds invalid: the stream's problem
			}
			if c.stopRead.Load() || c.closing.Load() {
				return
			}
			c.mu.Lock()
			c.readDone = true
			c.closedAt = time.Since(c.start)
			c.notifyLocked()
			c.mu.Unlock()
			c.over.Store(true)
			return
		}
		c.handle(f)
	}
}

func (c *conn) handle(f http2.Frame) {
	kick := false
	c.mu.Lock()
	switch f := f.(type) {
	case *http2.SettingsFrame:
		if f.IsAck() {
			break
		}
		_ = f.ForeachSetting(func(s http2.Setting) error {
			if s.ID == http2.SettingInitialWindowSize {
				delta := int64(s.Val) - c.initWin
				c.initWin = int64(s.Val)
				for _, w := range c.watched {
					w.win += delta
				}
			}
			return nil
		})
		c.settingsAck++
		kick = true
	case *http2.PingFrame:
		if !f.IsAck() && len(c.pings) < 64 {
			c.pings = append(c.pings, f.Data)
			kick = true
		}
	case *http2.GoAwayFrame:
		if c.goAway == nil {
			c.goAway = &GoAway{Code: f.ErrCode, LastStreamID: f.LastStreamID,
				Debug: string(f.DebugData()), After: time.Since(c.start)}
			c.over.Store(true)
		}
	case *http2.RSTStreamFrame:
		c.resets[f.ErrCode]++
		if w := c.watched[f.StreamID]; w != nil {
			w.reset, w.resetCode = true, f.ErrCode
			w.finish(c.start)
		}
	case *http2.WindowUpdateFrame:
		if f.StreamID == 0 {
			c.connWin += int64(f.Increment)
		} else if w := c.watched[f.StreamID]; w != nil {
			w.win += int64(f.Increment)
		}
	case *http2.DataFrame:
		n := int64(f.Header().Length)
		c.answerBytes += int64(len(f.Data()))
		if c.pendingWin.Add(n) >= replenishAt {
			kick = true
		}
		w := c.watched[f.StreamID]
		if w != nil && len(f.Data()) > 0 {
			w.gotData = true
		}
		if f.StreamEnded() {
			c.answered++
			if w != nil {
				w.ended = true
				w.finish(c.start)
			}
		}
	case *http2.MetaHeadersFrame:
		w := c.watched[f.StreamID]
		if w != nil {
			w.gotHeaders = true
			if v := f.PseudoValue("status"); v != "" && v != "200" {
				w.status = "http " + v
			}
			for _, hf := range f.RegularFields() {
				switch hf.Name {
				case "grpc-status":
					w.status = hf.Value
				case "grpc-message":
					w.message = hf.Value
				}
			}
		}
		if f.StreamEnded() {
			c.answered++
			if w != nil {
				w.ended = true
				w.finish(c.start)
			}
		}
	case *http2.HeadersFrame:
		if f.StreamEnded() {
			c.answered++
		}
	}
	c.notifyLocked()
	c.mu.Unlock()
	if kick {
		select {
		case c.kick <- struct{}{}:
		default:
		}
	}
}

// control writes the answers the reader asked for: SETTINGS ACKs, PING
// ACKs and connection WINDOW_UPDATEs.
func (c *conn) control() {
	defer close(c.ctlExited)
	for {
		select {
		case <-c.quit:
			return
		case <-c.kick:
		}
		c.mu.Lock()
		acks, pings := c.settingsAck, c.pings
		c.settingsAck, c.pings = 0, nil
		c.mu.Unlock()
		win := int64(0)
		if p := c.pendingWin.Load(); p >= replenishAt {
			win = c.pendingWin.Swap(0)
		}
		c.wmu.Lock()
		for range acks {
			_ = c.fr.WriteSettingsAck()
			c.frames.Add(1)
		}
		for _, p := range pings {
			_ = c.fr.WritePing(true, p)
			c.frames.Add(1)
		}
		for win > 0 {
			inc := min(win, 1<<31-1)
			_ = c.fr.WriteWindowUpdate(0, uint32(inc))
			c.frames.Add(1)
			win -= inc
		}
		_ = c.bw.Flush()
		c.wmu.Unlock()
	}
}

// requestHeaders are a gRPC request's HEADERS fields for method.
func requestHeaders(authority, method string) []hpack.HeaderField {
	return []hpack.HeaderField{
		{Name: ":method", Value: "POST"},
		{Name: ":scheme", Value: "http"},
		{Name: ":path", Value: method},
		{Name: ":authority", Value: authority},
		{Name: "content-type", Value: "application/grpc"},
		{Name: "te", Value: "trailers"},
		{Name: "user-agent", Value: "infergate-bench-attack"},
	}
}

// headers writes one HEADERS frame (END_HEADERS set) on stream id.
func (c *conn) headers(id uint32, fields []hpack.HeaderField, end bool) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.hbuf.Reset()
	for _, f := range fields {
		if err := c.enc.WriteField(f); err != nil {
			return err
		}
	}
	c.frames.Add(1)
	return c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: c.hbuf.Bytes(), EndStream: end, EndHeaders: true})
}

// data writes p as DATA frames of at most chunk bytes on stream id; the
// caller has taken the window.
func (c *conn) data(id uint32, p []byte, end bool) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	for {
		n := min(len(p), chunk)
		last := n == len(p)
		c.frames.Add(1)
		if err := c.fr.WriteData(id, end && last, p[:n]); err != nil {
			return err
		}
		if last {
			return nil
		}
		p = p[n:]
	}
}

func (c *conn) rst(id uint32, code http2.ErrCode) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.frames.Add(1)
	return c.fr.WriteRSTStream(id, code)
}

func (c *conn) flush() error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.bw.Flush()
}

// watchStream starts following stream id: its window, status and resets.
func (c *conn) watchStream(id uint32) {
	c.mu.Lock()
	c.watched[id] = &watch{win: c.initWin}
	c.mu.Unlock()
}

// stream returns a copy of a watched stream's state.
func (c *conn) stream(id uint32) watch {
	c.mu.Lock()
	defer c.mu.Unlock()
	if w := c.watched[id]; w != nil {
		return *w
	}
	return watch{}
}

// tryTake takes up to want bytes of send window for stream id (0: a
// fresh stream the attack does not watch, whose window is the initial
// one) and returns how many; with all, it takes want or nothing.
func (c *conn) tryTake(id uint32, want int, all bool) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	avail := c.connWin
	w := c.watched[id]
	if w != nil {
		avail = min(avail, w.win)
	} else {
		avail = min(avail, c.initWin)
	}
	n := min(int64(want), avail)
	if n <= 0 || (all && n < int64(want)) {
		return 0
	}
	c.connWin -= n
	if w != nil {
		w.win -= n
	}
	return int(n)
}

// take waits for send window on stream id (see tryTake), flushing first
// so that the server can see what it has to grant window for.
func (c *conn) take(ctx context.Context, id uint32, want int, all bool) (int, error) {
	for {
		if n := c.tryTake(id, want, all); n > 0 {
			return n, nil
		}
		if err := c.waitChange(ctx); err != nil {
			return 0, err
		}
	}
}

// waitChange flushes and waits for the reader to see something new; it
// fails once the connection is over or ctx ends.
func (c *conn) waitChange(ctx context.Context) error {
	c.mu.Lock()
	ch, done := c.changed, c.readDone
	c.mu.Unlock()
	if done {
		return errClosed
	}
	if err := c.flush(); err != nil {
		return err
	}
	t0 := time.Now()
	defer func() {
		c.mu.Lock()
		c.stalled += time.Since(t0)
		c.mu.Unlock()
	}()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-ch:
		return nil
	}
}

// waitFor waits until cond (called with c.mu held) holds, the connection
// ends or ctx ends; it reports whether cond held.
func (c *conn) waitFor(ctx context.Context, cond func() bool) bool {
	for {
		c.mu.Lock()
		ok, done, ch := cond(), c.readDone, c.changed
		c.mu.Unlock()
		if ok {
			return true
		}
		if done {
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-ch:
		}
	}
}

// stopReading stops the reader for good: nothing the server sends is read
// any more, window updates included.
func (c *conn) stopReading() {
	c.stopRead.Store(true)
	c.nc.SetReadDeadline(time.Now())
	<-c.readExited
}

// why says why the attack stopped early after err ("" when it did not:
// no error, or ctx, the attack's own clock, ended it).
func (c *conn) why(ctx context.Context, err error) string {
	quiet := err == nil || ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
	if !quiet && !c.stopRead.Load() {
		// A write that failed because the server closed: its GOAWAY or
		// EOF is still on its way through the reader.
		select {
		case <-c.readExited:
		case <-time.After(time.Second):
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.goAway != nil:
		return "GOAWAY " + c.goAway.Code.String()
	case c.readDone:
		return errClosed.Error()
	case quiet:
		return ""
	default:
		return err.Error()
	}
}

// close ends the connection and fills r with what the reader saw.
func (c *conn) close(r *Report) {
	c.closing.Store(true)
	c.stopAfter()
	c.nc.Close()
	<-c.readExited
	close(c.quit)
	<-c.ctlExited
	c.mu.Lock()
	defer c.mu.Unlock()
	r.Elapsed = time.Since(c.start)
	r.Frames, r.Bytes = c.frames.Load(), c.bytes.Load()
	r.GoAway = c.goAway
	r.ClosedAfter = c.closedAt
	r.Resets = map[http2.ErrCode]int64{}
	for k, v := range c.resets {
		r.Resets[k] = v
	}
	r.Answered, r.AnswerBytes = c.answered, c.answerBytes
	r.Stalled = c.stalled
}
