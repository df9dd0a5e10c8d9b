package h2codec

import (
	"bytes"
	"errors"
	"io"
	"iter"
	"maps"
	"net"
	"sync"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// Config is what a connection needs to know of the side it serves.
type Config struct {
	// BufSize is the read buffer's size (readBuf grows it while the peer
	// sends faster than it is read).
	BufSize int
	// MaxReadFrame and MaxHeaderList are the largest frame and header
	// list the peer may send (our SETTINGS).
	MaxReadFrame, MaxHeaderList uint32
	// MaxStreams is our SETTINGS_MAX_CONCURRENT_STREAMS to a client.
	MaxStreams uint32
	// InitWindow is the window every stream starts with (our SETTINGS);
	// StreamWindow the widest a stream's window grows to; ConnWindow the
	// connection's.
	InitWindow, StreamWindow, ConnWindow int64
	// OutCap is how much output waits in the connection's buffer before
	// data waits in its stream's queue instead (and its source gets no
	// window).
	OutCap int
	// Budget pays for windows wider than InitWindow.
	Budget Budget
}

// Budget is the byte budget that wider windows are taken from (package
// budget's Budget): a wider window lets a sender put more in the relay's
// queues.
type Budget interface {
	TryTake(n int64) bool
	GiveBack(n int64)
}

// Conn is one HTTP/2 connection, either side. Its reader goroutine owns
// rd; everything else is guarded by its lock (Lock), which is never held
// while another Conn's is taken (credits to other connections are handed
// back to the caller to apply after unlocking).
type Conn struct {
	nc  net.Conn
	raw *rawWriter // non-blocking writes; nil: the flusher writes
	br  *readBuf
	rd  *http2.Framer // reads only, on the reader goroutine
	cfg *Config

	mu sync.Mutex
	// out holds frames not yet written to nc; spare is the other half of
	// the double buffer the flusher swaps in.
	out, spare []byte
	off        int  // out[:off] is written already
	flushing   bool // a flusher goroutine owns the writing
	closed     bool
	err        error // why it closed
	wr         *http2.Framer
	// iov and vhdr are writeVecLocked's scratch: the buffers of one
	// writev and its frame headers.
	iov  [][]byte
	vhdr []byte
	enc  *hpack.Encoder
	hbuf bytes.Buffer

	// acked: the peer acknowledged our SETTINGS, so our InitWindow binds
	// it; before, it may count a stream's window from 65535.
	acked bool

	// The peer's settings.
	peerMaxFrame   uint32
	peerInitWin    int32
	peerMaxStreams uint32

	send outflow // what we may send on the connection
	recv inflow  // what the peer may send on it

	halves map[uint32]*Half // streams by this connection's stream ID
	// queued are halves with data waiting for window or buffer space.
	queued []*Half

	onClose func(*Conn, error) // called once, without mu held
}

// Half is one stream as one connection sees it: the stream's ID there, its
// state and both directions' flow control. Guarded by its Conn's lock.
type Half struct {
	c  *Conn
	id uint32
	// Owner is what the user of the codec keeps for the stream.
	Owner any

	state State
	send  outflow
	q     []pending // frames waiting for window, in order
	// queued: in c.queued.
	queued bool

	recv inflow
	// win is the receive window kept open for the stream: the initial
	// window at first, widened while its data leaves as fast as it
	// comes (WidenLocked), or to a whole request the budget admitted.
	win int64
	// extra is what widening took of the budget, given back when h is
	// forgotten; got counts the bytes received on h.
	extra, got int64
	gone       bool // removed from c.halves
	// closeAfterQueue: the stream ended; forget h once its queue is out.
	closeAfterQueue bool
}

// ID is the stream's ID on its connection.
func (h *Half) ID() uint32 { return h.id }

// Conn is the connection h belongs to.
func (h *Half) Conn() *Conn { return h.c }

// GoneLocked says whether h was forgotten (RemoveHalfLocked).
func (h *Half) GoneLocked() bool { return h.gone }

// StateLocked is h's state (RFC 9113 5.1).
func (h *Half) StateLocked() State { return h.state }

// ForgetAfterQueueLocked forgets h now when nothing of it waits to be
// written, or else once its queue is out.
func (h *Half) ForgetAfterQueueLocked() {
	if len(h.q) == 0 {
		h.c.RemoveHalfLocked(h)
		return
	}
	h.closeAfterQueue = true
}

// pending is one queued frame of a half: data (the bytes are owned by the
// queue), or headers (encoded when written, so HPACK state stays in wire
// order).
type pending struct {
	data   []byte
	hdrs   []hpack.HeaderField
	isHdr  bool
	end    bool
	credit Credit // what writing data gives back to its source
}

// Credit is window to return to a source once its data left for the other
// side.
type Credit struct {
	H *Half
	N int64
}

// outWriter makes the write framer append to out.
type outWriter Conn

func (w *outWriter) Write(p []byte) (int, error) {
	w.out = append(w.out, p...)
	return len(p), nil
}

// NewConn starts a connection over nc; onClose hears once that it closed.
func NewConn(nc net.Conn, cfg *Config, onClose func(*Conn, error)) *Conn {
	c := &Conn{
		nc:             nc,
		raw:            newRawWriter(nc),
		br:             newReadBuf(nc, cfg.BufSize),
		cfg:            cfg,
		peerMaxFrame:   16384,
		peerInitWin:    65535,
		peerMaxStreams: ^uint32(0),
		send:           outflow{n: 65535},
		recv:           inflow{avail: 65535},
		halves:         make(map[uint32]*Half),
		onClose:        onClose,
	}
	c.rd = http2.NewFramer(nil, c.br)
	c.rd.SetMaxReadFrameSize(cfg.MaxReadFrame)
	c.rd.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	c.rd.MaxHeaderListSize = cfg.MaxHeaderList
	c.wr = http2.NewFramer((*outWriter)(c), nil)
	c.enc = hpack.NewEncoder(&c.hbuf)
	return c
}

// Lock takes the connection's lock; every method named Locked wants it.
func (c *Conn) Lock() { c.mu.Lock() }

// Unlock releases it.
func (c *Conn) Unlock() { c.mu.Unlock() }

// NetConn is the connection underneath.
func (c *Conn) NetConn() net.Conn { return c.nc }

// ClosedLocked says whether the connection closed.
func (c *Conn) ClosedLocked() bool { return c.closed }

// BusyLocked says whether anything is left on it: a stream, or output not
// yet written.
func (c *Conn) BusyLocked() bool {
	return !c.closed && (len(c.halves) > 0 || len(c.out) > 0 || c.flushing)
}

// HalfLocked is the stream id, or nil when it has none (idle or closed).
func (c *Conn) HalfLocked(id uint32) *Half { return c.halves[id] }

// HalvesLocked are its streams, in no order.
func (c *Conn) HalvesLocked() iter.Seq2[uint32, *Half] { return maps.All(c.halves) }

// OpenLocked is how many streams it has.
func (c *Conn) OpenLocked() int { return len(c.halves) }

// PeerMaxStreamsLocked is the peer's SETTINGS_MAX_CONCURRENT_STREAMS.
func (c *Conn) PeerMaxStreamsLocked() uint32 { return c.peerMaxStreams }

// InitWindow is the window its streams start with.
func (c *Conn) InitWindow() int64 { return c.cfg.InitWindow }

// WriteResetLocked writes RST_STREAM for stream id.
func (c *Conn) WriteResetLocked(id uint32, code http2.ErrCode) {
	_ = c.wr.WriteRSTStream(id, code)
}

// WriteGoAwayLocked writes GOAWAY.
func (c *Conn) WriteGoAwayLocked(last uint32, code http2.ErrCode, debug []byte) {
	_ = c.wr.WriteGoAway(last, code, debug)
}

// ReadPreface reads a client's connection preface and says whether it was
// one.
func (c *Conn) ReadPreface() bool {
	var pre [len(http2.ClientPreface)]byte
	_, err := io.ReadFull(c.br, pre[:])
	return err == nil && string(pre[:]) == http2.ClientPreface
}

// Discard drops n bytes of a DATA frame ReadFrame returned in place, once
// they are used.
func (c *Conn) Discard(n int) { c.br.Discard(n) }

// WholeFrame says whether the next frame is read already: when it is not,
// the next read may block, so what the reader has for others must go
// first.
func (c *Conn) WholeFrame() bool { return c.br.wholeFrame() }

// ReadBig makes the first read take a big buffer (if one is free): for a
// connection known to carry many streams' data.
func (c *Conn) ReadBig() { c.br.startBig() }

// ReleaseBuf gives a big read buffer back; the reader calls it as it ends.
func (c *Conn) ReleaseBuf() { c.br.release() }

// InData is a DATA frame read in place: data lies in the connection's read
// buffer until the reader discards it.
type InData struct {
	ID   uint32
	End  bool
	Data []byte
}

// ReadFrame reads the next frame, on the reader goroutine. An unpadded
// DATA frame that fits the read buffer comes back as in (isData), its
// payload still in the buffer: it is written on from there, not copied
// through the Framer's own buffer first (big tensors are copy-bound). The
// caller discards it once used (c.br.Discard).
func (c *Conn) ReadFrame() (f http2.Frame, in InData, isData bool, err error) {
	fh, err := c.rd.ReadFrameHeader()
	if err != nil {
		return nil, in, false, err
	}
	if fh.Type == http2.FrameData && fh.StreamID != 0 && !fh.Flags.Has(http2.FlagDataPadded) &&
		fh.Length <= c.cfg.MaxReadFrame && int(fh.Length) <= c.br.Size() {
		data, err := c.br.Peek(int(fh.Length))
		if err != nil {
			return nil, in, false, err
		}
		return nil, InData{ID: fh.StreamID, End: fh.Flags.Has(http2.FlagDataEndStream), Data: data}, true, nil
	}
	f, err = c.rd.ReadFrameForHeader(fh)
	return f, in, false, err
}

// greet writes our SETTINGS and the connection window update every
// connection starts with.
func (c *Conn) GreetLocked(client bool) {
	if client {
		c.out = append(c.out, http2.ClientPreface...)
	}
	st := []http2.Setting{
		{ID: http2.SettingInitialWindowSize, Val: uint32(c.cfg.InitWindow)},
		{ID: http2.SettingMaxFrameSize, Val: c.cfg.MaxReadFrame},
		{ID: http2.SettingMaxHeaderListSize, Val: c.cfg.MaxHeaderList},
	}
	if client {
		st = append(st, http2.Setting{ID: http2.SettingEnablePush, Val: 0})
	} else {
		st = append(st, http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: c.cfg.MaxStreams})
	}
	_ = c.wr.WriteSettings(st...)
	if d := c.cfg.ConnWindow - 65535; d > 0 {
		_ = c.wr.WriteWindowUpdate(0, uint32(d))
		c.recv.init(c.recv.avail + d)
	}
}

