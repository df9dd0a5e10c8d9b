package baseline

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"time"
)

// fileVersion is the format of a saved store.
const fileVersion = 1

type fileFormat struct {
	Version int                  `json:"version"`
	Saved   time.Time            `json:"saved"`
	Models  map[string]trackFile `json:"models"`
}

type trackFile struct {
	Recent   [NumQuantiles][]float32 `json:"recent_micros"`
	Hours    map[int]*hourHist       `json:"hours"`
	LastSeen time.Time               `json:"last_seen"`
	// Rises are the past rises (recurring.go); absent in files written
	// before they were kept, which load with none.
	Rises []PastRise `json:"rises,omitempty"`
}

// Save writes the learned history as JSON (the current, unfinished hour
// is not saved).
func (s *Store) Save(w io.Writer) error {
	s.mu.Lock()
	f := fileFormat{Version: fileVersion, Saved: s.opts.Now(), Models: make(map[string]trackFile, len(s.tracks))}
	for k, t := range s.tracks {
		tf := trackFile{Hours: map[int]*hourHist{}, LastSeen: t.lastSeen, Rises: slices.Clone(t.rises)}
		for q := range NumQuantiles {
			// Oldest first, so that Load can push them back in order.
			r := t.recent[q]
			tf.Recent[q] = append(append([]float32{}, r.v[r.pos:]...), r.v[:r.pos]...)
		}
		for h, hh := range t.hours.all() {
			if hh != nil {
				tf.Hours[h] = &hourHist{Median: append(hh.Median[:0:0], hh.Median...), Spread: append(hh.Spread[:0:0], hh.Spread...)}
			}
		}
		f.Models[k] = tf
	}
	s.mu.Unlock()
	return json.NewEncoder(w).Encode(f)
}

// Load replaces the store's history with what Save wrote.
func (s *Store) Load(r io.Reader) error {
	var f fileFormat
	if err := json.NewDecoder(r).Decode(&f); err != nil {
		return fmt.Errorf("baseline: %w", err)
	}
	if f.Version != fileVersion {
		return fmt.Errorf("baseline: file version %d, want %d", f.Version, fileVersion)
	}
	tracks := map[string]*track{}
	for k, tf := range f.Models {
		if len(tracks) >= s.opts.MaxKeys {
			break
		}
		t := &track{lastSeen: tf.LastSeen}
		if n := len(tf.Rises); n > maxRises {
			tf.Rises = tf.Rises[n-maxRises:]
		}
		t.rises = tf.Rises
		for q := range NumQuantiles {
			for _, x := range tf.Recent[q] {
				t.recent[q].push(float64(x)/1e6, s.opts.RecentSamples)
			}
		}
		for h, hh := range tf.Hours {
			if h < 0 || h >= HoursPerWeek || hh == nil || len(hh.Median) != len(hh.Spread) {
				return fmt.Errorf("baseline: model %q: bad hour %d", k, h)
			}
			n := len(hh.Median)
			if n > s.opts.Weeks {
				hh.Median, hh.Spread = hh.Median[n-s.opts.Weeks:], hh.Spread[n-s.opts.Weeks:]
			}
			t.hours.set(h, hh)
		}
		tracks[k] = t
	}
	s.mu.Lock()
	s.tracks = tracks
	s.mu.Unlock()
	return nil
}
