package h2relay

import (
	"context"
	"errors"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/codes"

	"github.com/infergate/infergate/proxy/h2relay/h2codec"
)

// destConn is a connection the relay opened, as a client: to an upstream,
// or to the proxy's own server (Local).
type destConn struct {
	c    *h2codec.Conn
	cfg  *config
	pool *Pool // nil for Local

	// Guarded by c.mu:
	nextID    uint32
	active    uint32
	goingAway bool
	// settled: the peer's first SETTINGS arrived. Until then its stream
	// limit is unknown, and streams opened on a new connection in that
	// time (every call waiting for it) were refused by an upstream with
	// a limit.
	settled bool
	lastOK  uint32 // GOAWAY's last stream ID
}

func newDestConn(nc net.Conn, cfg *config, pool *Pool) *destConn {
	d := &destConn{cfg: cfg, pool: pool, nextID: 1}
	d.c = h2codec.NewConn(nc, &cfg.dest, nil)
	if pool != nil {
		// An upstream connection carries many clients' responses:
		// it reads with a big buffer from its first read.
		d.c.ReadBig()
	}
	d.c.Lock()
	d.c.GreetLocked(true)
	d.c.KickLocked()
	d.c.Unlock()
	go d.read()
	return d
}

func (d *destConn) dead() bool {
	d.c.Lock()
	defer d.c.Unlock()
	return d.c.ClosedLocked() || d.goingAway
}

// canTake says whether d can open one more stream now.
func (d *destConn) canTakeLocked() bool {
	return d.settled && !d.c.ClosedLocked() && !d.goingAway && d.active < d.c.PeerMaxStreamsLocked()
}

// start opens s's stream on d with fields and body. reserved says that
// pickLocked counted the stream in d.active already. It returns false,
// sending nothing, when d closed (or, for a pool's stream, began going
// away) after it was picked: d's streams were ended then, and one added
// now would never be, so the call hung until the client gave up.
func (d *destConn) start(s *stream, fields []hpack.HeaderField, body []byte, end, reserved bool, w *writes) bool {
	c := d.c
	c.Lock()
	if c.ClosedLocked() || reserved && d.goingAway {
		if reserved {
			d.active--
		}
		c.Unlock()
		return false
	}
	due := d.startLocked(s, fields, body, end, reserved)
	// Stream IDs run out: the connection takes no more and leaves the
	// pool, which dials another, as after a GOAWAY.
	exhausted := d.nextID >= 1<<31-1 && !d.goingAway
	if exhausted {
		d.goingAway = true
	}
	c.Unlock()
	w.Add(c)
	if due.H != nil && due.N > 0 {
		streamOf(due.H).creditClient(due.N, w)
	}
	if exhausted && d.pool != nil {
		d.pool.dropConn(d)
	}
	return true
}

// A stream relayed as it arrives (cut) sends what arrived so far instead
// of body, and its end only if it came; the client's window for those
// bytes is due (returned) as they leave.
func (d *destConn) startLocked(s *stream, fields []hpack.HeaderField, body []byte, end, reserved bool) (due h2codec.Credit) {
	c := d.c
	id := d.nextID
	d.nextID += 2
	if !reserved {
		d.active++
	}
	h := c.AddHalfLocked(id, s)
	var src *h2codec.Half
	s.mu.Lock()
	s.dest, s.dh = d, h
	if s.path == pathCut {
		body, end, src = s.call.Body, s.clientEnded, s.ch
		s.call.Body = nil
		s.unholdLocked() // it is the queue's now, bounded by the window
	}
	if s.pool != nil {
		s.sentAt = d.cfg.now()
	}
	s.mu.Unlock()
	c.WriteHeadersLocked(h, fields, end && len(body) == 0)
	if len(body) > 0 {
		due = c.WriteDataLocked(h, body, end, true, src)
	}
	return due
}

// forget drops h once its stream ended.
func (d *destConn) forget(h *h2codec.Half) {
	c := d.c
	c.Lock()
	if !h.GoneLocked() {
		c.RemoveHalfLocked(h)
		d.active--
	}
	drained := d.goingAway && d.active == 0
	c.Unlock()
	if d.pool != nil {
		d.pool.wake()
		if d.pool.draining.Load() {
			d.pool.closeIdle()
		}
	}
	if drained {
		c.Close(h2codec.ErrClosed)
	}
}