// addHalf registers stream s under id on c.
func (c *Conn) AddHalfLocked(id uint32, owner any) *Half {
	h := &Half{c: c, id: id, Owner: owner, win: c.cfg.InitWindow}
	h.send.add(int64(c.peerInitWin))
	h.recv.init(c.recvInitLocked())
	c.halves[id] = h
	return h
}

// recvInitLocked is the receive window a new stream starts with. Until the
// peer acknowledges our SETTINGS it may not have read our
// SETTINGS_INITIAL_WINDOW_SIZE and may send as much as the default window
// (RFC 9113 6.9.3); client connections announce less than that.
func (c *Conn) recvInitLocked() int64 {
	if c.acked {
		return c.cfg.InitWindow
	}
	return max(c.cfg.InitWindow, 65535)
}

// onSettingsAckLocked applies our SETTINGS_INITIAL_WINDOW_SIZE to the
// streams opened before the peer acknowledged it, as the peer applied it
// to them on reading it (6.9.2). Only the first ACK counts: we send one
// SETTINGS.
func (c *Conn) onSettingsAckLocked() {
	if c.acked {
		return
	}
	d := c.cfg.InitWindow - c.recvInitLocked()
	c.acked = true
	if d == 0 {
		return
	}
	for _, h := range c.halves {
		h.recv.avail += d
	}
}

