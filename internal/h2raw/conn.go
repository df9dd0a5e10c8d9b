// Package h2raw is a raw HTTP/2 client connection for tests and load
// generators: the attacks of internal/attack and bench's memory sizing
// write frames with it that no well-behaved client would, and read what
// the server answers, without an HTTP/2 stack in between.
//
// The caller writes frames (Headers, Data, Reset, or Send, which waits for
// window first) under the connection's write lock. A reader goroutine
// reads every frame the server sends and keeps the send windows, GOAWAY,
// resets and the state of watched streams (Seen); a control goroutine
// answers SETTINGS and PING and returns connection window, so the reader
// never blocks on a write. Light enough that thousands fit in one
// process with a small buffer (Options.BufSize).
package h2raw

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

const (
	// replenishAt is how many connection-window bytes are read before one
	// WINDOW_UPDATE returns them.
	replenishAt = 16 << 20
	// Chunk is the largest DATA frame written: the default
	// SETTINGS_MAX_FRAME_SIZE, which every server accepts.
	Chunk = 16 << 10
)

// ErrClosed is returned by writes and waits once the server has ended the
// connection.
var ErrClosed = errors.New("connection closed by the server")

// Options configures a connection.
type Options struct {
	// Settings go in the client's first SETTINGS frame; ConnWindow, when
	// > 0, is granted on stream 0 right after it.
	Settings   []http2.Setting
	ConnWindow uint32
	// Decode turns on HPACK decoding of the server's header blocks, which
	// watched streams need for grpc-status.
	Decode bool
	// BufSize is the size of the read and the write buffer; zero means
	// 64 KiB.
	BufSize int
	// NoReplenish: the connection window is never returned (a client
	// that reads nothing it is sent).
	NoReplenish bool
}

// GoAway is the first GOAWAY a server sent on a connection.
type GoAway struct {
	Code         http2.ErrCode
	LastStreamID uint32
	Debug        string
	// After is the time from the dial to the frame's arrival.
	After time.Duration
}

func (g *GoAway) String() string {
	s := fmt.Sprintf("%s last_stream=%d after %s", g.Code, g.LastStreamID, g.After.Round(time.Millisecond))
	if g.Debug != "" {
		s += fmt.Sprintf(" debug=%q", g.Debug)
	}
	return s
}

// Stream is what the reader keeps for one watched stream.
type Stream struct {
	Win             int64 // the client's send window on the stream
	Status, Message string
	GotHeaders      bool
	GotData         bool // DATA with a payload arrived
	Ended           bool // the server sent END_STREAM
	Reset           bool
	ResetCode       http2.ErrCode
	EndAt           time.Duration // when it ended or was reset, from the dial
}

// finish notes when the stream first ended or was reset.
func (w *Stream) finish(since time.Time) {
	if w.EndAt == 0 {
		w.EndAt = time.Since(since)
	}
}

// Seen is what the reader saw; a WaitFor condition reads it under the
// connection's lock.
type Seen struct {
	GoAway *GoAway
	// Closed: the server ended the connection (read EOF or error), at
	// ClosedAt from the dial.
	Closed   bool
	ClosedAt time.Duration
	// Resets counts the RST_STREAM frames the server sent, by code.
	Resets map[http2.ErrCode]int64
	// Answered is the number of streams the server ended (a frame with
	// END_STREAM); AnswerBytes the DATA bytes read.
	Answered, AnswerBytes int64
	// SettingsAcked: the server acknowledged our SETTINGS (it read the
	// preface). PingAcks counts the PING acknowledgements.
	SettingsAcked bool
	PingAcks      int
	// Streams are the watched streams by ID.
	Streams map[uint32]*Stream
	// Stalled is the time spent waiting for the server's window.
	Stalled time.Duration
}

