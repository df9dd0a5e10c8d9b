package h2relay

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
)

// FuzzClientBytes feeds arbitrary bytes to a served client connection,
// after the client preface (and, when the input's first byte says so, a
// valid SETTINGS frame). For every input: no panic (the codec's CheckInvariants is
// on), the connection is forgotten once the client closes it, no stream is
// left behind, and a call on another connection, open for the whole run,
// is still answered. Every fuzzHeapEvery inputs the heap in use is checked
// against a fixed ceiling (checkHeap).
//
// The first byte of an input picks how it is sent:
//
//	bit 0: a valid SETTINGS frame goes between the preface and the bytes
//	bit 1: the client half-closes once the bytes are written (the relay
//	       sees EOF at once), else it reads until the relay goes quiet
//
// The seeds are valid and broken frame sequences built with http2.Framer;
// `go test` runs them as a normal test. Connections are Unix socket pairs
// handed to the relay's Serve (pairListener), so a long run needs no port
// per input. To fuzz:
//
//	go test -run XXX -fuzz FuzzClientBytes -fuzztime 120s ./proxy/h2relay/
func FuzzClientBytes(f *testing.F) {
	for _, s := range fuzzSeeds() {
		for mode := byte(0); mode < 4; mode++ {
			f.Add(append([]byte{mode}, s...))
		}
	}

	fr := newFuzzRelay(f)
	f.Fuzz(fr.input)
}

// fuzzRelay is the relay FuzzClientBytes attacks, with a good client of
// its own.
type fuzzRelay struct {
	e    *relayEnv
	pl   *pairListener
	good *grpc.ClientConn
	want []byte
	// baseConns is the good client's connection: the one the relay keeps.
	baseConns int
	inputs    int
	// heapStart is the heap in use before the first input; heapCeiling
	// the most it may be.
	heapStart, heapCeiling uint64
}

func newFuzzRelay(tb testing.TB) *fuzzRelay {
	// Cleanups run last first: this one, registered before the relay's,
	// waits for what is stopped by those registered after it.
	stop := make(chan struct{})
	var bg sync.WaitGroup
	tb.Cleanup(func() {
		close(stop)
		bg.Wait()
	})
	e := newRelayEnv(tb, Options{})
	pl := newPairListener()
	bg.Add(1)
	go func() {
		defer bg.Done()
		_ = e.relay.Serve(pl)
	}()
	tb.Cleanup(func() {
		e.relay.Stop()
		_ = pl.Close()
	})
	// Whatever the fuzzer's calls make the harness report is drained, so
	// that no handler blocks on a full channel.
	drain := func(ch <-chan context.Context) {
		defer bg.Done()
		for {
			select {
			case <-ch:
			case <-stop:
				return
			}
		}
	}
	bg.Add(3)
	go drain(e.up.hung)
	go drain(e.local.hung)
	go func() {
		defer bg.Done()
		for {
			select {
			case <-e.h.waiting:
			case <-e.h.served:
			case <-e.h.done:
			case <-stop:
				return
			}
		}
	}()

	fr := &fuzzRelay{e: e, pl: pl, good: e.dial(), want: pattern(100, 9)}
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	got, err := call(ctx, fr.good, "/t.S/Echo", fr.want)
	cancel()
	if err != nil || !bytes.Equal(got, fr.want) {
		tb.Fatalf("the good call before any input: %v", err)
	}
	fr.baseConns = e.relay.clientConns()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	fr.heapStart = ms.HeapInuse
	fr.heapCeiling = fr.heapStart + fuzzHeapGrowth
	if f := flag.Lookup("test.fuzzworker"); f != nil && f.Value.String() == "true" {
		fr.heapCeiling += fuzzEngineBuffer
	}
	return fr
}