// RemoveHalfLocked forgets h; its queued frames are dropped.
func (c *Conn) RemoveHalfLocked(h *Half) {
	if h.gone {
		return
	}
	h.gone = true
	h.q = nil
	delete(c.halves, h.id)
	if h.extra > 0 {
		c.cfg.Budget.GiveBack(h.extra)
		h.extra = 0
	}
}

// WriteHeadersLocked writes a HEADERS frame (and CONTINUATIONs) for h, or
// queues it behind h's pending data.
func (c *Conn) WriteHeadersLocked(h *Half, fields []hpack.HeaderField, end bool) {
	if len(h.q) > 0 {
		h.q = append(h.q, pending{isHdr: true, hdrs: fields, end: end})
		return
	}
	c.encodeHeadersLocked(h, fields, end)
}

func (c *Conn) encodeHeadersLocked(h *Half, fields []hpack.HeaderField, end bool) {
	id := h.id
	if end {
		h.endLocal()
	}
	c.hbuf.Reset()
	for _, f := range fields {
		_ = c.enc.WriteField(f)
	}
	block := c.hbuf.Bytes()
	max := int(c.peerMaxFrame)
	first := block
	if len(first) > max {
		first = first[:max]
	}
	block = block[len(first):]
	_ = c.wr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: first, EndStream: end, EndHeaders: len(block) == 0})
	for len(block) > 0 {
		n := min(len(block), max)
		_ = c.wr.WriteContinuation(id, n == len(block), block[:n])
		block = block[n:]
	}
}