// Conn is one raw HTTP/2 client connection.
type Conn struct {
	nc     net.Conn
	start  time.Time
	frames atomic.Int64
	bytes  atomic.Int64
	opts   Options

	wmu  sync.Mutex
	bw   *bufio.Writer
	fr   *http2.Framer
	enc  *hpack.Encoder
	hbuf bytes.Buffer

	mu          sync.Mutex
	changed     chan struct{} // closed and replaced at every change below
	seen        Seen
	connWin     int64 // the client's send window on the connection
	initWin     int64 // the server's SETTINGS_INITIAL_WINDOW_SIZE
	pings       [][8]byte
	settingsAck int

	over       atomic.Bool  // GOAWAY came or the connection ended
	closing    atomic.Bool  // the caller closes the connection itself
	stopRead   atomic.Bool  // the caller stopped reading on purpose
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

// Dial opens a connection to addr, writes the preface, the client's
// SETTINGS and window, and starts the reader. When ctx ends, blocked
// writes fail at once.
func Dial(ctx context.Context, addr string, o Options) (*Conn, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	if o.BufSize <= 0 {
		o.BufSize = 64 << 10
	}
	c := &Conn{
		nc:         nc,
		start:      time.Now(),
		opts:       o,
		changed:    make(chan struct{}),
		seen:       Seen{Resets: map[http2.ErrCode]int64{}, Streams: map[uint32]*Stream{}},
		connWin:    65535,
		initWin:    65535,
		kick:       make(chan struct{}, 1),
		quit:       make(chan struct{}),
		readExited: make(chan struct{}),
		ctlExited:  make(chan struct{}),
	}
	c.bw = bufio.NewWriterSize(countingWriter{nc, &c.bytes}, o.BufSize)
	c.fr = http2.NewFramer(c.bw, bufio.NewReaderSize(nc, o.BufSize))
	c.fr.AllowIllegalWrites = true
	if o.Decode {
		c.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
		c.fr.MaxHeaderListSize = 1 << 20
	}
	c.enc = hpack.NewEncoder(&c.hbuf)
	c.stopAfter = context.AfterFunc(ctx, func() { nc.SetWriteDeadline(time.Now()) })

	c.wmu.Lock()
	_, err = c.bw.WriteString(http2.ClientPreface)
	if err == nil {
		err = c.fr.WriteSettings(o.Settings...)
		c.frames.Add(1)
	}
	if err == nil && o.ConnWindow > 0 {
		err = c.fr.WriteWindowUpdate(0, o.ConnWindow)
		c.frames.Add(1)
	}
	if err == nil {
		err = c.bw.Flush()
	}
	c.wmu.Unlock()
	if err != nil {
		c.stopAfter()
		nc.Close()
		return nil, fmt.Errorf("preface to %s: %w", addr, err)
	}
	go c.readLoop()
	go c.control()
	return c, nil
}

// Started is when the connection was dialled.
func (c *Conn) Started() time.Time { return c.start }

// Over says whether a GOAWAY came or the connection ended.
func (c *Conn) Over() bool { return c.over.Load() }

// notifyLocked wakes everyone waiting for a change; c.mu is held.
func (c *Conn) notifyLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}

func (c *Conn) readLoop() {
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
			c.seen.Closed = true
			c.seen.ClosedAt = time.Since(c.start)
			c.notifyLocked()
			c.mu.Unlock()
			c.over.Store(true)
			return
		}
		c.handle(f)
	}
}

