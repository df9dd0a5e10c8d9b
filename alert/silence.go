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

// Bounds of a silence: a token holder must not be able to grow memory,
// the state file or the cost of evaluation without limit (maxSilences
// bounds their number).
const (
	// MaxSilenceMatchers is the most matchers one silence may have.
	MaxSilenceMatchers = 32
	// MaxMatcherName and MaxMatcherValue bound a matcher's label name and
	// glob, in bytes.
	MaxMatcherName  = 128
	MaxMatcherValue = 1024
	// MaxSilenceAhead is how far ahead of now a silence may end: a year.
	MaxSilenceAhead = 365 * 24 * time.Hour
	// MaxSilenceBytes bounds a silence's matchers, comment and author
	// together, so 1,000 silences fit the state file's size limit.
	MaxSilenceBytes = 8 << 10
)

// Validate checks a silence, from the API or from a state file, at now,
// and fills a missing StartsAt with now. It refuses: no matchers or more
// than MaxSilenceMatchers; a label name that is not one
// ([a-zA-Z_][a-zA-Z0-9_]*, at most MaxMatcherName bytes); a bad glob or
// one longer than MaxMatcherValue; a silence whose every matcher matches
// the empty string (it would mute every alert: like Alertmanager, at
// least one matcher must not match ""), unless it acknowledges one alert
// (UntilResolved: it mutes that alert alone); an EndsAt missing, not after
// StartsAt or more than MaxSilenceAhead after now.
func (s *Silence) Validate(now time.Time) error {
	if len(s.Matchers) == 0 {
		return fmt.Errorf("matchers: at least one is required")
	}
	if len(s.Matchers) > MaxSilenceMatchers {
		return fmt.Errorf("matchers: %d, at most %d", len(s.Matchers), MaxSilenceMatchers)
	}
	matchesAll := true
	size := len(s.Comment) + len(s.CreatedBy)
	for i, m := range s.Matchers {
		size += len(m.Name) + len(m.Value)
		switch {
		case m.Name == "":
			return fmt.Errorf("matchers[%d].name: missing", i)
		case len(m.Name) > MaxMatcherName:
			return fmt.Errorf("matchers[%d].name: longer than %d bytes", i, MaxMatcherName)
		case !labelName(m.Name):
			return fmt.Errorf("matchers[%d].name: %q is not a label name ([a-zA-Z_][a-zA-Z0-9_]*)", i, m.Name)
		case len(m.Value) > MaxMatcherValue:
			return fmt.Errorf("matchers[%d].value: longer than %d bytes", i, MaxMatcherValue)
		}
		empty, err := path.Match(m.Value, "")
		if err != nil {
			return fmt.Errorf("matchers[%d].value: bad glob %q", i, m.Value)
		}
		matchesAll = matchesAll && empty
	}
	if size > MaxSilenceBytes {
		return fmt.Errorf("silence: %d bytes of matchers, comment and created_by, at most %d", size, MaxSilenceBytes)
	}
	if matchesAll && s.UntilResolved == "" {
		return fmt.Errorf("matchers: every matcher matches the empty string, so the silence would mute every alert; give at least one a value that does not (e.g. alertname: HighP99)")
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
	if limit := now.Add(MaxSilenceAhead); s.EndsAt.After(limit) {
		return fmt.Errorf("ends_at: %s is more than a year ahead (at most %s)", s.EndsAt.Format(time.RFC3339), limit.Format(time.RFC3339))
	}
	if len(s.Comment) > 4096 || len(s.CreatedBy) > 256 {
		return fmt.Errorf("comment or created_by too long")
	}
	return nil
}

// labelName reports whether s is a Prometheus label name.
func labelName(s string) bool {
	for i, c := range s {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return s != ""
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