// WriteDataLocked sends data on h as far as the windows and the output
// buffer allow and queues the rest (copied unless owned). It returns the
// Credit that is due now for what was written; the rest is given back as
// the queue drains.
func (c *Conn) WriteDataLocked(h *Half, data []byte, end, owned bool, src *Half) (due Credit) {
	if len(h.q) == 0 {
		if n := c.sendableLocked(h, len(data)); n > 0 || (len(data) == 0 && end) {
			k := c.sendDataLocked(h, data, n, end, owned)
			due.N += int64(k)
			data = data[k:]
		}
		if len(data) == 0 {
			due.H = src
			return due
		}
	}
	if !owned {
		data = bytes.Clone(data)
	}
	h.q = append(h.q, pending{data: data, end: end, credit: Credit{H: src, N: int64(len(data))}})
	if !h.queued {
		h.queued = true
		c.queued = append(c.queued, h)
	}
	due.H = src
	return due
}

// sendDataLocked sends data[:n] on h as DATA frames, END_STREAM on the
// frame that ends data when end (empty data goes as one empty frame), and
// takes them from h's and the connection's send windows; n must fit both.
// own says data is the relay's own, which writeVecLocked may write from
// where it lies. It returns how many bytes of data it sent.
func (c *Conn) sendDataLocked(h *Half, data []byte, n int, end, own bool) int {
	if len(data) == 0 {
		c.appendData(h.id, end, nil)
		if end {
			h.endLocal()
		}
		return 0
	}
	sent := 0
	if own {
		sent = c.writeVecLocked(h.id, data, n, end)
	}
	for sent < n {
		k := min(n-sent, int(c.peerMaxFrame))
		c.appendData(h.id, end && sent+k == len(data), data[sent:sent+k])
		sent += k
	}
	h.send.take(int64(sent))
	c.send.take(int64(sent))
	if end && sent == len(data) {
		h.endLocal()
	}
	return sent
}

// appendData writes one DATA frame into out: what the Framer's WriteData
// does, without its copy through its own buffer.
func (c *Conn) appendData(id uint32, end bool, data []byte) {
	var flags byte
	if end {
		flags = byte(http2.FlagDataEndStream)
	}
	n := len(data)
	hdr := [9]byte{byte(n >> 16), byte(n >> 8), byte(n), byte(http2.FrameData), flags,
		byte(id>>24) & 0x7f, byte(id >> 16), byte(id >> 8), byte(id)}
	c.out = append(c.out, hdr[:]...)
	c.out = append(c.out, data...)
	if len(c.out)-c.off >= writeAt {
		// A big message: write as it grows, not all at the end of the
		// reader's batch. (Not KickLocked: this may run inside
		// drainLocked.)
		c.writeOutLocked()
	}
}