func (c *Conn) handle(f http2.Frame) {
	kick := false
	c.mu.Lock()
	s := &c.seen
	switch f := f.(type) {
	case *http2.SettingsFrame:
		if f.IsAck() {
			s.SettingsAcked = true
			break
		}
		_ = f.ForeachSetting(func(st http2.Setting) error {
			if st.ID == http2.SettingInitialWindowSize {
				delta := int64(st.Val) - c.initWin
				c.initWin = int64(st.Val)
				for _, w := range s.Streams {
					w.Win += delta
				}
			}
			return nil
		})
		c.settingsAck++
		kick = true
	case *http2.PingFrame:
		if f.IsAck() {
			s.PingAcks++
		} else if len(c.pings) < 64 {
			c.pings = append(c.pings, f.Data)
			kick = true
		}
	case *http2.GoAwayFrame:
		if s.GoAway == nil {
			s.GoAway = &GoAway{Code: f.ErrCode, LastStreamID: f.LastStreamID,
				Debug: string(f.DebugData()), After: time.Since(c.start)}
			c.over.Store(true)
		}
	case *http2.RSTStreamFrame:
		s.Resets[f.ErrCode]++
		if w := s.Streams[f.StreamID]; w != nil {
			w.Reset, w.ResetCode = true, f.ErrCode
			w.finish(c.start)
		}
	case *http2.WindowUpdateFrame:
		if f.StreamID == 0 {
			c.connWin += int64(f.Increment)
		} else if w := s.Streams[f.StreamID]; w != nil {
			w.Win += int64(f.Increment)
		}
	case *http2.DataFrame:
		n := int64(f.Header().Length)
		s.AnswerBytes += int64(len(f.Data()))
		if !c.opts.NoReplenish && c.pendingWin.Add(n) >= replenishAt {
			kick = true
		}
		w := s.Streams[f.StreamID]
		if w != nil && len(f.Data()) > 0 {
			w.GotData = true
		}
		c.endedLocked(w, f.StreamEnded())
	case *http2.MetaHeadersFrame:
		w := s.Streams[f.StreamID]
		if w != nil {
			w.GotHeaders = true
			if v := f.PseudoValue("status"); v != "" && v != "200" {
				w.Status = "http " + v
			}
			for _, hf := range f.RegularFields() {
				switch hf.Name {
				case "grpc-status":
					w.Status = hf.Value
				case "grpc-message":
					w.Message = hf.Value
				}
			}
		}
		c.endedLocked(w, f.StreamEnded())
	case *http2.HeadersFrame:
		c.endedLocked(s.Streams[f.StreamID], f.StreamEnded())
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

// endedLocked counts a frame that ended a stream (w, when watched).
func (c *Conn) endedLocked(w *Stream, end bool) {
	if !end {
		return
	}
	c.seen.Answered++
	if w != nil {
		w.Ended = true
		w.finish(c.start)
	}
}

// control writes the answers the reader asked for: SETTINGS ACKs, PING
// ACKs and connection WINDOW_UPDATEs.
func (c *Conn) control() {
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

// RequestHeaders are a gRPC request's HEADERS fields for method.
func RequestHeaders(authority, method, userAgent string) []hpack.HeaderField {
	return []hpack.HeaderField{
		{Name: ":method", Value: "POST"},
		{Name: ":scheme", Value: "http"},
		{Name: ":path", Value: method},
		{Name: ":authority", Value: authority},
		{Name: "content-type", Value: "application/grpc"},
		{Name: "te", Value: "trailers"},
		{Name: "user-agent", Value: userAgent},
	}
}

// Headers writes one HEADERS frame (END_HEADERS set) on stream id; not
// flushed.
func (c *Conn) Headers(id uint32, fields []hpack.HeaderField, end bool) error {
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

// Data writes p as DATA frames of at most Chunk bytes on stream id; the
// caller has taken the window (Take), or means to overrun it.
func (c *Conn) Data(id uint32, p []byte, end bool) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	for {
		n := min(len(p), Chunk)
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

// Reset writes RST_STREAM on stream id.
func (c *Conn) Reset(id uint32, code http2.ErrCode) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.frames.Add(1)
	return c.fr.WriteRSTStream(id, code)
}

// Ping writes a PING.
func (c *Conn) Ping(data [8]byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.frames.Add(1)
	return c.fr.WritePing(false, data)
}

// Flush writes what is buffered to the socket.
func (c *Conn) Flush() error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.bw.Flush()
}

// Watch starts following stream id: its window, status and resets.
func (c *Conn) Watch(id uint32) {
	c.mu.Lock()
	c.seen.Streams[id] = &Stream{Win: c.initWin}
	c.mu.Unlock()
}

// ResetCount is how many RST_STREAM frames the server sent.
func (c *Conn) ResetCount() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var n int64
	for _, v := range c.seen.Resets {
		n += v
	}
	return n
}

// Stream returns a copy of a watched stream's state.
func (c *Conn) Stream(id uint32) Stream {
	c.mu.Lock()
	defer c.mu.Unlock()
	if w := c.seen.Streams[id]; w != nil {
		return *w
	}
	return Stream{}
}

// TryTake takes up to want bytes of send window for stream id (one not
// watched has the initial window) and returns how many; with all, it
// takes want or nothing.
func (c *Conn) TryTake(id uint32, want int, all bool) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	avail := c.connWin
	w := c.seen.Streams[id]
	if w != nil {
		avail = min(avail, w.Win)
	} else {
		avail = min(avail, c.initWin)
	}
	n := min(int64(want), avail)
	if n <= 0 || (all && n < int64(want)) {
		return 0
	}
	c.connWin -= n
	if w != nil {
		w.Win -= n
	}
	return int(n)
}

// Take waits for send window on stream id (see TryTake), flushing first
// so that the server can see what it has to grant window for.
func (c *Conn) Take(ctx context.Context, id uint32, want int, all bool) (int, error) {
	for {
		if n := c.TryTake(id, want, all); n > 0 {
			return n, nil
		}
		if err := c.WaitChange(ctx); err != nil {
			return 0, err
		}
	}
}

// Send writes p on watched stream id as the windows allow, END_STREAM on
// the last frame when end, and flushes. It returns the bytes sent,
// stopping early without an error when no window came for stall.
func (c *Conn) Send(ctx context.Context, id uint32, p []byte, end bool, stall time.Duration) (int, error) {
	sent := 0
	for sent < len(p) {
		wctx, cancel := context.WithTimeout(ctx, stall)
		n, err := c.Take(wctx, id, min(len(p)-sent, Chunk), false)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			return sent, c.Flush() // stalled: the server withholds window
		}
		if err != nil {
			return sent, err
		}
		if err := c.Data(id, p[sent:sent+n], end && sent+n == len(p)); err != nil {
			return sent, err
		}
		sent += n
	}
	return sent, c.Flush()
}