// input sends one fuzz input on a connection of its own and checks the
// relay after it.
func (fr *fuzzRelay) input(t *testing.T, in []byte) {
	if len(in) == 0 {
		return
	}
	e := fr.e
	mode, body := in[0], in[1:]
	nc, err := fr.pl.dial(waitFor)
	if err != nil {
		t.Fatal(err)
	}
	back, closed := sendFuzzInput(nc, mode, body)
	t.Logf("%d bytes back; closed by the relay: %v", back, closed)

	// The relay forgets the connection, and every stream it opened for
	// it, upstream and Local ones included (the good client's call is
	// over: it holds none).
	deadline := time.Now().Add(waitFor)
	for e.relay.clientConns() != fr.baseConns || e.relay.openHalves() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("after the client left, the relay holds %d client connections (%d before) and %d streams",
				e.relay.clientConns(), fr.baseConns, e.relay.openHalves())
		}
		time.Sleep(100 * time.Microsecond)
	}

	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	got, err := call(ctx, fr.good, "/t.S/Echo", fr.want)
	if err != nil || !bytes.Equal(got, fr.want) {
		t.Fatalf("the good call on another connection: %v (%d bytes back)", err, len(got))
	}

	fr.inputs++
	if fr.inputs%fuzzHeapEvery == 0 {
		fr.checkHeap(t)
	}
}

// checkHeap fails when the heap in use grew more than fuzzHeapGrowth
// since before the first input (in a fuzzing worker, past the fuzzing
// engine's own 100 MB mutation buffer too, allocated as it starts to
// mutate).
func (fr *fuzzRelay) checkHeap(t *testing.T) {
	// The harness's handler remembers every Call it was told of (to
	// catch a second Done), and a Call holds its stream, its connection
	// and that connection's read buffer: all of those calls ended.
	fr.e.h.mu.Lock()
	clear(fr.e.h.dones)
	fr.e.h.mu.Unlock()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	if ms.HeapInuse > fr.heapCeiling {
		t.Fatalf("heap in use %d MiB after %d inputs, over the ceiling of %d MiB (%d MiB before the first)",
			ms.HeapInuse>>20, fr.inputs, fr.heapCeiling>>20, fr.heapStart>>20)
	}
}

const (
	// fuzzHeapEvery is how often (in inputs) the heap is measured: a
	// forced GC costs more than an input.
	fuzzHeapEvery = 200
	// fuzzHeapGrowth is how far the heap in use may grow from before the
	// first input, inputs in flight included.
	fuzzHeapGrowth = 128 << 20
	// fuzzEngineBuffer is the mutation buffer of a fuzzing worker
	// (internal/fuzz's workerSharedMemSize).
	fuzzEngineBuffer = 100 << 20
	// fuzzQuiet is how long the relay may stay silent before a client
	// that sent everything hangs up.
	fuzzQuiet = 5 * time.Millisecond
)

// sendFuzzInput writes the preface, maybe a SETTINGS frame, and body to
// nc while reading what the relay answers, until the relay closes the
// connection or stays quiet for fuzzQuiet after the last byte was written,
// then closes nc. It returns how many bytes came back, and whether the relay
// closed the connection.
func sendFuzzInput(nc net.Conn, mode byte, body []byte) (n int, closed bool) {
	out := []byte(http2.ClientPreface)
	if mode&1 != 0 {
		var b bytes.Buffer
		fr := http2.NewFramer(&b, nil)
		_ = fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 20},
			http2.Setting{ID: http2.SettingMaxFrameSize, Val: 1 << 14})
		out = append(out, b.Bytes()...)
	}
	out = append(out, body...)

	written := make(chan struct{})
	go func() {
		defer close(written)
		_ = nc.SetWriteDeadline(time.Now().Add(2 * time.Second))
		if _, err := nc.Write(out); err != nil {
			return
		}
		if mode&2 != 0 {
			if cw, ok := nc.(interface{ CloseWrite() error }); ok {
				_ = cw.CloseWrite()
			}
		}
	}()
	buf := make([]byte, 32<<10)
	end := time.Now().Add(3 * time.Second)
	for time.Now().Before(end) {
		_ = nc.SetReadDeadline(time.Now().Add(fuzzQuiet))
		m, err := nc.Read(buf)
		n += m
		if err == nil {
			continue
		}
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			closed = true // the relay closed the connection
			break
		}
		select {
		case <-written:
			end = time.Time{} // quiet after the last byte: done
		default:
		}
	}
	_ = nc.Close()
	<-written
	return n, closed
}