// writeVecLocked sends data[:n] on stream id as DATA frames written
// straight from data with one writev(2), after what out holds, instead of
// copying them into out first: for a big request that copy was the
// relay's largest cost in user space. data must be the relay's own (a
// request read whole, a queued frame's bytes) and no flusher may be
// writing. end goes on the frame that ends data, if one does.
//
// It returns how many bytes of data went into frames: written, or the
// unwritten rest of a frame the kernel took part of, copied to out so the
// frame is whole. The caller sends the rest as before. It returns 0, having
// written no frame, when n is small (copying is cheaper than a syscall
// more) or the kernel did not take out's bytes first.
func (c *Conn) writeVecLocked(id uint32, data []byte, n int, end bool) int {
	if n < vecMin || c.flushing || c.closed || c.raw == nil {
		return 0
	}
	maxF := int(c.peerMaxFrame)
	frames := min((n+maxF-1)/maxF, maxVecFrames)
	if c.vhdr == nil {
		c.vhdr = make([]byte, 9*maxVecFrames)
	}
	iov := c.iov[:0]
	prefix := len(c.out) - c.off
	if prefix > 0 {
		iov = append(iov, c.out[c.off:])
	}
	covered := 0
	for i := range frames {
		k := min(n-covered, maxF)
		var flags byte
		if end && covered+k == len(data) {
			flags = byte(http2.FlagDataEndStream)
		}
		hdr := c.vhdr[9*i : 9*i+9]
		hdr[0], hdr[1], hdr[2], hdr[3], hdr[4] = byte(k>>16), byte(k>>8), byte(k), byte(http2.FrameData), flags
		hdr[5], hdr[6], hdr[7], hdr[8] = byte(id>>24)&0x7f, byte(id>>16), byte(id>>8), byte(id)
		iov = append(iov, hdr, data[covered:covered+k])
		covered += k
	}
	written, err := c.raw.writev(iov)
	clear(iov) // holds no request past the call
	c.iov = iov[:0]
	if err != nil {
		c.FailLocked(err)
		return covered // the connection is gone; nothing more is sent
	}
	if written < prefix {
		c.off += written
		return 0
	}
	c.out, c.off = c.out[:0], 0
	rest := written - prefix
	done := 0
	for i := range frames {
		k := min(n-done, maxF)
		hdr := c.vhdr[9*i : 9*i+9]
		switch {
		case rest >= 9+k:
			rest -= 9 + k
			done += k
			continue
		case rest > 0: // the kernel took part of this frame: out gets the rest
			if rest < 9 {
				c.out = append(c.out, hdr[rest:]...)
				c.out = append(c.out, data[done:done+k]...)
			} else {
				c.out = append(c.out, data[done+rest-9:done+k]...)
			}
			done += k
		}
		break
	}
	return done
}

const (
	// vecMin is the least data writeVecLocked writes from its own
	// memory: below it a copy costs less than the syscall it may add.
	vecMin = 16 << 10
	// maxVecFrames bounds one writev: two buffers a frame, within
	// IOV_MAX (1024).
	maxVecFrames = 256
)

// writeAt is how much output makes a write start at once. Frames of a big
// message are 16 KiB (gRPC's peers use HTTP/2's default): written one by
// one (a writev each, tried first) they cost more in syscalls than the
// copy into the buffer saves.
const writeAt = 256 << 10

// ErrCalm ends a connection whose peer makes the relay queue control
// frames (PING and SETTINGS acknowledgements, resets) faster than it
// reads them.
var ErrCalm = http2.ConnectionError(http2.ErrCodeEnhanceYourCalm)

// ControlRoomLocked says whether one more control frame the peer asked
// for may be queued. Data stops at outCap; past outCap plus this margin
// the peer is not reading what it asks for (a PING flood from a client
// that reads nothing grew the output without bound), as x/net's server
// limits its queued control frames.
func (c *Conn) ControlRoomLocked() bool {
	return len(c.out)-c.off < c.cfg.OutCap+256<<10
}

// sendableLocked is how many bytes of n h may send now.
func (c *Conn) sendableLocked(h *Half, n int) int {
	room := int64(c.cfg.OutCap - (len(c.out) - c.off))
	return int(max(0, min(int64(n), h.send.available(), c.send.available(), room)))
}

// drainLocked writes queued frames that now fit and returns the credits
// they earned.
func (c *Conn) drainLocked(credits []Credit) []Credit {
	keep := c.queued[:0]
	for _, h := range c.queued {
		for len(h.q) > 0 {
			p := &h.q[0]
			if p.isHdr {
				c.encodeHeadersLocked(h, p.hdrs, p.end)
				h.q = h.q[1:]
				continue
			}
			n := c.sendableLocked(h, len(p.data))
			if n == 0 && len(p.data) > 0 {
				break
			}
			k := c.sendDataLocked(h, p.data, n, p.end, true)
			if p.credit.H != nil && k > 0 {
				credits = append(credits, Credit{H: p.credit.H, N: int64(k)})
			}
			p.data = p.data[k:]
			if len(p.data) > 0 {
				break
			}
			h.q = h.q[1:]
		}
		if len(h.q) > 0 && !h.gone {
			keep = append(keep, h)
		} else {
			h.queued = false
			h.q = nil
			if h.closeAfterQueue {
				c.RemoveHalfLocked(h)
			}
		}
	}
	clear(c.queued[len(keep):])
	c.queued = keep
	return credits
}

