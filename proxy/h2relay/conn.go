package h2relay

import (
	"bytes"
	"errors"
	"net"
	"sync"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// fconn is one HTTP/2 connection, either side. Its reader goroutine owns
// rd; everything else is guarded by mu, which is never held while another
// fconn's mu is taken (credits to other connections are handed back to the
// caller to apply after unlocking).
type fconn struct {
	nc  net.Conn
	raw *rawWriter // non-blocking writes; nil: the flusher writes
	br  *readBuf
	rd  *http2.Framer // reads only, on the reader goroutine
	cfg *config

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

	// The peer's settings and our send window toward it.
	peerMaxFrame   uint32
	peerInitWin    int32
	peerMaxStreams uint32
	sendWin        int64

	// Our receive window: what we granted and have not yet got back.
	recvAvail   int64
	recvUnacked int64
	// initWin is the window every stream starts with (our SETTINGS).
	initWin int64

	halves map[uint32]*half // streams by this connection's stream ID
	// queued are halves with data waiting for window or buffer space.
	queued []*half

	onClose func(*fconn, error) // called once, without mu held
}

// half is one stream as one connection sees it: the stream's ID there and
// both directions' flow control. Guarded by its conn's mu.
type half struct {
	c  *fconn
	id uint32
	s  *stream

	sendWin int64
	q       []pending // frames waiting for window, in order
	queued  bool      // in c.queued

	recvAvail   int64
	recvUnacked int64
	// win is the receive window kept open for the stream: the initial
	// window at first, widened while its data leaves as fast as it
	// comes (widenLocked), or to a whole request the budget admitted.
	win int64
	// extra is what widening took of the budget, given back when h is
	// forgotten; got counts the bytes received on h.
	extra, got int64
	gone       bool // removed from c.halves
	// closeAfterQueue: the stream ended; forget h once its queue is out.
	closeAfterQueue bool
}

// pending is one queued frame of a half: data (the bytes are owned by the
// queue), or headers (encoded when written, so HPACK state stays in wire
// order).
type pending struct {
	data   []byte
	hdrs   []hpack.HeaderField
	isHdr  bool
	end    bool
	credit credit // what writing data gives back to its source
}

// credit is window to return to a source once its data left for the other
// side.
type credit struct {
	h *half
	n int64
}

// outWriter makes the write framer append to out.
type outWriter fconn

func (w *outWriter) Write(p []byte) (int, error) {
	w.out = append(w.out, p...)
	return len(p), nil
}

func newFconn(nc net.Conn, cfg *config, onClose func(*fconn, error)) *fconn {
	c := &fconn{
		nc:             nc,
		raw:            newRawWriter(nc),
		br:             newReadBuf(nc, cfg.bufSize),
		cfg:            cfg,
		peerMaxFrame:   16384,
		peerInitWin:    65535,
		peerMaxStreams: ^uint32(0),
		sendWin:        65535,
		recvAvail:      65535,
		initWin:        cfg.initWindow,
		halves:         make(map[uint32]*half),
		onClose:        onClose,
	}
	c.rd = http2.NewFramer(nil, c.br)
	c.rd.SetMaxReadFrameSize(cfg.maxReadFrame)
	c.rd.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	c.rd.MaxHeaderListSize = cfg.maxHeaderList
	c.wr = http2.NewFramer((*outWriter)(c), nil)
	c.enc = hpack.NewEncoder(&c.hbuf)
	return c
}

// inData is a DATA frame read in place: data lies in the connection's read
// buffer until the reader discards it.
type inData struct {
	id   uint32
	end  bool
	data []byte
}

// readFrame reads the next frame, on the reader goroutine. An unpadded
// DATA frame that fits the read buffer comes back as in (isData), its
// payload still in the buffer: it is written on from there, not copied
// through the Framer's own buffer first (big tensors are copy-bound). The
// caller discards it once used (c.br.Discard).
func (c *fconn) readFrame() (f http2.Frame, in inData, isData bool, err error) {
	fh, err := c.rd.ReadFrameHeader()
	if err != nil {
		return nil, in, false, err
	}
	if fh.Type == http2.FrameData && fh.StreamID != 0 && !fh.Flags.Has(http2.FlagDataPadded) &&
		fh.Length <= c.cfg.maxReadFrame && int(fh.Length) <= c.br.Size() {
		data, err := c.br.Peek(int(fh.Length))
		if err != nil {
			return nil, in, false, err
		}
		return nil, inData{id: fh.StreamID, end: fh.Flags.Has(http2.FlagDataEndStream), data: data}, true, nil
	}
	f, err = c.rd.ReadFrameForHeader(fh)
	return f, in, false, err
}

// greet writes our SETTINGS and the connection window update every
// connection starts with.
func (c *fconn) greetLocked(client bool) {
	if client {
		c.out = append(c.out, http2.ClientPreface...)
	}
	st := []http2.Setting{
		{ID: http2.SettingInitialWindowSize, Val: uint32(c.initWin)},
		{ID: http2.SettingMaxFrameSize, Val: c.cfg.maxReadFrame},
		{ID: http2.SettingMaxHeaderListSize, Val: c.cfg.maxHeaderList},
	}
	if client {
		st = append(st, http2.Setting{ID: http2.SettingEnablePush, Val: 0})
	} else {
		st = append(st, http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: c.cfg.maxStreams})
	}
	_ = c.wr.WriteSettings(st...)
	if d := c.cfg.connWindow - 65535; d > 0 {
		_ = c.wr.WriteWindowUpdate(0, uint32(d))
		c.recvAvail += d
	}
}

