package attack

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"golang.org/x/net/http2"
)

// Report is what one attack sent and how the server answered it. Fields an
// attack has no use for stay zero.
type Report struct {
	Attack string
	// Elapsed is the attack's whole run, dial to close.
	Elapsed time.Duration
	// Streams is the number of streams opened (HEADERS sent); Frames and
	// Bytes what was written to the socket, the preface included.
	Streams, Frames, Bytes int64
	// GoAway is the server's first GOAWAY; nil: none came.
	GoAway *GoAway
	// ClosedAfter is when the server ended the connection (read EOF or
	// error), from the attack's start; 0: it was open when the attack
	// left. An attack that stops reading (NeverRead) cannot see it.
	ClosedAfter time.Duration
	// Resets counts the RST_STREAM frames the server sent, by code.
	Resets map[http2.ErrCode]int64
	// Answered is the number of streams the server ended (a frame with
	// END_STREAM); AnswerBytes the DATA bytes read.
	Answered, AnswerBytes int64
	// Stalled is the time spent waiting for the server's flow-control
	// window.
	Stalled time.Duration
	// Stopped says why the attack ended before its planned end ("": it
	// ran to the end): the server's GOAWAY, its close, a write error.
	Stopped string

	// Uploaded (NeverRead) is the number of requests sent whole, and
	// UploadedAfter when the last one was complete (its END_STREAM sent),
	// from the attack's start; 0 when they were not all sent. The attack
	// proper, answers nobody reads, runs from then on.
	Uploaded      int64
	UploadedAfter time.Duration

	// Accepted (HugeLength) is the request DATA the server's window let
	// through on the stream, and AcceptedAfterAnswer the part of it sent
	// after the server had answered or reset the stream.
	Accepted, AcceptedAfterAnswer int64
	// GRPCStatus and GRPCMessage are the watched stream's (HugeLength:
	// the huge request; MalformedNeighbour: the good call) grpc-status
	// and grpc-message; GRPCStatus is "" when none came. StreamReset is
	// the RST_STREAM code the watched stream got ("" none).
	GRPCStatus, GRPCMessage, StreamReset string
	// WatchedEndAfter is when the watched stream was answered (its
	// END_STREAM) or reset, from the attack's start; 0: neither.
	WatchedEndAfter time.Duration
	// GoodAnswered (MalformedNeighbour) is whether the good call got its
	// response message and grpc-status 0; NeighbourReset is the code the
	// malformed stream was reset with ("" none).
	GoodAnswered   bool
	NeighbourReset string

	// OK and Failed (BigUploads) count the calls; Codes the failures by
	// gRPC code, and FirstError the first failure's text.
	OK, Failed int64
	Codes      map[string]int64
	FirstError string
}

// String formats the report, one "key: value" per line.
func (r *Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "attack: %s\n", r.Attack)
	fmt.Fprintf(&b, "elapsed: %s\n", r.Elapsed.Round(time.Millisecond))
	fmt.Fprintf(&b, "sent: %d streams, %d frames, %d bytes\n", r.Streams, r.Frames, r.Bytes)
	if r.GoAway != nil {
		fmt.Fprintf(&b, "goaway: %s\n", r.GoAway)
	} else {
		b.WriteString("goaway: none\n")
	}
	if r.ClosedAfter > 0 {
		fmt.Fprintf(&b, "closed by server after: %s\n", r.ClosedAfter.Round(time.Millisecond))
	}
	fmt.Fprintf(&b, "resets received: %s\n", formatResets(r.Resets))
	fmt.Fprintf(&b, "answered: %d streams, %d DATA bytes read\n", r.Answered, r.AnswerBytes)
	if r.Stalled > 0 {
		fmt.Fprintf(&b, "stalled on window: %s\n", r.Stalled.Round(time.Millisecond))
	}
	if r.Stopped != "" {
		fmt.Fprintf(&b, "stopped early: %s\n", r.Stopped)
	}
	if r.Attack == "never-read" {
		fmt.Fprintf(&b, "requests sent whole: %d of %d", r.Uploaded, r.Streams)
		if r.UploadedAfter > 0 {
			fmt.Fprintf(&b, ", the last after %s", r.UploadedAfter.Round(time.Millisecond))
		}
		b.WriteByte('\n')
	}
	if r.Accepted > 0 {
		fmt.Fprintf(&b, "accepted: %d bytes (%d after the server answered or reset)\n", r.Accepted, r.AcceptedAfterAnswer)
	}
	if r.GRPCStatus != "" || r.StreamReset != "" {
		fmt.Fprintf(&b, "watched stream: grpc-status=%q grpc-message=%q reset=%q, ended after %s\n",
			r.GRPCStatus, r.GRPCMessage, r.StreamReset, r.WatchedEndAfter.Round(time.Millisecond))
	}
	if r.Attack == "malformed-neighbour" {
		fmt.Fprintf(&b, "good call answered: %v; malformed stream reset: %q\n", r.GoodAnswered, r.NeighbourReset)
	}
	if r.OK+r.Failed > 0 {
		fmt.Fprintf(&b, "calls: %d ok, %d failed %v\n", r.OK, r.Failed, r.Codes)
		if r.FirstError != "" {
			fmt.Fprintf(&b, "first error: %s\n", r.FirstError)
		}
	}
	return b.String()
}

func formatResets(m map[http2.ErrCode]int64) string {
	if len(m) == 0 {
		return "none"
	}
	codes := make([]http2.ErrCode, 0, len(m))
	for c := range m {
		codes = append(codes, c)
	}
	slices.Sort(codes)
	parts := make([]string, len(codes))
	for i, c := range codes {
		parts[i] = fmt.Sprintf("%s=%d", c, m[c])
	}
	return strings.Join(parts, " ")
}