// GiveBackLocked returns stream window to the peer for n bytes of h that
// left (nothing once h is forgotten). Updates go out in batches of a
// quarter window, as gRPC's transports do, so a small call costs no
// WINDOW_UPDATE frame. The connection's window is given back as data
// arrives (TakeDataLocked), not here.
func (c *Conn) GiveBackLocked(h *Half, n int64) {
	if h == nil || h.gone {
		return
	}
	c.releaseLocked(h.id, &h.recv, n, h.win/4)
}

// releaseLocked gives n bytes of window f back to the peer, for stream id
// (0: the connection), once a batch of them is owed.
func (c *Conn) releaseLocked(id uint32, f *inflow, n, batch int64) {
	if c.closed || n <= 0 {
		return
	}
	if d := f.release(n, batch); d > 0 {
		_ = c.wr.WriteWindowUpdate(id, uint32(d))
	}
}

// FlowingLocked says whether data of n bytes, written with due as the
// result, left at once: none of it queued (the output takes at most
// outCap, so a peer that does not read soon makes data queue). An output
// merely backed up for a moment (the kernel's buffer full while a big
// message goes) counts as flowing: holding widening back then kept big
// uploads at a 16 KiB window.
func (c *Conn) FlowingLocked(due Credit, n int) bool {
	return n > 0 && due.N == int64(n)
}

// WidenLocked doubles h's window, up to the relay's stream window, for a
// stream whose data just left as fast as it came: its destination reads,
// so a wider window costs no memory and saves round trips. A stream whose
// destination stops reading keeps the window it had, so what the relay
// holds of it stays bounded by that (a client that never reads its
// responses used to let each stream's upstream send the whole 4 MiB
// window into the relay's queues).
func (c *Conn) WidenLocked(h *Half) {
	// Only a stream that moved half its window already: a small call
	// never widens (it would cost a WINDOW_UPDATE and a trip to the
	// budget's lock for nothing).
	if h == nil || h.gone || c.closed || h.win >= c.cfg.StreamWindow || h.got < h.win/2 {
		return
	}
	// What a wider window lets a sender put in the relay's queues is
	// the budget's: it widens only while there is room.
	win := min(h.win*2, c.cfg.StreamWindow)
	if !c.cfg.Budget.TryTake(win - h.win) {
		return
	}
	h.extra += win - h.win
	c.GrowLocked(h, win)
}

// WidenToLocked opens h's window to win (at most the relay's stream
// window) at once, for a stream known to carry that much, if the budget
// has room now. Otherwise it returns how much wider the window should be:
// the caller may wait for that much room in the budget (GrowLocked once it
// has it) rather than let the stream crawl at its initial window.
func (c *Conn) WidenToLocked(h *Half, win int64) (short int64) {
	win = min(win, c.cfg.StreamWindow)
	if h == nil || h.gone || c.closed || win <= h.win {
		return 0
	}
	if !c.cfg.Budget.TryTake(win - h.win) {
		return win - h.win
	}
	h.extra += win - h.win
	c.GrowLocked(h, win)
	return 0
}

// WindowLocked is the receive window kept open for h.
func (h *Half) WindowLocked() int64 { return h.win }

// GrowLocked opens h's window to win at once.
func (c *Conn) GrowLocked(h *Half, win int64) {
	if h == nil || h.gone || c.closed || win <= h.win {
		return
	}
	d := win - h.win
	h.win = win
	_ = c.wr.WriteWindowUpdate(h.id, uint32(h.recv.grant(d)))
}

// ApplyCredits gives the credits back to their connections, each under its
// own lock, and kicks their writes.
func ApplyCredits(cs []Credit) {
	for _, cr := range cs {
		if cr.H == nil || cr.N == 0 {
			continue
		}
		c := cr.H.c
		c.mu.Lock()
		c.GiveBackLocked(cr.H, cr.N)
		c.KickLocked()
		c.mu.Unlock()
	}
}