// read is d's reader goroutine.
func (d *destConn) read() {
	c := d.c
	var w writes
	var err error
	for {
		f, in, isData, rerr := c.ReadFrame()
		err = rerr
		if isData {
			err = d.onData(in.ID, int64(len(in.Data)), in.Data, in.End, &w)
			c.Discard(len(in.Data))
			if err != nil {
				break
			}
		} else if err != nil {
			var se http2.StreamError
			if errors.As(err, &se) {
				d.onReset(se.StreamID, se.Code, &w)
				c.Lock()
				c.WriteResetLocked(se.StreamID, se.Code)
				c.Unlock()
				w.Add(c)
			} else {
				break
			}
		} else if err = d.onFrame(f, &w); err != nil {
			break
		}
		if !c.WholeFrame() {
			w.flush()
		}
	}
	w.flush()
	c.ReleaseBuf()
	d.lost(err)
}

// lost ends every stream of a connection that failed.
func (d *destConn) lost(err error) {
	c := d.c
	c.Close(err)
	c.Lock()
	hs := make([]*h2codec.Half, 0, c.OpenLocked())
	for _, h := range c.HalvesLocked() {
		hs = append(hs, h)
	}
	last, goingAway := d.lastOK, d.goingAway
	c.Unlock()
	var w writes
	for _, h := range hs {
		// Streams the upstream said it never processed may go again.
		streamOf(h).destLost(err, goingAway && h.ID() > last, &w)
	}
	w.flush()
	if d.pool != nil {
		d.pool.dropConn(d)
	}
}

func (d *destConn) onFrame(f http2.Frame, w *writes) error {
	c := d.c
	switch f := f.(type) {
	case *http2.MetaHeadersFrame:
		c.Lock()
		h := c.HalfLocked(f.StreamID)
		var err error
		if h != nil {
			err = c.PeerHeadersLocked(h, f.StreamEnded())
		}
		c.Unlock()
		if err != nil {
			return err
		}
		if h != nil {
			if f.Truncated {
				d.onReset(f.StreamID, http2.ErrCodeFrameSize, w)
				return nil
			}
			streamOf(h).respHeaders(f, w)
		}
	case *http2.DataFrame:
		return d.onData(f.StreamID, int64(f.Length), f.Data(), f.StreamEnded(), w)
	case *http2.RSTStreamFrame:
		d.onReset(f.StreamID, f.ErrCode, w)
	case *http2.SettingsFrame, *http2.WindowUpdateFrame, *http2.PingFrame:
		settings, err := c.OnControl(f, &w.Batch)
		if settings {
			c.Lock()
			d.settled = true
			c.Unlock()
			if d.pool != nil {
				d.pool.wake()
			}
		}
		return err
	case *http2.GoAwayFrame:
		c.Lock()
		d.goingAway, d.lastOK = true, f.LastStreamID
		var refused []*h2codec.Half
		for id, h := range c.HalvesLocked() {
			if id > f.LastStreamID {
				refused = append(refused, h)
			}
		}
		idle := d.active == 0
		c.Unlock()
		for _, h := range refused {
			streamOf(h).destLost(errors.New("upstream going away"), true, w)
		}
		if d.pool != nil {
			d.pool.dropConn(d)
		}
		if idle {
			c.Close(h2codec.ErrClosed)
		}
	}
	return nil
}

// onData is a DATA frame from the destination: n bytes with padding, data
// without.
func (d *destConn) onData(id uint32, n int64, data []byte, end bool, w *writes) error {
	c := d.c
	c.Lock()
	h := c.HalfLocked(id)
	if err := c.TakeDataLocked(h, n, end); err != nil {
		c.Unlock()
		return err
	}
	c.GiveBackLocked(h, n-int64(len(data))) // padding
	c.Unlock()
	w.Add(c)
	if h != nil {
		if due, fast := streamOf(h).respData(data, end, w); due > 0 {
			c.Lock()
			c.GiveBackLocked(h, due)
			if fast {
				c.WidenLocked(h)
			}
			c.Unlock()
		}
	}
	return nil
}

func (d *destConn) onReset(id uint32, code http2.ErrCode, w *writes) {
	c := d.c
	c.Lock()
	h := c.HalfLocked(id)
	c.Unlock()
	if h != nil {
		streamOf(h).destReset(code, w)
	}
}