// clientConns is how many client connections the relay holds.
func (s *Server) clientConns() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// pairListener hands the relay one end of a Unix socket pair per dial: a
// real socket (so the relay's non-blocking writes are the production
// ones) without a port per fuzz input.
type pairListener struct {
	ch   chan net.Conn
	done chan struct{}
	once sync.Once
}

func newPairListener() *pairListener {
	return &pairListener{ch: make(chan net.Conn), done: make(chan struct{})}
}

func (l *pairListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pairListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *pairListener) Addr() net.Addr { return pairAddr{} }

type pairAddr struct{}

func (pairAddr) Network() string { return "unix" }
func (pairAddr) String() string  { return "fuzz-pair" }

// dial returns the client's end of a new connection the relay accepted.
func (l *pairListener) dial(timeout time.Duration) (net.Conn, error) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	conns := make([]net.Conn, 2)
	for i, fd := range fds {
		f := os.NewFile(uintptr(fd), "fuzz-pair")
		conns[i], err = net.FileConn(f)
		_ = f.Close()
		if err != nil {
			for _, c := range conns[:i] {
				_ = c.Close()
			}
			if i == 0 {
				_ = syscall.Close(fds[1])
			}
			return nil, err
		}
	}
	select {
	case l.ch <- conns[1]:
		return conns[0], nil
	case <-l.done:
	case <-time.After(timeout):
	}
	_ = conns[0].Close()
	_ = conns[1].Close()
	return nil, errors.New("the relay accepted no connection")
}

// seedWriter builds frame sequences for the seed corpus.
type seedWriter struct {
	b    bytes.Buffer
	fr   *http2.Framer
	hbuf bytes.Buffer
	enc  *hpack.Encoder
}

func newSeedWriter() *seedWriter {
	w := &seedWriter{}
	w.fr = http2.NewFramer(&w.b, nil)
	w.fr.AllowIllegalWrites = true
	w.enc = hpack.NewEncoder(&w.hbuf)
	return w
}

// block is the HPACK block of a call of method, with extra fields.
func (w *seedWriter) block(method string, extra ...hpack.HeaderField) []byte {
	w.hbuf.Reset()
	for _, f := range append([]hpack.HeaderField{
		{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: "http"},
		{Name: ":path", Value: method}, {Name: ":authority", Value: "relay"},
		{Name: "content-type", Value: "application/grpc"}, {Name: "te", Value: "trailers"},
	}, extra...) {
		_ = w.enc.WriteField(f)
	}
	return bytes.Clone(w.hbuf.Bytes())
}

func (w *seedWriter) headers(id uint32, method string, end bool, extra ...hpack.HeaderField) *seedWriter {
	_ = w.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: w.block(method, extra...), EndHeaders: true, EndStream: end})
	return w
}

func (w *seedWriter) message(id uint32, msg []byte, end bool) *seedWriter {
	_ = w.fr.WriteData(id, end, grpcFrame(msg))
	return w
}

func (w *seedWriter) call(id uint32, method string, msg []byte) *seedWriter {
	return w.headers(id, method, false).message(id, msg, true)
}

func (w *seedWriter) raw(typ http2.FrameType, flags http2.Flags, id uint32, payload []byte) *seedWriter {
	return w.rawLen(len(payload), typ, flags, id, payload)
}

// rawLen writes a frame header saying n bytes follow, then payload.
func (w *seedWriter) rawLen(n int, typ http2.FrameType, flags http2.Flags, id uint32, payload []byte) *seedWriter {
	var h [9]byte
	h[0], h[1], h[2] = byte(n>>16), byte(n>>8), byte(n)
	h[3], h[4] = byte(typ), byte(flags)
	binary.BigEndian.PutUint32(h[5:], id)
	w.b.Write(h[:])
	w.b.Write(payload)
	return w
}

func (w *seedWriter) bytes() []byte { return bytes.Clone(w.b.Bytes()) }