// KickLocked starts writing out: one non-blocking write now, and a flusher
// goroutine for what the kernel did not take.
func (c *Conn) KickLocked() {
	if !c.writeOutLocked() {
		return
	}
	if len(c.queued) > 0 {
		// Room in the buffer again: queued data may go. Draining may
		// itself start a flusher (writeAt); never a second one.
		cs := c.drainLocked(nil)
		switch {
		case !c.flushing && (len(cs) > 0 || len(c.out) > c.off):
			c.startFlusherLocked(cs)
		case len(cs) > 0:
			go ApplyCredits(cs)
		}
	}
}

// writeOutLocked tries one non-blocking write of out and leaves the rest to
// a flusher goroutine. It reports whether out is empty and no flusher
// writes: then, and only then, may the caller drain queued data.
func (c *Conn) writeOutLocked() bool {
	if c.flushing || c.closed {
		return false
	}
	if len(c.out) == c.off {
		return true
	}
	n, err := c.raw.write(c.out[c.off:])
	if err != nil {
		c.FailLocked(err)
		return false
	}
	c.off += n
	if c.off == len(c.out) {
		c.out, c.off = c.out[:0], 0
		return true
	}
	c.startFlusherLocked(nil)
	return false
}

// startFlusherLocked hands the writing to a flusher goroutine, which first
// gives back cs. There is at most one: two would write their buffers in
// either order.
func (c *Conn) startFlusherLocked(cs []Credit) {
	if c.flushing && CheckInvariants {
		panic("h2codec: a second flusher")
	}
	c.flushing = true
	go c.flushWith(cs)
}

// CheckInvariants makes broken invariants panic; the tests set it.
var CheckInvariants = false

func (c *Conn) flushWith(cs []Credit) {
	ApplyCredits(cs)
	c.flusher()
}

// flusher writes out until it is empty, blocking as the peer reads.
func (c *Conn) flusher() {
	c.mu.Lock()
	for {
		if c.closed {
			c.flushing = false
			c.mu.Unlock()
			return
		}
		var cs []Credit
		if len(c.queued) > 0 {
			cs = c.drainLocked(nil)
		}
		if len(c.out) == c.off {
			c.out, c.off = c.out[:0], 0
			c.flushing = false
			c.mu.Unlock()
			ApplyCredits(cs)
			return
		}
		full, b := c.out, c.out[c.off:]
		c.out, c.off = c.spare[:0], 0
		c.mu.Unlock()
		ApplyCredits(cs)
		_, err := c.nc.Write(b)
		c.mu.Lock()
		c.spare = full[:0]
		if err != nil {
			c.flushing = false
			c.FailLocked(err)
			c.mu.Unlock()
			return
		}
	}
}

var ErrClosed = errors.New("h2codec: connection closed")

// FailLocked closes c; onClose runs on its own goroutine, as it takes
// other locks.
func (c *Conn) FailLocked(err error) {
	if c.closed {
		return
	}
	c.closed = true
	c.err = err
	c.out = nil
	_ = c.nc.Close()
	if c.onClose != nil {
		go c.onClose(c, err)
	}
}

// Close writes what is buffered (best effort, without blocking) and closes.
func (c *Conn) Close(err error) {
	c.mu.Lock()
	if !c.flushing && len(c.out) > c.off && !c.closed {
		_, _ = c.raw.write(c.out[c.off:])
	}
	c.FailLocked(err)
	c.mu.Unlock()
}

// OnControl handles the connection's own frames, the same on either side:
// SETTINGS (applied and acknowledged), WINDOW_UPDATE (queued data that now
// fits goes) and PING (answered). A peer that asks for acknowledgements
// faster than it reads them loses the connection (ErrCalm). settings says
// that a peer's SETTINGS (not an ack) was applied.
func (c *Conn) OnControl(f http2.Frame, w *Batch) (settings bool, err error) {
	switch f := f.(type) {
	case *http2.SettingsFrame:
		if f.IsAck() {
			c.mu.Lock()
			c.onSettingsAckLocked()
			c.mu.Unlock()
			return false, nil
		}
	case *http2.PingFrame:
		if f.IsAck() {
			return false, nil
		}
	}
	var cs []Credit
	c.mu.Lock()
	if _, wu := f.(*http2.WindowUpdateFrame); !wu && !c.ControlRoomLocked() {
		c.mu.Unlock()
		return false, ErrCalm
	}
	switch f := f.(type) {
	case *http2.SettingsFrame:
		if err = c.applySettingsLocked(f); err == nil {
			_ = c.wr.WriteSettingsAck()
			settings = true
		}
		cs = c.drainLocked(nil)
	case *http2.WindowUpdateFrame:
		err = c.onWindowUpdateLocked(f)
		cs = c.drainLocked(nil)
	case *http2.PingFrame:
		_ = c.wr.WritePing(true, f.Data)
	}
	c.mu.Unlock()
	w.Add(c)
	ApplyCredits(cs)
	return settings, err
}

