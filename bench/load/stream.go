package load

import (
	"context"
	"io"
	"strconv"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/infergate/infergate/proto/kservepb"
	"github.com/infergate/infergate/proto/wire"
)

// StreamMethod is the full method a Stream run sends its requests on.
const StreamMethod = kservepb.GRPCInferenceService_ModelStreamInfer_FullMethodName

// ErrorMessage is the Result.Errors key of requests whose stream response
// carried an error_message (the stream itself stayed OK).
const ErrorMessage = "error_message"

// StreamResult is the client's view of a Stream run's requests, measured
// as infergate measures them: the wait for each request's first
// response (TTFR), the gaps between its responses, and their number.
type StreamResult struct {
	FirstResponse Latency `json:"first_response_ms"`
	ResponseGap   Latency `json:"response_gap_ms"`
	Responses     Counts  `json:"responses_per_request"`

	hists [numStreamHists]*hdrhistogram.Histogram
}

// Counts holds quantiles of a count (responses per request): Latency's
// fields, in the count's unit instead of milliseconds.
type Counts Latency

// The stream histograms a recorder shard keeps: TTFR and gaps in
// microseconds, responses as counts.
const (
	histFirst = iota
	histGap
	histResponses
	numStreamHists
)

// Histogram returns one of the merged histograms (microseconds, or a
// count for responses per request) named as monitor names the stream
// quantities: "first_response", "response_gap" or "responses"; callers
// must not modify it.
func (s *StreamResult) Histogram(name string) *hdrhistogram.Histogram {
	switch name {
	case "first_response":
		return s.hists[histFirst]
	case "response_gap":
		return s.hists[histGap]
	case "responses":
		return s.hists[histResponses]
	}
	return nil
}

func (s *StreamResult) fill() {
	s.FirstResponse = latencyOf(s.hists[histFirst])
	s.ResponseGap = latencyOf(s.hists[histGap])
	if h := s.hists[histResponses]; h.TotalCount() > 0 {
		s.Responses = Counts{P50: float64(h.ValueAtQuantile(50)), P90: float64(h.ValueAtQuantile(90)),
			P99: float64(h.ValueAtQuantile(99)), P999: float64(h.ValueAtQuantile(99.9)), Max: float64(h.Max()), Mean: h.Mean()}
	}
}

// withID returns body with its id (field 3) set to id: appended, as the
// last occurrence of a field wins, so the shared payload is not decoded.
func withID(body []byte, id string) []byte {
	b := make([]byte, 0, len(body)+len(id)+4)
	b = append(b, body...)
	b = protowire.AppendTag(b, 3, protowire.BytesType)
	return protowire.AppendString(b, id)
}

// streamCall is one request's exchange on a stream.
type streamCall struct {
	n     int // responses counted
	bytes int
	last  time.Time
	// failed is set when a response carried an error_message.
	failed bool
}

// exchange sends one request on st and reads its responses until the
// final one (triton_final_response true, or a response without the flag:
// a model that is not decoupled answers once; Triton's empty final
// response ends the request without counting), recording into shard i
// when measured: TTFR from from, gaps between receipts.
func (r *runner) exchange(st grpc.ClientStream, body []byte, from time.Time, measured bool, shard int) (streamCall, error) {
	var c streamCall
	if err := st.SendMsg(body); err != nil {
		return c, err
	}
	for {
		var msg []byte
		if err := st.RecvMsg(&msg); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF // the stream ended before the final response
			}
			return c, err
		}
		at := r.now()
		c.bytes += len(msg)
		info, err := wire.ScanStreamResponse(msg)
		if err != nil {
			return c, err
		}
		if info.Error {
			c.failed = true
			return c, nil
		}
		if !(info.Empty && info.HasFinal && info.Final) {
			if measured {
				if c.n == 0 {
					r.rec.recordStream(shard, histFirst, int64(at.Sub(from)/time.Microsecond))
				} else {
					r.rec.recordStream(shard, histGap, int64(at.Sub(c.last)/time.Microsecond))
				}
			}
			c.n++
			c.last = at
		}
		if info.Final || !info.HasFinal {
			if measured {
				r.rec.recordStream(shard, histResponses, int64(c.n))
			}
			return c, nil
		}
	}
}

// openStream opens one ModelStreamInfer stream on cc.
func openStream(ctx context.Context, cc *grpc.ClientConn) (grpc.ClientStream, error) {
	return cc.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}, StreamMethod)
}

// streamCaller is a closed-loop client of a Stream run: one stream, one
// request at a time, each measured from its send to its final response.
// A broken stream is counted on the request it broke and reopened.
func (r *runner) streamCaller(i int) {
	cc := r.conns[i%len(r.conns)]
	var (
		st     grpc.ClientStream
		cancel context.CancelFunc = func() {}
	)
	defer func() {
		if st != nil {
			// End the stream cleanly, so that it finishes OK, not
			// cancelled, wherever it is measured.
			timer := time.AfterFunc(r.cfg.Timeout, cancel)
			if st.CloseSend() == nil {
				for st.RecvMsg(new([]byte)) == nil {
				}
			}
			timer.Stop()
		}
		cancel()
	}()
	for seq := 0; !r.stopped(); seq++ {
		t0 := r.now()
		measured := !t0.Before(r.measureStart)
		if measured && !r.claim() {
			return
		}
		if st == nil {
			// The stream lives across requests; Timeout bounds each
			// request below, not the stream.
			var ctx context.Context
			ctx, cancel = context.WithCancel(r.callCtx)
			var err error
			if st, err = openStream(ctx, cc); err != nil {
				cancel()
				r.finish(t0, measured, i, streamCall{}, err)
				continue
			}
		}
		timer := time.AfterFunc(r.cfg.Timeout, cancel)
		c, err := r.exchange(st, withID(r.cfg.Payload.Body, strconv.Itoa(i)+"-"+strconv.Itoa(seq)), t0, measured, i)
		timer.Stop()
		if err != nil {
			cancel()
			st = nil
		}
		r.finish(t0, measured, i, c, err)
	}
}

// callStream is an open-loop request of a Stream run: a stream of its own.
func (r *runner) callStream(cc *grpc.ClientConn, from time.Time, measured bool, shard int) {
	ctx, cancel := context.WithTimeout(r.callCtx, r.cfg.Timeout)
	defer cancel()
	st, err := openStream(ctx, cc)
	var c streamCall
	if err == nil {
		c, err = r.exchange(st, withID(r.cfg.Payload.Body, strconv.Itoa(shard)), from, measured, shard)
		if err == nil {
			err = st.CloseSend()
		}
		// Read to the end, so that the stream finishes with the server's
		// status rather than cancelled.
		for err == nil {
			if err = st.RecvMsg(new([]byte)); err == io.EOF {
				err = nil
				break
			}
		}
	}
	r.finish(from, measured, shard, c, err)
}

// finish counts one request of a Stream run, as call does a unary one.
func (r *runner) finish(from time.Time, measured bool, shard int, c streamCall, err error) {
	r.done.Add(1)
	code := status.Code(err)
	if code != codes.OK || c.failed {
		r.failed.Add(1)
	}
	if !measured {
		return
	}
	latency := c.last.Sub(from)
	if c.last.IsZero() {
		latency = r.now().Sub(from)
	}
	r.noteDone(from.Add(latency))
	switch {
	case code != codes.OK:
		r.rec.record(shard, latency, code)
	case c.failed:
		r.rec.recordFailed(shard)
	default:
		r.respBytes.Add(int64(c.bytes))
		r.rec.record(shard, latency, codes.OK)
	}
}
