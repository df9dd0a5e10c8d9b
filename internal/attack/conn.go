package attack

import (
	"context"
	"fmt"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/infergate/infergate/internal/h2raw"
)

// Windows the reading attacks advertise: generous enough that a server is
// never held back by the attacker's receive window (answers are read and
// discarded), so what a reading attack costs is what it sends.
const (
	readStreamWindow = 4 << 20
	readConnWindow   = 1 << 30
	// chunk is the largest DATA frame written.
	chunk = h2raw.Chunk
)

// errClosed is returned by writes and waits once the server has ended the
// connection.
var errClosed = h2raw.ErrClosed

// GoAway is the first GOAWAY a server sent on an attack's connection.
type GoAway = h2raw.GoAway

// conn is an attack's raw connection.
type conn = h2raw.Conn

// readingOpts are the settings of an attacker that reads and discards.
func readingOpts(decode bool) h2raw.Options {
	return h2raw.Options{
		Settings:   []http2.Setting{{ID: http2.SettingInitialWindowSize, Val: readStreamWindow}},
		ConnWindow: readConnWindow - 65535,
		Decode:     decode,
	}
}

// dial opens an attack's connection.
func dial(ctx context.Context, addr string, o h2raw.Options) (*conn, error) {
	c, err := h2raw.Dial(ctx, addr, o)
	if err != nil {
		return nil, fmt.Errorf("attack: %w", err)
	}
	return c, nil
}

// requestHeaders are a gRPC request's HEADERS fields for method.
func requestHeaders(authority, method string) []hpack.HeaderField {
	return h2raw.RequestHeaders(authority, method, "infergate-bench-attack")
}

// closeInto ends the connection and fills r with what it wrote and what
// its reader saw.
func closeInto(c *conn, r *Report) {
	t, s := c.Close()
	r.Elapsed, r.Frames, r.Bytes = t.Elapsed, t.Frames, t.Bytes
	r.GoAway = s.GoAway
	r.ClosedAfter = s.ClosedAt
	r.Resets = s.Resets
	r.Answered, r.AnswerBytes = s.Answered, s.AnswerBytes
	r.Stalled = s.Stalled
}