// applySettings takes in the peer's SETTINGS.
func (c *Conn) applySettingsLocked(f *http2.SettingsFrame) error {
	return f.ForeachSetting(func(s http2.Setting) error {
		// Out-of-range values end the connection (RFC 9113 6.5.2): a
		// MAX_FRAME_SIZE of 0 made every DATA write loop for ever on
		// empty frames, holding the connection's lock.
		if err := s.Valid(); err != nil {
			return err
		}
		switch s.ID {
		case http2.SettingMaxFrameSize:
			c.peerMaxFrame = s.Val
		case http2.SettingInitialWindowSize:
			d := int64(s.Val) - int64(c.peerInitWin)
			c.peerInitWin = int32(s.Val)
			for _, h := range c.halves {
				if !h.send.add(d) {
					return http2.ConnectionError(http2.ErrCodeFlowControl)
				}
			}
		case http2.SettingMaxConcurrentStreams:
			c.peerMaxStreams = s.Val
		case http2.SettingHeaderTableSize:
			c.enc.SetMaxDynamicTableSizeLimit(min(s.Val, 4096))
		}
		return nil
	})
}

// onWindowUpdate applies a WINDOW_UPDATE from the peer.
func (c *Conn) onWindowUpdateLocked(f *http2.WindowUpdateFrame) error {
	if f.StreamID == 0 {
		if !c.send.add(int64(f.Increment)) {
			return http2.ConnectionError(http2.ErrCodeFlowControl)
		}
		return nil
	}
	if h := c.halves[f.StreamID]; h != nil {
		if !h.send.add(int64(f.Increment)) && h.state != StateHalfClosedLocal && h.state != StateClosed {
			// A stream we ended sends nothing more: its window no
			// longer matters, and a WINDOW_UPDATE for it is ignored
			// (RFC 9113 5.1), overflowing or not.
			return http2.StreamError{StreamID: f.StreamID, Code: http2.ErrCodeFlowControl}
		}
	}
	return nil
}

// TakeDataLocked accounts for n received bytes against our windows. The
// connection's window is given back at once, as grpc-go's transports do:
// what a stream holds is bounded by its own window, and holding the
// connection's window until the data left would let one client that does
// not read (or resets while its response waits) use up a shared upstream
// connection's window and stall every call on it.
//
// DATA on a stream the peer ended is a stream error (RFC 9113 5.1); end
// says this frame ends it.
func (c *Conn) TakeDataLocked(h *Half, n int64, end bool) error {
	if !c.recv.take(n) {
		return http2.ConnectionError(http2.ErrCodeFlowControl)
	}
	c.releaseLocked(0, &c.recv, n, c.cfg.ConnWindow/4)
	if h == nil {
		return nil
	}
	if h.state.remoteEnded() {
		return errStreamClosed(h)
	}
	h.got += n
	if !h.recv.take(n) {
		return http2.StreamError{StreamID: h.id, Code: http2.ErrCodeFlowControl}
	}
	if end {
		h.endRemote()
	}
	return nil
}

// Batch is the set of connections a reader goroutine wrote to since it
// last flushed: it kicks them all once its input is drained, so frames
// read together leave together.
type Batch struct {
	conns []*Conn
}

// Add notes that c has output to kick.
func (b *Batch) Add(c *Conn) {
	for _, x := range b.conns {
		if x == c {
			return
		}
	}
	b.conns = append(b.conns, c)
}

// Flush kicks every connection added since the last Flush.
func (b *Batch) Flush() {
	for i, c := range b.conns {
		c.mu.Lock()
		c.KickLocked()
		c.mu.Unlock()
		b.conns[i] = nil
	}
	b.conns = b.conns[:0]
}
