package main

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

// rconn is a minimal raw HTTP/2 client connection, light enough that
// thousands fit in this process: a 4 KiB reader, a 4 KiB writer, one
// reader goroutine. It ACKs the server's SETTINGS and PINGs, keeps the
// send windows, and counts GOAWAY and RST_STREAM; it never returns
// window for what the server sends (the measured loads get nothing back).
type rconn struct {
	nc  net.Conn
	wmu sync.Mutex
	bw  *bufio.Writer
	wf  *http2.Framer
	enc *hpack.Encoder
	hb  bytes.Buffer

	mu        sync.Mutex
	changed   chan struct{}
	acked     bool // the server ACKed our SETTINGS
	pingAcks  int
	connWin   int64
	initWin   int64
	win       map[uint32]int64
	ended     map[uint32]bool // END_STREAM seen from the server
	goAway    bool
	readErr   error
	resets    atomic.Int64
	readerEnd chan struct{}
}

const dataChunk = 16 << 10

func dialRaw(ctx context.Context, addr string) (*rconn, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	c := &rconn{
		nc: nc, changed: make(chan struct{}), connWin: 65535, initWin: 65535,
		win: map[uint32]int64{}, ended: map[uint32]bool{}, readerEnd: make(chan struct{}),
	}
	c.bw = bufio.NewWriterSize(nc, 4<<10)
	c.wf = http2.NewFramer(c.bw, nil)
	c.enc = hpack.NewEncoder(&c.hb)
	rf := http2.NewFramer(nil, bufio.NewReaderSize(nc, 4<<10))
	rf.MaxHeaderListSize = 1 << 20
	c.wmu.Lock()
	_, err = c.bw.WriteString(http2.ClientPreface)
	if err == nil {
		err = c.wf.WriteSettings()
	}
	if err == nil {
		err = c.bw.Flush()
	}
	c.wmu.Unlock()
	if err != nil {
		nc.Close()
		return nil, err
	}
	go c.read(rf)
	return c, nil
}

func (c *rconn) notifyLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}

func (c *rconn) read(rf *http2.Framer) {
	defer close(c.readerEnd)
	for {
		f, err := rf.ReadFrame()
		if err != nil {
			var se http2.StreamError
			if errors.As(err, &se) {
				continue
			}
			c.mu.Lock()
			c.readErr = err
			c.notifyLocked()
			c.mu.Unlock()
			return
		}
		var ackSettings bool
		var ping *[8]byte
		c.mu.Lock()
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if f.IsAck() {
				c.acked = true
				break
			}
			ackSettings = true
			_ = f.ForeachSetting(func(s http2.Setting) error {
				if s.ID == http2.SettingInitialWindowSize {
					d := int64(s.Val) - c.initWin
					c.initWin = int64(s.Val)
					for id := range c.win {
						c.win[id] += d
					}
				}
				return nil
			})
		case *http2.WindowUpdateFrame:
			if f.StreamID == 0 {
				c.connWin += int64(f.Increment)
			} else if _, ok := c.win[f.StreamID]; ok {
				c.win[f.StreamID] += int64(f.Increment)
			}
		case *http2.PingFrame:
			if f.IsAck() {
				c.pingAcks++
			} else {
				d := f.Data
				ping = &d
			}
		case *http2.GoAwayFrame:
			c.goAway = true
		case *http2.RSTStreamFrame:
			c.resets.Add(1)
			c.ended[f.StreamID] = true
		case *http2.HeadersFrame:
			if f.StreamEnded() {
				c.ended[f.StreamID] = true
			}
		case *http2.DataFrame:
			if f.StreamEnded() {
				c.ended[f.StreamID] = true
			}
		}
		c.notifyLocked()
		c.mu.Unlock()
		if ackSettings || ping != nil {
			c.wmu.Lock()
			if ackSettings {
				_ = c.wf.WriteSettingsAck()
			}
			if ping != nil {
				_ = c.wf.WritePing(true, *ping)
			}
			_ = c.bw.Flush()
			c.wmu.Unlock()
		}
	}
}

// waitFor waits until cond (run under c.mu) holds; it fails when the
// connection ends or ctx does.
func (c *rconn) waitFor(ctx context.Context, cond func() bool) error {
	for {
		c.mu.Lock()
		ok, err, ch := cond(), c.readErr, c.changed
		goAway := c.goAway
		c.mu.Unlock()
		if ok {
			return nil
		}
		if goAway {
			return errors.New("GOAWAY from the server")
		}
		if err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		}
	}
}

// waitAcked waits for the server's ACK of our SETTINGS: it read the
// preface and the SETTINGS, so the connection is set up on its side.
func (c *rconn) waitAcked(ctx context.Context) error {
	return c.waitFor(ctx, func() bool { return c.acked })
}

// sync sends a PING and waits for its ACK: the server's reader has
// handled every frame sent before it.
func (c *rconn) sync(ctx context.Context) error {
	c.mu.Lock()
	want := c.pingAcks + 1
	c.mu.Unlock()
	c.wmu.Lock()
	err := c.wf.WritePing(false, [8]byte{'s', 'i', 'z', 'i', 'n', 'g'})
	if err == nil {
		err = c.bw.Flush()
	}
	c.wmu.Unlock()
	if err != nil {
		return err
	}
	return c.waitFor(ctx, func() bool { return c.pingAcks >= want })
}

// headers opens stream id with fields, END_STREAM as end; not flushed.
func (c *rconn) headers(id uint32, fields []hpack.HeaderField, end bool) error {
	c.mu.Lock()
	c.win[id] = c.initWin
	c.mu.Unlock()
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.hb.Reset()
	for _, f := range fields {
		_ = c.enc.WriteField(f)
	}
	return c.wf.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: c.hb.Bytes(), EndStream: end, EndHeaders: true})
}

func (c *rconn) flush() error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.bw.Flush()
}

// send writes p on stream id as the windows allow, END_STREAM on the
// last frame when end; it returns the bytes sent, stopping early when no
// window came for stall.
func (c *rconn) send(ctx context.Context, id uint32, p []byte, end bool, stall time.Duration) (int, error) {
	sent := 0
	for sent < len(p) {
		var n int64
		err := func() error {
			wctx, cancel := context.WithTimeout(ctx, stall)
			defer cancel()
			if err := c.flush(); err != nil {
				return err
			}
			return c.waitFor(wctx, func() bool {
				n = min(int64(len(p)-sent), dataChunk, c.connWin, c.win[id])
				if n > 0 {
					c.connWin -= n
					c.win[id] -= n
				}
				return n > 0
			})
		}()
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			return sent, c.flush() // stalled: the server withholds window
		}
		if err != nil {
			return sent, err
		}
		last := sent+int(n) == len(p)
		c.wmu.Lock()
		err = c.wf.WriteData(id, end && last, p[sent:sent+int(n)])
		c.wmu.Unlock()
		if err != nil {
			return sent, err
		}
		sent += int(n)
	}
	return sent, c.flush()
}

// call sends a whole unary call on stream id and waits for its end.
func (c *rconn) call(ctx context.Context, id uint32, fields []hpack.HeaderField, body []byte) error {
	if err := c.headers(id, fields, false); err != nil {
		return err
	}
	if _, err := c.send(ctx, id, body, true, 5*time.Second); err != nil {
		return err
	}
	return c.waitFor(ctx, func() bool { return c.ended[id] })
}

func (c *rconn) close() {
	c.nc.Close()
	<-c.readerEnd
}

func (c *rconn) String() string { return fmt.Sprintf("conn %v", c.nc.LocalAddr()) }