// Pool is the relay's connections to one upstream.
type Pool struct {
	addr, authority string
	size            int
	cfg             *config

	mu      sync.Mutex
	conns   []*destConn
	dialing int
	next    int
	waiting []*stream // calls waiting for a connection or a stream slot
	closed  bool
	lastErr error
	// draining: the pool is no longer handed out (Server.DrainPool); its
	// connections close once they carry no stream and no call waits.
	draining atomic.Bool
}

// Pool returns the relay's pool to addr (host:port, plaintext HTTP/2),
// with size connections, creating it on first use.
func (s *Server) Pool(addr string, size int) *Pool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.pools[addr]; p != nil {
		return p
	}
	p := &Pool{addr: addr, authority: addr, size: max(size, 1), cfg: s.cfg}
	s.pools[addr] = p
	return p
}

// DrainPool retires p, gracefully: Pool hands out a new pool for p's
// address from now on, while the calls already sent or queued on p
// finish on its connections, each of which closes once it carries no
// stream and no call waits for one. (A proxy whose upstream moved to
// another address drains the pool to the old one.)
func (s *Server) DrainPool(p *Pool) {
	s.mu.Lock()
	if s.pools[p.addr] == p {
		delete(s.pools, p.addr)
	}
	s.mu.Unlock()
	p.draining.Store(true)
	p.closeIdle()
}

// closeIdle closes a draining pool's connections that carry no stream,
// unless calls wait for one.
func (p *Pool) closeIdle() {
	p.mu.Lock()
	if len(p.waiting) > 0 {
		p.mu.Unlock()
		return
	}
	var idle []*destConn
	for _, d := range p.conns {
		d.c.Lock()
		if d.active == 0 && !d.c.ClosedLocked() && !d.goingAway {
			// Picked no more (canTakeLocked); the reader's end drops
			// it from conns.
			d.goingAway = true
			idle = append(idle, d)
		}
		d.c.Unlock()
	}
	p.mu.Unlock()
	for _, d := range idle {
		d.c.Close(h2codec.ErrClosed)
	}
}

// send sends s's request on one of the pool's connections, or queues it
// until one can take it.
func (p *Pool) send(s *stream, w *writes) {
	// The proxy's deadline runs from here, waiting for a connection
	// included.
	s.armTimer()
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		s.finish(&Result{Err: &Error{Kind: ErrUnavailable, Code: codes.Unavailable, Msg: "the proxy is shutting down"}}, nil, w)
		return
	}
	if len(p.conns)+p.dialing < p.size {
		p.growLocked()
	}
	if d := p.pickLocked(); d != nil {
		p.mu.Unlock()
		if !d.start(s, s.requestFields(p.authority), s.wholeBody(), true, true, w) {
			p.send(s, w) // d is gone; it is not picked again
			return
		}
		return
	}
	p.waiting = append(p.waiting, s)
	p.growLocked()
	p.mu.Unlock()
}

// pickLocked returns a connection that can take a stream now, round
// robin, or nil.
func (p *Pool) pickLocked() *destConn {
	n := len(p.conns)
	for i := range n {
		d := p.conns[(p.next+i)%n]
		d.c.Lock()
		ok := d.canTakeLocked()
		if ok {
			// Reserve the slot before unlocking; start uses it.
			// Without this, readers of several client
			// connections picking at once all saw the last free
			// slot and opened more streams than the upstream
			// allows, which it refused.
			d.active++
			d.c.Unlock()
			p.next = (p.next + i + 1) % n
			return d
		}
		d.c.Unlock()
	}
	return nil
}

// growLocked dials another connection when the pool has fewer than its
// size.
func (p *Pool) growLocked() {
	// Never more than size: calls wait for a stream slot instead. (Calls
	// waiting used to dial one more connection each time, without bound,
	// while the upstream's stream limit was reached.)
	if p.closed || p.dialing > 0 || len(p.conns) >= p.size {
		return
	}
	p.dialing++
	go p.dial()
}