// addHalf registers stream s under id on c.
func (c *fconn) addHalfLocked(id uint32, s *stream) *half {
	h := &half{c: c, id: id, s: s, sendWin: int64(c.peerInitWin), recvAvail: c.initWin, win: c.initWin}
	c.halves[id] = h
	return h
}

// removeHalfLocked forgets h; its queued frames are dropped.
func (c *fconn) removeHalfLocked(h *half) {
	if h.gone {
		return
	}
	h.gone = true
	h.q = nil
	delete(c.halves, h.id)
	if h.extra > 0 {
		c.cfg.budget.GiveBack(h.extra)
		h.extra = 0
	}
}

// writeHeadersLocked writes a HEADERS frame (and CONTINUATIONs) for h, or
// queues it behind h's pending data.
func (c *fconn) writeHeadersLocked(h *half, fields []hpack.HeaderField, end bool) {
	if len(h.q) > 0 {
		h.q = append(h.q, pending{isHdr: true, hdrs: fields, end: end})
		return
	}
	c.encodeHeadersLocked(h.id, fields, end)
}

func (c *fconn) encodeHeadersLocked(id uint32, fields []hpack.HeaderField, end bool) {
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

// writeDataLocked sends data on h as far as the windows and the output
// buffer allow and queues the rest (copied unless owned). It returns the
// credit that is due now for what was written; the rest is given back as
// the queue drains.
func (c *fconn) writeDataLocked(h *half, data []byte, end, owned bool, src *half) (due credit) {
	if len(h.q) == 0 {
		if n := c.sendableLocked(h, len(data)); n > 0 || (len(data) == 0 && end) {
			k := c.sendDataLocked(h, data, n, end, owned)
			due.n += int64(k)
			data = data[k:]
		}
		if len(data) == 0 {
			due.h = src
			return due
		}
	}
	if !owned {
		data = bytes.Clone(data)
	}
	h.q = append(h.q, pending{data: data, end: end, credit: credit{h: src, n: int64(len(data))}})
	if !h.queued {
		h.queued = true
		c.queued = append(c.queued, h)
	}
	due.h = src
	return due
}

// sendDataLocked sends data[:n] on h as DATA frames, END_STREAM on the
// frame that ends data when end (empty data goes as one empty frame), and
// takes them from h's and the connection's send windows; n must fit both.
// own says data is the relay's own, which writeVecLocked may write from
// where it lies. It returns how many bytes of data it sent.
func (c *fconn) sendDataLocked(h *half, data []byte, n int, end, own bool) int {
	if len(data) == 0 {
		c.appendData(h.id, end, nil)
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
	h.sendWin -= int64(sent)
	c.sendWin -= int64(sent)
	return sent
}

// appendData writes one DATA frame into out: what the Framer's WriteData
// does, without its copy through its own buffer.
func (c *fconn) appendData(id uint32, end bool, data []byte) {
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
		// reader's batch. (Not kickLocked: this may run inside
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
func (c *fconn) writeVecLocked(id uint32, data []byte, n int, end bool) int {
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
		c.failLocked(err)
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

// errCalm ends a connection whose peer makes the relay queue control
// frames (PING and SETTINGS acknowledgements, resets) faster than it
// reads them.
var errCalm = http2.ConnectionError(http2.ErrCodeEnhanceYourCalm)

// controlRoomLocked says whether one more control frame the peer asked
// for may be queued. Data stops at outCap; past outCap plus this margin
// the peer is not reading what it asks for (a PING flood from a client
// that reads nothing grew the output without bound), as x/net's server
// limits its queued control frames.
func (c *fconn) controlRoomLocked() bool {
	return len(c.out)-c.off < c.cfg.outCap+256<<10
}

// sendableLocked is how many bytes of n h may send now.
func (c *fconn) sendableLocked(h *half, n int) int {
	room := int64(c.cfg.outCap - (len(c.out) - c.off))
	return int(max(0, min(int64(n), h.sendWin, c.sendWin, room)))
}

// drainLocked writes queued frames that now fit and returns the credits
// they earned.
func (c *fconn) drainLocked(credits []credit) []credit {
	keep := c.queued[:0]
	for _, h := range c.queued {
		for len(h.q) > 0 {
			p := &h.q[0]
			if p.isHdr {
				c.encodeHeadersLocked(h.id, p.hdrs, p.end)
				h.q = h.q[1:]
				continue
			}
			n := c.sendableLocked(h, len(p.data))
			if n == 0 && len(p.data) > 0 {
				break
			}
			k := c.sendDataLocked(h, p.data, n, p.end, true)
			if p.credit.h != nil && k > 0 {
				credits = append(credits, credit{h: p.credit.h, n: int64(k)})
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
				c.removeHalfLocked(h)
			}
		}
	}
	clear(c.queued[len(keep):])
	c.queued = keep
	return credits
}

// giveBackLocked returns stream window to the peer for n bytes of h that
// left (nothing once h is forgotten). Updates go out in batches of a
// quarter window, as gRPC's transports do, so a small call costs no
// WINDOW_UPDATE frame. The connection's window is given back as data
// arrives (takeDataLocked), not here.
func (c *fconn) giveBackLocked(h *half, n int64) {
	if c.closed || n <= 0 || h == nil || h.gone {
		return
	}
	h.recvUnacked += n
	if h.recvUnacked >= h.win/4 {
		_ = c.wr.WriteWindowUpdate(h.id, uint32(h.recvUnacked))
		h.recvAvail += h.recvUnacked
		h.recvUnacked = 0
	}
}

// flowingLocked says whether data of n bytes, written with due as the
// result, left at once: none of it queued (the output takes at most
// outCap, so a peer that does not read soon makes data queue). An output
// merely backed up for a moment (the kernel's buffer full while a big
// message goes) counts as flowing: holding widening back then kept big
// uploads at a 16 KiB window.
func (c *fconn) flowingLocked(due credit, n int) bool {
	return n > 0 && due.n == int64(n)
}

// widenLocked doubles h's window, up to the relay's stream window, for a
// stream whose data just left as fast as it came: its destination reads,
// so a wider window costs no memory and saves round trips. A stream whose
// destination stops reading keeps the window it had, so what the relay
// holds of it stays bounded by that (a client that never reads its
// responses used to let each stream's upstream send the whole 4 MiB
// window into the relay's queues).
func (c *fconn) widenLocked(h *half) {
	// Only a stream that moved half its window already: a small call
	// never widens (it would cost a WINDOW_UPDATE and a trip to the
	// budget's lock for nothing).
	if h == nil || h.gone || c.closed || h.win >= c.cfg.streamWindow || h.got < h.win/2 {
		return
	}
	// What a wider window lets a sender put in the relay's queues is
	// the budget's: it widens only while there is room.
	win := min(h.win*2, c.cfg.streamWindow)
	if !c.cfg.budget.TryTake(win - h.win) {
		return
	}
	h.extra += win - h.win
	c.growLocked(h, win)
}

// widenToLocked opens h's window to win at once, as far as the budget has
// room, for a stream known to carry that much.
func (c *fconn) widenToLocked(h *half, win int64) {
	win = min(win, c.cfg.streamWindow)
	if h == nil || h.gone || c.closed || win <= h.win || !c.cfg.budget.TryTake(win-h.win) {
		return
	}
	h.extra += win - h.win
	c.growLocked(h, win)
}

// growLocked opens h's window to win at once.
func (c *fconn) growLocked(h *half, win int64) {
	if h == nil || h.gone || c.closed || win <= h.win {
		return
	}
	d := win - h.win
	h.win = win
	h.recvAvail += d + h.recvUnacked
	_ = c.wr.WriteWindowUpdate(h.id, uint32(d+h.recvUnacked))
	h.recvUnacked = 0
}

// giveBackConnLocked returns connection window to the peer for n bytes
// received.
func (c *fconn) giveBackConnLocked(n int64) {
	if c.closed || n <= 0 {
		return
	}
	c.recvUnacked += n
	if c.recvUnacked >= c.cfg.connWindow/4 {
		_ = c.wr.WriteWindowUpdate(0, uint32(c.recvUnacked))
		c.recvAvail += c.recvUnacked
		c.recvUnacked = 0
	}
}

// applyCredits gives the credits back to their connections, each under its
// own lock, and kicks their writes.
func applyCredits(cs []credit) {
	for _, cr := range cs {
		if cr.h == nil || cr.n == 0 {
			continue
		}
		c := cr.h.c
		c.mu.Lock()
		c.giveBackLocked(cr.h, cr.n)
		c.kickLocked()
		c.mu.Unlock()
	}
}

// kickLocked starts writing out: one non-blocking write now, and a flusher
// goroutine for what the kernel did not take.
func (c *fconn) kickLocked() {
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
			go applyCredits(cs)
		}
	}
}

// writeOutLocked tries one non-blocking write of out and leaves the rest to
// a flusher goroutine. It reports whether out is empty and no flusher
// writes: then, and only then, may the caller drain queued data.
func (c *fconn) writeOutLocked() bool {
	if c.flushing || c.closed {
		return false
	}
	if len(c.out) == c.off {
		return true
	}
	n, err := c.raw.write(c.out[c.off:])
	if err != nil {
		c.failLocked(err)
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
func (c *fconn) startFlusherLocked(cs []credit) {
	if c.flushing && checkInvariants {
		panic("h2relay: a second flusher")
	}
	c.flushing = true
	go c.flushWith(cs)
}

// checkInvariants makes broken invariants panic; the tests set it.
var checkInvariants = false

func (c *fconn) flushWith(cs []credit) {
	applyCredits(cs)
	c.flusher()
}

// flusher writes out until it is empty, blocking as the peer reads.
func (c *fconn) flusher() {
	c.mu.Lock()
	for {
		if c.closed {
			c.flushing = false
			c.mu.Unlock()
			return
		}
		var cs []credit
		if len(c.queued) > 0 {
			cs = c.drainLocked(nil)
		}
		if len(c.out) == c.off {
			c.out, c.off = c.out[:0], 0
			c.flushing = false
			c.mu.Unlock()
			applyCredits(cs)
			return
		}
		full, b := c.out, c.out[c.off:]
		c.out, c.off = c.spare[:0], 0
		c.mu.Unlock()
		applyCredits(cs)
		_, err := c.nc.Write(b)
		c.mu.Lock()
		c.spare = full[:0]
		if err != nil {
			c.flushing = false
			c.failLocked(err)
			c.mu.Unlock()
			return
		}
	}
}

var errClosed = errors.New("h2relay: connection closed")

// failLocked closes c; onClose runs on its own goroutine, as it takes
// other locks.
func (c *fconn) failLocked(err error) {
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

// close writes what is buffered (best effort, without blocking) and closes.
func (c *fconn) close(err error) {
	c.mu.Lock()
	if !c.flushing && len(c.out) > c.off && !c.closed {
		_, _ = c.raw.write(c.out[c.off:])
	}
	c.failLocked(err)
	c.mu.Unlock()
}

// onControl handles the connection's own frames, the same on either side:
// SETTINGS (applied and acknowledged), WINDOW_UPDATE (queued data that now
// fits goes) and PING (answered). A peer that asks for acknowledgements
// faster than it reads them loses the connection (errCalm). settings says
// that a peer's SETTINGS (not an ack) was applied.
func (c *fconn) onControl(f http2.Frame, w *writes) (settings bool, err error) {
	switch f := f.(type) {
	case *http2.SettingsFrame:
		if f.IsAck() {
			return false, nil
		}
	case *http2.PingFrame:
		if f.IsAck() {
			return false, nil
		}
	}
	var cs []credit
	c.mu.Lock()
	if _, wu := f.(*http2.WindowUpdateFrame); !wu && !c.controlRoomLocked() {
		c.mu.Unlock()
		return false, errCalm
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
	w.add(c)
	applyCredits(cs)
	return settings, err
}

// applySettings takes in the peer's SETTINGS.
func (c *fconn) applySettingsLocked(f *http2.SettingsFrame) error {
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
				h.sendWin += d
				if h.sendWin > 1<<31-1 {
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
func (c *fconn) onWindowUpdateLocked(f *http2.WindowUpdateFrame) error {
	if f.StreamID == 0 {
		c.sendWin += int64(f.Increment)
		if c.sendWin > 1<<31-1 {
			return http2.ConnectionError(http2.ErrCodeFlowControl)
		}
		return nil
	}
	if h := c.halves[f.StreamID]; h != nil {
		h.sendWin += int64(f.Increment)
		if h.sendWin > 1<<31-1 {
			return http2.StreamError{StreamID: f.StreamID, Code: http2.ErrCodeFlowControl}
		}
	}
	return nil
}

// takeData accounts for n received bytes against our windows. The
// connection's window is given back at once, as grpc-go's transports do:
// what a stream holds is bounded by its own window, and holding the
// connection's window until the data left would let one client that does
// not read (or resets while its response waits) use up a shared upstream
// connection's window and stall every call on it.
func (c *fconn) takeDataLocked(h *half, n int64) error {
	c.recvAvail -= n
	if c.recvAvail < 0 {
		return http2.ConnectionError(http2.ErrCodeFlowControl)
	}
	c.giveBackConnLocked(n)
	if h != nil {
		h.got += n
		h.recvAvail -= n
		if h.recvAvail < 0 {
			return http2.StreamError{StreamID: h.id, Code: http2.ErrCodeFlowControl}
		}
	}
	return nil
}
