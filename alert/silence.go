package alert

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"path"
	"slices"
	"strings"
	"sync"
	"time"
)

// Matcher matches one label by glob (path.Match syntax).
type Matcher struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Silence mutes the alerts whose labels match every matcher between
// StartsAt and EndsAt. An acknowledgement is a silence of one alert that
// ends when the alert resolves (UntilResolved).
type Silence struct {
	ID            string    `json:"id"`
	Matchers      []Matcher `json:"matchers"`
	StartsAt      time.Time `json:"starts_at"`
	EndsAt        time.Time `json:"ends_at"`
	CreatedBy     string    `json:"created_by"`
	Comment       string    `json:"comment"`
	UntilResolved string    `json:"until_resolved,omitempty"` // fingerprint of the acknowledged alert
}

// Bounds on one silence. Alertmanager leaves them to its operator; a
// token holder here must not be able to make every evaluation slow or the
// state file huge.
const (
	maxSilenceMatchers = 32
	// silenceMaxBytes bounds a silence's matchers, comment and author
	// together.
	silenceMaxBytes = 8 << 10
	// maxSilenceLength is how far ahead a silence may end: longer is a
	// rule change, not a silence.
	maxSilenceLength = 366 * 24 * time.Hour
)

// Validate checks a silence from the API: its shape (see validate), and
// that it ends after now.
func (s *Silence) Validate(now time.Time) error { return s.validate(now, true) }

// validate checks a silence; fresh is true for one being created (from
// the API), false for one restored from the state file, which may have
// started long ago. A silence needs one to 32 matchers, at most 8 KiB in
// all, and at least one matcher that does not match an empty (absent)
// label, so that no silence mutes everything (Alertmanager's rule too);
// it ends at most a year after it starts.
func (s *Silence) validate(now time.Time, fresh bool) error {
	if len(s.Matchers) == 0 {
		return fmt.Errorf("matchers: at least one is required")
	}
	if len(s.Matchers) > maxSilenceMatchers {
		return fmt.Errorf("matchers: %d, at most %d", len(s.Matchers), maxSilenceMatchers)
	}
	size := len(s.Comment) + len(s.CreatedBy)
	matchesNothing := false
	for i, m := range s.Matchers {
		if m.Name == "" {
			return fmt.Errorf("matchers[%d].name: missing", i)
		}
		if _, err := path.Match(m.Value, ""); err != nil {
			return fmt.Errorf("matchers[%d].value: bad glob %q", i, m.Value)
		}
		if len(m.Name)+len(m.Value) > 1024 {
			return fmt.Errorf("matchers[%d]: longer than 1 KiB", i)
		}
		if ok, _ := path.Match(m.Value, ""); !ok {
			matchesNothing = true
		}
		size += len(m.Name) + len(m.Value)
	}
	if !matchesNothing {
		return fmt.Errorf("matchers: every matcher matches an empty label, so the silence would mute every alert; name at least one label value")
	}
	if size > silenceMaxBytes {
		return fmt.Errorf("silence: %d bytes of matchers, comment and created_by, at most %d", size, silenceMaxBytes)
	}
	if s.StartsAt.IsZero() {
		s.StartsAt = now
	}
	if s.EndsAt.IsZero() && s.UntilResolved == "" {
		return fmt.Errorf("ends_at: missing")
	}
	if !s.EndsAt.IsZero() && !s.EndsAt.After(s.StartsAt) {
		return fmt.Errorf("ends_at: not after starts_at")
	}
	if fresh && !s.EndsAt.IsZero() && !s.EndsAt.After(now) {
		return fmt.Errorf("ends_at: in the past")
	}
	if !s.EndsAt.IsZero() && s.EndsAt.Sub(s.StartsAt) > maxSilenceLength {
		return fmt.Errorf("ends_at: more than a year after starts_at")
	}
	if len(s.Comment) > 4096 || len(s.CreatedBy) > 256 {
		return fmt.Errorf("comment or created_by too long")
	}
	return nil
}

// matches reports whether the silence mutes labels at now.
func (s *Silence) matches(labels map[string]string, now time.Time) bool {
	if now.Before(s.StartsAt) || (!s.EndsAt.IsZero() && !now.Before(s.EndsAt)) {
		return false
	}
	for _, m := range s.Matchers {
		if ok, _ := path.Match(m.Value, labels[m.Name]); !ok {
			return false
		}
	}
	return true
}

// maxSilences bounds the store: a client with the token must not grow
// memory without limit either.
const maxSilences = 1000

// silenceStore holds silences; safe for concurrent use.
type silenceStore struct {
	mu   sync.Mutex
	list []*Silence
}

func newSilenceStore() *silenceStore { return &silenceStore{} }

func (st *silenceStore) add(s Silence) (string, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if len(st.list) >= maxSilences {
		return "", fmt.Errorf("too many silences (%d): delete some first", maxSilences)
	}
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	s.ID = hex.EncodeToString(b)
	st.list = append(st.list, &s)
	return s.ID, nil
}

func (st *silenceStore) remove(id string) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	i := slices.IndexFunc(st.list, func(s *Silence) bool { return s.ID == id })
	if i < 0 {
		return false
	}
	st.list = slices.Delete(st.list, i, i+1)
	return true
}

func (st *silenceStore) all() []Silence {
	st.mu.Lock()
	defer st.mu.Unlock()
	out := make([]Silence, len(st.list))
	for i, s := range st.list {
		out[i] = *s
	}
	return out
}

// muted returns the ID of a silence that mutes labels now, or "".
func (st *silenceStore) muted(labels map[string]string, fp string, now time.Time) string {
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, s := range st.list {
		if s.UntilResolved != "" && s.UntilResolved == fp && !now.Before(s.StartsAt) {
			return s.ID
		}
		if s.UntilResolved == "" && s.matches(labels, now) {
			return s.ID
		}
	}
	return ""
}

// expire drops silences that ended and acknowledgements of alerts that
// no longer fire.
func (st *silenceStore) expire(now time.Time, firing func(fp string) bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.list = slices.DeleteFunc(st.list, func(s *Silence) bool {
		if s.UntilResolved != "" {
			return !firing(s.UntilResolved)
		}
		return !s.EndsAt.After(now)
	})
}

func (st *silenceStore) replace(list []Silence) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.list = nil
	for i := range list {
		st.list = append(st.list, &list[i])
	}
}

// matchAll reports whether every key: glob in m matches labels.
func matchAll(m map[string]string, labels map[string]string) bool {
	for k, g := range m {
		if !glob(g, labels[k]) {
			return false
		}
	}
	return true
}

// sameLabels reports whether a and b agree on every label in keys.
func sameLabels(a, b map[string]string, keys []string) bool {
	for _, k := range keys {
		if a[k] != b[k] {
			return false
		}
	}
	return true
}

func joinKV(m map[string]string, keys []string) string {
	var parts []string
	for _, k := range keys {
		parts = append(parts, k+"="+m[k])
	}
	return strings.Join(parts, ",")
}
