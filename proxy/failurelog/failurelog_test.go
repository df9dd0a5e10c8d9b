package failurelog

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
)

// fakeAfter collects scheduled summaries so a test runs them by hand.
type fakeAfter struct{ fs []func() }

type fakeTimer struct{}

func (fakeTimer) Stop() bool { return true }

func (a *fakeAfter) after(_ time.Duration, f func()) stopper {
	a.fs = append(a.fs, f)
	return fakeTimer{}
}

// TestFailureLogSummarises: 1,000 failures of one kind within an interval
// make one line at once and one summary line with the count; another kind
// gets its own line.
func TestFailureLogSummarises(t *testing.T) {
	var buf bytes.Buffer
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	f := New(slog.New(slog.NewTextHandler(&buf, nil)), 10*time.Second, func() time.Time { return now })
	fa := &fakeAfter{}
	f.after = fa.after
	down := Kind{Msg: "upstream call failed", Upstream: "triton", Code: codes.Unavailable}
	for i := range 1000 {
		now = now.Add(time.Millisecond)
		f.Note(t.Context(), down, slog.Int("i", i))
	}
	f.Note(t.Context(), Kind{Msg: "upstream call failed", Upstream: "triton", Code: codes.Internal})
	if got := strings.Count(buf.String(), "\n"); got != 2 {
		t.Fatalf("%d lines before the interval ended, want 2 (first of each kind):\n%s", got, buf.String())
	}
	if len(fa.fs) != 1 {
		t.Fatalf("%d summaries scheduled, want 1", len(fa.fs))
	}
	now = now.Add(10 * time.Second)
	fa.fs[0]()
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 || !strings.Contains(lines[2], "more_since_last_line=999") || !strings.Contains(lines[2], "i=999") {
		t.Fatalf("summary line missing or wrong:\n%s", buf.String())
	}
	// Quiet afterwards: nothing more to say.
	f.Close()
	if got := len(strings.Split(strings.TrimSpace(buf.String()), "\n")); got != 3 {
		t.Errorf("%d lines after close, want 3", got)
	}
}
