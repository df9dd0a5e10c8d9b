// Package statefile reads and writes the small files infergate keeps
// between runs (the alert state, the latency baselines): writes are
// atomic and durable, reads are bounded, and a file that cannot be used
// is moved aside rather than stopping the process. A file that only
// alerting reads must never keep the proxy from serving calls.
package statefile

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// MaxSize is the largest state file read. Real ones are kilobytes to a
// few megabytes; a bigger one is crafted or damaged, and reading it
// whole could take the memory the proxy needs.
const MaxSize = 64 << 20

// ErrTooBig is returned by Read for a file over its size limit.
var ErrTooBig = errors.New("file too big")

// Write replaces path with b atomically and durably: a temporary file in
// the same folder, written, synced and closed, renamed over path, and the
// folder synced so that the rename survives a crash. A reader sees the
// old file or the new one, never a part.
func Write(path string, b []byte) error {
	return WriteFunc(path, func(w io.Writer) error {
		_, err := w.Write(b)
		return err
	})
}

// WriteFunc is Write with the content written by fill.
func WriteFunc(path string, fill func(io.Writer) error) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after a successful rename: nothing there
	if err := fill(tmp); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// Read returns path's content, at most max bytes (MaxSize when max <= 0);
// a bigger file gives ErrTooBig without being read whole. A missing file
// gives an error for which errors.Is(err, fs.ErrNotExist) holds.
func Read(path string, max int64) ([]byte, error) {
	if max <= 0 {
		max = MaxSize
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// A file known to be too big is refused unread; the limited read
	// below still catches one that grows meanwhile (or has no size).
	if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() && fi.Size() > max {
		return nil, fmt.Errorf("%w: %d bytes, over %d", ErrTooBig, fi.Size(), max)
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%w: over %d bytes", ErrTooBig, max)
	}
	return b, nil
}

// SetAside renames a damaged path to PATH.corrupt-TIMESTAMP (UTC, so the
// names sort by time) so that the next start does not trip on it again
// and an operator can still read it. It returns the new name.
func SetAside(path string, now time.Time) (string, error) {
	aside := path + ".corrupt-" + now.UTC().Format("20060102T150405Z")
	if err := os.Rename(path, aside); err != nil {
		return "", err
	}
	return aside, nil
}

// Metrics counts what happened to each kind of state file, by its kind
// ("alert_state", "baseline").
type Metrics struct {
	damaged      *prometheus.CounterVec
	saveFailures *prometheus.CounterVec
}

// NewMetrics returns the state-file metrics, registered with reg unless
// it is nil.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		damaged: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "infergate_state_file_damaged_total",
			Help: "State files that could not be read or parsed at start, set aside as NAME.corrupt-TIMESTAMP; infergate started without them.",
		}, []string{"file"}),
		saveFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "infergate_state_file_save_failures_total",
			Help: "Saves of a state file that failed (disk full, read-only folder); retried at the next save.",
		}, []string{"file"}),
	}
	if reg != nil {
		reg.MustRegister(m.damaged, m.saveFailures)
	}
	return m
}

// Damaged counts a damaged file of kind. m may be nil.
func (m *Metrics) Damaged(kind string) {
	if m != nil {
		m.damaged.WithLabelValues(kind).Inc()
	}
}

// SaveFailed counts a failed save of kind. m may be nil.
func (m *Metrics) SaveFailed(kind string) {
	if m != nil {
		m.saveFailures.WithLabelValues(kind).Inc()
	}
}

// Init makes both series of kind exist at 0, so a dashboard or an
// absent() rule sees them before the first failure. m may be nil.
func (m *Metrics) Init(kind string) {
	if m != nil {
		m.damaged.WithLabelValues(kind)
		m.saveFailures.WithLabelValues(kind)
	}
}

// Saver writes one state file and reports its failures the same way for
// every kind: each failure counted, the first of a run logged at ERROR
// (not every save: a full disk would flood the log), the recovery logged
// once. Calls never wait on it: its callers save off the request path.
type Saver struct {
	Path string
	Kind string // the file label of the metrics, e.g. "alert_state"
	// Retry says when a failed save is tried again, for the log: "at
	// the next save", "every minute".
	Retry   string
	Log     *slog.Logger
	Metrics *Metrics // nil: uncounted

	failing bool
}

// Write replaces the file with what fill writes (see WriteFunc) and
// reports the outcome; it returns the error so the caller can keep its
// state dirty.
func (s *Saver) Write(fill func(io.Writer) error) error {
	err := WriteFunc(s.Path, fill)
	if err != nil {
		s.Metrics.SaveFailed(s.Kind)
		if !s.failing {
			s.Log.Error("state file: save failed; retrying "+s.Retry+" (calls are not affected)", "file", s.Path, "kind", s.Kind, "err", err)
		}
		s.failing = true
		return err
	}
	if s.failing {
		s.Log.Info("state file: saving works again", "file", s.Path, "kind", s.Kind)
	}
	s.failing = false
	return nil
}

// Failing reports whether the last save failed.
func (s *Saver) Failing() bool { return s.failing }