// Call sends a whole unary call on stream id and waits for its end.
func (c *Conn) Call(ctx context.Context, id uint32, fields []hpack.HeaderField, body []byte) error {
	c.Watch(id)
	if err := c.Headers(id, fields, false); err != nil {
		return err
	}
	if _, err := c.Send(ctx, id, body, true, 5*time.Second); err != nil {
		return err
	}
	return c.Wait(ctx, func(s *Seen) bool { w := s.Streams[id]; return w.Ended || w.Reset })
}

// Sync sends a PING and waits for its ACK: the server's reader has
// handled every frame sent before it.
func (c *Conn) Sync(ctx context.Context) error {
	c.mu.Lock()
	want := c.seen.PingAcks + 1
	c.mu.Unlock()
	if err := c.Ping([8]byte{'s', 'y', 'n', 'c'}); err != nil {
		return err
	}
	if err := c.Flush(); err != nil {
		return err
	}
	return c.Wait(ctx, func(s *Seen) bool { return s.PingAcks >= want })
}

// WaitChange flushes and waits for the reader to see something new; it
// fails once the connection is over or ctx ends.
func (c *Conn) WaitChange(ctx context.Context) error {
	c.mu.Lock()
	ch, done := c.changed, c.seen.Closed
	c.mu.Unlock()
	if done {
		return ErrClosed
	}
	if err := c.Flush(); err != nil {
		return err
	}
	t0 := time.Now()
	defer func() {
		c.mu.Lock()
		c.seen.Stalled += time.Since(t0)
		c.mu.Unlock()
	}()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-ch:
		return nil
	}
}

// WaitFor waits until cond (called under the connection's lock) holds,
// the connection ends or ctx ends; it reports whether cond held. A GOAWAY
// alone does not end the wait: streams below its last ID go on.
func (c *Conn) WaitFor(ctx context.Context, cond func(*Seen) bool) bool {
	return c.wait(ctx, cond, false) == nil
}

// Wait waits as WaitFor does, but gives up at a GOAWAY too, and says why
// cond did not come to hold: the server's GOAWAY, its close, or ctx.
func (c *Conn) Wait(ctx context.Context, cond func(*Seen) bool) error {
	return c.wait(ctx, cond, true)
}

func (c *Conn) wait(ctx context.Context, cond func(*Seen) bool, stopAtGoAway bool) error {
	for {
		c.mu.Lock()
		ok, ch := cond(&c.seen), c.changed
		goAway, closed := c.seen.GoAway, c.seen.Closed
		c.mu.Unlock()
		switch {
		case ok:
			return nil
		case closed:
			return ErrClosed
		case stopAtGoAway && goAway != nil:
			return fmt.Errorf("GOAWAY %s from the server", goAway.Code)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		}
	}
}

// StopReading stops the reader for good: nothing the server sends is read
// any more, window updates included.
func (c *Conn) StopReading() {
	c.stopRead.Store(true)
	c.nc.SetReadDeadline(time.Now())
	<-c.readExited
}

// Why says why a run on the connection stopped early after err ("" when
// it did not: no error, or ctx, the caller's own clock, ended it).
func (c *Conn) Why(ctx context.Context, err error) string {
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
	case c.seen.GoAway != nil:
		return "GOAWAY " + c.seen.GoAway.Code.String()
	case c.seen.Closed:
		return ErrClosed.Error()
	case quiet:
		return ""
	default:
		return err.Error()
	}
}

// Totals is what a connection wrote, from its dial to its close.
type Totals struct {
	Elapsed       time.Duration
	Frames, Bytes int64
}

// Close ends the connection and returns what it wrote and a copy of what
// the reader saw.
func (c *Conn) Close() (Totals, Seen) {
	c.closing.Store(true)
	c.stopAfter()
	c.nc.Close()
	<-c.readExited
	select {
	case <-c.quit:
	default:
		close(c.quit)
	}
	<-c.ctlExited
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.seen
	s.Resets = make(map[http2.ErrCode]int64, len(c.seen.Resets))
	for k, v := range c.seen.Resets {
		s.Resets[k] = v
	}
	s.Streams = nil
	return Totals{Elapsed: time.Since(c.start), Frames: c.frames.Load(), Bytes: c.bytes.Load()}, s
}

func (c *Conn) String() string { return fmt.Sprintf("conn %v", c.nc.LocalAddr()) }