// fuzzSeeds are frame sequences after the preface: good calls on every
// path the relay has, and the abuses RFC 9113 and the Rapid Reset and
// CONTINUATION advisories name.
func fuzzSeeds() [][]byte {
	msg := []byte("hello")
	s := func() *seedWriter { return newSeedWriter() }
	var seeds [][]byte
	add := func(w *seedWriter) { seeds = append(seeds, w.bytes()) }

	// Good calls: upstream, Local, served by the handler, a stream.
	add(s().call(1, "/t.S/Echo", msg))
	add(s().call(1, "/t.S/Echo", msg).call(3, "/t.S/Echo", pattern(20000, 1)).call(5, "/t.S/Size", []byte("70000")))
	add(s().call(1, "/t.S/LocalEcho", msg))
	add(s().call(1, "/t.S/Served", msg))
	add(s().headers(1, "/t.S/EchoStream", false).message(1, msg, false).message(1, msg, true))
	// Flow control and pings around a call.
	add(s().call(1, "/t.S/Size", []byte("200000")).
		do(func(w *seedWriter) {
			_ = w.fr.WriteWindowUpdate(0, 1<<20)
			_ = w.fr.WriteWindowUpdate(1, 1<<20)
			_ = w.fr.WritePing(false, [8]byte{1, 2, 3})
			_ = w.fr.WriteSettingsAck()
		}))
	// A call split over CONTINUATION, with padding and priority.
	add(s().do(func(w *seedWriter) {
		b := w.block("/t.S/Echo", hpack.HeaderField{Name: "x-pad", Value: strings.Repeat("p", 100)})
		_ = w.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: b[:10], PadLength: 7,
			Priority: http2.PriorityParam{StreamDep: 0, Weight: 15}})
		_ = w.fr.WriteContinuation(1, false, b[10:20])
		_ = w.fr.WriteContinuation(1, true, b[20:])
		_ = w.fr.WriteDataPadded(1, true, grpcFrame(msg), make([]byte, 9))
	}))
	// Trailers from the client, two messages, no message.
	add(s().headers(1, "/t.S/Echo", false).message(1, msg, false).do(func(w *seedWriter) {
		w.hbuf.Reset()
		_ = w.enc.WriteField(hpack.HeaderField{Name: "x-trailer", Value: "t"})
		_ = w.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: w.hbuf.Bytes(), EndHeaders: true, EndStream: true})
	}))
	add(s().headers(1, "/t.S/Echo", false).message(1, msg, false).message(1, msg, true))
	add(s().headers(1, "/t.S/Echo", true))
	// Resets: before the body, after it, rapid reset.
	add(s().headers(1, "/t.S/Hang", false).do(func(w *seedWriter) { _ = w.fr.WriteRSTStream(1, http2.ErrCodeCancel) }))
	add(s().call(1, "/t.S/Hang", msg).do(func(w *seedWriter) { _ = w.fr.WriteRSTStream(1, http2.ErrCodeCancel) }))
	add(s().do(func(w *seedWriter) {
		for id := uint32(1); id < 200; id += 2 {
			w.headers(id, "/t.S/Echo", false).message(id, msg, false)
			_ = w.fr.WriteRSTStream(id, http2.ErrCodeCancel)
		}
	}))
	add(s().call(1, "/t.S/Hang", msg)) // left open when the client goes
	add(s().call(1, "/t.S/Wait", msg))
	// Many empty streams.
	add(s().do(func(w *seedWriter) {
		for id := uint32(1); id < 400; id += 2 {
			w.headers(id, "/t.S/Echo", true)
		}
	}))
	// Frames on a closed or half-closed stream (h2spec 5.1/6, 5.1/7).
	add(s().call(1, "/t.S/Hang", msg).headers(1, "/t.S/Echo", false))
	add(s().call(1, "/t.S/Hang", msg).message(1, msg, true))
	add(s().call(1, "/t.S/Echo", msg).do(func(w *seedWriter) {
		_ = w.fr.WriteWindowUpdate(1, 100)
		_ = w.fr.WriteRSTStream(1, http2.ErrCodeCancel)
		_ = w.fr.WriteRSTStream(1, http2.ErrCodeCancel)
	}).message(1, msg, true))
	// SETTINGS: every parameter, bad values, a flood, a bad length.
	add(s().do(func(w *seedWriter) {
		_ = w.fr.WriteSettings(http2.Setting{ID: http2.SettingHeaderTableSize, Val: 0},
			http2.Setting{ID: http2.SettingEnablePush, Val: 0},
			http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: 1},
			http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1},
			http2.Setting{ID: http2.SettingMaxFrameSize, Val: 1<<24 - 1},
			http2.Setting{ID: http2.SettingMaxHeaderListSize, Val: 100},
			http2.Setting{ID: 0x99, Val: 7})
	}).call(1, "/t.S/Size", []byte("100000")))
	add(s().do(func(w *seedWriter) {
		_ = w.fr.WriteSettings(http2.Setting{ID: http2.SettingEnablePush, Val: 2})
	}))
	add(s().do(func(w *seedWriter) {
		_ = w.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 31})
	}))
	add(s().do(func(w *seedWriter) {
		_ = w.fr.WriteSettings(http2.Setting{ID: http2.SettingMaxFrameSize, Val: 100})
	}))
	add(s().do(func(w *seedWriter) {
		for range 300 {
			_ = w.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 65535})
		}
	}))
	add(s().raw(http2.FrameSettings, 0, 0, []byte{0, 4, 0}))
	add(s().raw(http2.FrameSettings, http2.FlagSettingsAck, 0, []byte{0, 4, 0, 0, 0, 1}))
	add(s().raw(http2.FrameSettings, 0, 1, nil))
	// WINDOW_UPDATE: zero, overflow, on an idle stream, bad length.
	add(s().do(func(w *seedWriter) { _ = w.fr.WriteWindowUpdate(0, 0) }))
	add(s().headers(1, "/t.S/Hang", false).do(func(w *seedWriter) { _ = w.fr.WriteWindowUpdate(1, 0) }))
	add(s().do(func(w *seedWriter) {
		_ = w.fr.WriteWindowUpdate(0, 1<<31-1)
		_ = w.fr.WriteWindowUpdate(0, 1<<31-1)
	}))
	add(s().headers(1, "/t.S/Hang", false).do(func(w *seedWriter) {
		_ = w.fr.WriteWindowUpdate(1, 1<<31-1)
		_ = w.fr.WriteWindowUpdate(1, 1<<31-1)
	}))
	add(s().do(func(w *seedWriter) { _ = w.fr.WriteWindowUpdate(7, 10) }))
	add(s().raw(http2.FrameWindowUpdate, 0, 0, []byte{0, 0, 1}))
	// PING: a flood, an ACK nobody asked for, a bad length, on a stream.
	add(s().do(func(w *seedWriter) {
		for i := range 500 {
			_ = w.fr.WritePing(false, [8]byte{byte(i)})
		}
	}))
	add(s().do(func(w *seedWriter) { _ = w.fr.WritePing(true, [8]byte{}) }))
	add(s().raw(http2.FramePing, 0, 0, []byte{1, 2, 3}))
	add(s().raw(http2.FramePing, 0, 1, make([]byte, 8)))
	// PRIORITY: fine, on itself, bad length, a flood.
	add(s().do(func(w *seedWriter) {
		_ = w.fr.WritePriority(3, http2.PriorityParam{StreamDep: 1, Weight: 200, Exclusive: true})
	}).call(1, "/t.S/Echo", msg))
	add(s().do(func(w *seedWriter) { _ = w.fr.WritePriority(1, http2.PriorityParam{StreamDep: 1}) }))
	add(s().raw(http2.FramePriority, 0, 1, []byte{0, 0, 0}))
	add(s().raw(http2.FramePriority, 0, 0, make([]byte, 5)))
	add(s().do(func(w *seedWriter) {
		for id := uint32(1); id < 1000; id += 2 {
			_ = w.fr.WritePriority(id, http2.PriorityParam{StreamDep: id + 2})
		}
	}))
	// GOAWAY from the client, with a call before and after it.
	add(s().headers(1, "/t.S/Echo", false).do(func(w *seedWriter) {
		_ = w.fr.WriteGoAway(1, http2.ErrCodeNo, []byte("bye"))
	}).message(1, msg, true).call(3, "/t.S/Echo", msg))
	add(s().raw(http2.FrameGoAway, 0, 1, make([]byte, 8)))
	// CONTINUATION: a flood, one without HEADERS, one interrupted.
	add(s().do(func(w *seedWriter) {
		b := w.block("/t.S/Echo")
		_ = w.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: b})
		frag := bytes.Repeat([]byte{0x40, 0x01, 'x', 0x7f, 0x7f}, 200)
		for range 300 {
			_ = w.fr.WriteContinuation(1, false, frag)
		}
	}))
	add(s().do(func(w *seedWriter) {
		_ = w.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: w.block("/t.S/Echo")})
		for range 1000 {
			_ = w.fr.WriteContinuation(1, false, nil)
		}
	}))
	add(s().do(func(w *seedWriter) { _ = w.fr.WriteContinuation(1, true, w.block("/t.S/Echo")) }))
	add(s().do(func(w *seedWriter) {
		b := w.block("/t.S/Echo")
		_ = w.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: b[:5]})
		_ = w.fr.WritePing(false, [8]byte{})
		_ = w.fr.WriteContinuation(1, true, b[5:])
	}))
	add(s().do(func(w *seedWriter) {
		b := w.block("/t.S/Echo")
		_ = w.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: b[:5]})
		_ = w.fr.WriteContinuation(3, true, b[5:])
	}))
	// HPACK: a bomb (one big entry referenced many times), a table size
	// update over the limit, garbage, a huge string length.
	add(s().do(func(w *seedWriter) {
		w.hbuf.Reset()
		_ = w.enc.WriteField(hpack.HeaderField{Name: ":method", Value: "POST"})
		_ = w.enc.WriteField(hpack.HeaderField{Name: ":scheme", Value: "http"})
		_ = w.enc.WriteField(hpack.HeaderField{Name: ":path", Value: "/t.S/Echo"})
		_ = w.enc.WriteField(hpack.HeaderField{Name: "x-big", Value: strings.Repeat("b", 4000)})
		b := bytes.Clone(w.hbuf.Bytes())
		idx := byte(0x80 | 62) // the newest dynamic entry
		b = append(b, bytes.Repeat([]byte{idx}, 20000)...)
		_ = w.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: b[:16000]})
		for b = b[16000:]; len(b) > 16000; b = b[16000:] {
			_ = w.fr.WriteContinuation(1, false, b[:16000])
		}
		_ = w.fr.WriteContinuation(1, true, b)
	}))
	add(s().do(func(w *seedWriter) {
		b := append([]byte{0x3f, 0xe1, 0xff, 0xff, 0x0f}, w.block("/t.S/Echo")...) // size update 2^28
		_ = w.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: b, EndHeaders: true})
	}))
	add(s().raw(http2.FrameHeaders, http2.FlagHeadersEndHeaders, 1, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0x0f}))
	add(s().raw(http2.FrameHeaders, http2.FlagHeadersEndHeaders, 1, []byte{0x40, 0x7f, 0xff, 0xff, 0xff, 0x7f, 'a'}))
	// Malformed requests beside a good call.
	for _, extra := range [][]hpack.HeaderField{
		{{Name: "Upper", Value: "x"}},
		{{Name: ":path", Value: "/t.S/Echo"}},
		{{Name: "connection", Value: "keep-alive"}},
		{{Name: "te", Value: "gzip"}},
		{{Name: ":status", Value: "200"}},
		{{Name: "content-length", Value: "3"}},
		{{Name: "grpc-timeout", Value: "1n"}},
		{{Name: "grpc-timeout", Value: "garbage"}},
	} {
		add(s().headers(1, "/t.S/Echo", false, extra...).message(1, msg, true).call(3, "/t.S/Echo", msg))
	}
	add(s().do(func(w *seedWriter) {
		w.hbuf.Reset()
		_ = w.enc.WriteField(hpack.HeaderField{Name: "x-only", Value: "y"})
		_ = w.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: w.hbuf.Bytes(), EndHeaders: true})
	}).message(1, msg, true))
	// gRPC framing: a length prefix bigger than the body, a 1 GB one, a
	// compressed flag, a partial prefix.
	add(s().headers(1, "/t.S/Echo", false).raw(http2.FrameData, http2.FlagDataEndStream, 1, []byte{0, 0, 0, 1, 0, 'x'}))
	add(s().headers(1, "/t.S/Echo", false).raw(http2.FrameData, 0, 1, []byte{0, 0x40, 0, 0, 0, 'x', 'y'}))
	add(s().headers(1, "/t.S/Echo", false).raw(http2.FrameData, http2.FlagDataEndStream, 1, []byte{1, 0, 0, 0, 1, 'x'}))
	add(s().headers(1, "/t.S/Echo", false).raw(http2.FrameData, http2.FlagDataEndStream, 1, []byte{0, 0}))
	// DATA: on stream 0, on an idle stream, bad padding, empty flood,
	// over the window.
	add(s().raw(http2.FrameData, 0, 0, []byte("x")))
	add(s().raw(http2.FrameData, http2.FlagDataEndStream, 9, grpcFrame(msg)))
	add(s().headers(1, "/t.S/Echo", false).raw(http2.FrameData, http2.FlagDataPadded, 1, []byte{10, 'a', 'b'}))
	add(s().headers(1, "/t.S/Echo", false).raw(http2.FrameData, http2.FlagDataPadded, 1, nil))
	add(s().raw(http2.FrameHeaders, http2.FlagHeadersPadded|http2.FlagHeadersEndHeaders, 1, []byte{200, 0x82}))
	add(s().headers(1, "/t.S/Echo", false).do(func(w *seedWriter) {
		for range 2000 {
			_ = w.fr.WriteData(1, false, nil)
		}
	}))
	add(s().headers(1, "/t.S/Hang", false).do(func(w *seedWriter) {
		chunk := make([]byte, 16384)
		for range 6 {
			_ = w.fr.WriteData(1, false, chunk)
		}
	}))
	// Frame headers that lie: huge lengths, over the max frame size,
	// unknown types, a reserved bit, a truncated header.
	add(s().rawLen(1<<24-1, http2.FrameData, 0, 1, []byte("short")))
	add(s().headers(1, "/t.S/Echo", false).rawLen(1<<24-1, http2.FrameData, 0, 1, make([]byte, 100)))
	add(s().rawLen(1<<24-1, http2.FrameHeaders, 0, 1, nil))
	add(s().raw(http2.FrameData, 0, 1, make([]byte, 16385)))
	add(s().raw(0x20, 0xff, 1, []byte("unknown")).call(1, "/t.S/Echo", msg))
	add(s().raw(http2.FramePushPromise, http2.FlagPushPromiseEndHeaders, 1, []byte{0, 0, 0, 2, 0x82}))
	add(s().raw(http2.FrameHeaders, http2.FlagHeadersEndHeaders|http2.FlagHeadersEndStream, 1<<31|1, s().block("/t.S/Echo")))
	add(s().headers(1, "/t.S/Echo", false).do(func(w *seedWriter) { w.b.Write([]byte{0, 0, 5, 0, 1}) }))
	// Stream IDs: even, decreasing, the largest.
	add(s().headers(2, "/t.S/Echo", true))
	add(s().call(5, "/t.S/Echo", msg).call(3, "/t.S/Echo", msg))
	add(s().call(1<<31-1, "/t.S/Echo", msg).call(1, "/t.S/Echo", msg))
	// No frames at all, and garbage right after the preface.
	seeds = append(seeds, nil, []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
	return seeds
}

func (w *seedWriter) do(fn func(*seedWriter)) *seedWriter {
	fn(w)
	return w
}