func (p *Pool) dial() {
	ctx, cancel := context.WithTimeout(context.Background(), p.cfg.dialTimeout)
	nc, err := (&net.Dialer{}).DialContext(ctx, "tcp", p.addr)
	cancel()
	p.mu.Lock()
	p.dialing--
	if err == nil && p.closed {
		_ = nc.Close()
		err = h2codec.ErrClosed
	}
	if err != nil {
		p.lastErr = err
		waiting := p.waiting
		p.waiting = nil
		p.mu.Unlock()
		var w writes
		for _, s := range waiting {
			s.finish(&Result{Err: &Error{Kind: ErrUnavailable, Code: codes.Unavailable,
				Msg: "connection error: " + err.Error()}}, nil, &w)
		}
		w.flush()
		return
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	p.conns = append(p.conns, newDestConn(nc, p.cfg, p))
	p.mu.Unlock()
	p.wake()
	if p.draining.Load() {
		// Dialled for calls that may have gone meanwhile.
		p.closeIdle()
	}
}

// wake sends waiting calls on connections that can take them.
func (p *Pool) wake() {
	var w writes
	for {
		p.mu.Lock()
		if len(p.waiting) == 0 {
			p.mu.Unlock()
			break
		}
		d := p.pickLocked()
		if d == nil {
			p.growLocked()
			p.mu.Unlock()
			break
		}
		s := p.waiting[0]
		p.waiting = p.waiting[1:]
		p.mu.Unlock()
		s.mu.Lock()
		done := s.done
		s.mu.Unlock()
		if done {
			continue
		}
		if !d.start(s, s.requestFields(p.authority), s.wholeBody(), true, true, &w) {
			p.send(s, &w)
			continue
		}
		s.armTimer()
	}
	w.flush()
}

// dropConn forgets a connection that failed or is going away.
func (p *Pool) dropConn(d *destConn) {
	p.mu.Lock()
	for i, x := range p.conns {
		if x == d {
			p.conns = append(p.conns[:i], p.conns[i+1:]...)
			break
		}
	}
	if len(p.waiting) > 0 {
		p.growLocked()
	}
	p.mu.Unlock()
}

func (p *Pool) close() {
	p.mu.Lock()
	p.closed = true
	conns := p.conns
	p.conns = nil
	p.mu.Unlock()
	for _, d := range conns {
		d.c.Close(h2codec.ErrClosed)
	}
}

// armTimer starts the proxy's own deadline of a call sent without one.
func (s *stream) armTimer() {
	if s.call.Timeout <= 0 || !s.call.Deadline.IsZero() {
		return
	}
	s.mu.Lock()
	if !s.done && s.timer == nil {
		s.timeoutAt = time.Now().Add(s.call.Timeout)
		s.timer = time.AfterFunc(s.call.Timeout, s.timedOut)
	}
	s.mu.Unlock()
}

// localListener hands the proxy's grpc.Server the relay's connections to
// it.
type localListener struct {
	ch   chan net.Conn
	done chan struct{}
	once sync.Once
}

func newLocalListener() *localListener {
	return &localListener{ch: make(chan net.Conn), done: make(chan struct{})}
}

func (l *localListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *localListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *localListener) Addr() net.Addr { return localAddr{} }

type localAddr struct{}

func (localAddr) Network() string { return "h2relay" }
func (localAddr) String() string  { return "h2relay-local" }

// open makes a socket pair; the server's end reports the client's
// addresses, so the proxy's server sees the real peer.
func (l *localListener) open(client net.Conn, cfg *config) (*destConn, error) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	mine, err := fileConn(fds[0])
	if err != nil {
		_ = syscall.Close(fds[1])
		return nil, err
	}
	theirs, err := fileConn(fds[1])
	if err != nil {
		_ = mine.Close()
		return nil, err
	}
	sc := &peerConn{Conn: theirs, local: client.LocalAddr(), remote: client.RemoteAddr()}
	select {
	case l.ch <- sc:
	case <-l.done:
		_ = mine.Close()
		_ = theirs.Close()
		return nil, net.ErrClosed
	}
	return newDestConn(mine, cfg, nil), nil
}

func fileConn(fd int) (net.Conn, error) {
	f := os.NewFile(uintptr(fd), "h2relay-local")
	defer f.Close()
	return net.FileConn(f)
}

// peerConn is the server's end of a local connection, with the client's
// addresses.
type peerConn struct {
	net.Conn
	local, remote net.Addr
}

func (c *peerConn) LocalAddr() net.Addr  { return c.local }
func (c *peerConn) RemoteAddr() net.Addr { return c.remote }
