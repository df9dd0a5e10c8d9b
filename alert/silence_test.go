package alert

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestSilenceValidateBounds(t *testing.T) {
	now := time.Date(2026, 11, 3, 14, 0, 0, 0, time.UTC)
	many := make([]Matcher, 2500)
	for i := range many {
		many[i] = Matcher{Name: fmt.Sprintf("l%d", i), Value: "v"}
	}
	ok := []Matcher{{Name: "alertname", Value: "HighP99"}}
	for _, tc := range []struct {
		name string
		s    Silence
		want string // "" valid
	}{
		{"ok", Silence{Matchers: ok, EndsAt: now.Add(time.Hour)}, ""},
		{"ok, a glob and a catch-all", Silence{Matchers: []Matcher{{Name: "model", Value: "res*"}, {Name: "x", Value: "*"}}, EndsAt: now.Add(time.Hour)}, ""},
		{"2,500 matchers", Silence{Matchers: many, EndsAt: now.Add(time.Hour)}, "matchers: 2500, at most 32"},
		{"match-all *", Silence{Matchers: []Matcher{{Name: "x", Value: "*"}}, EndsAt: now.Add(time.Hour)}, "would mute every alert"},
		{"match-all empty", Silence{Matchers: []Matcher{{Name: "x", Value: ""}, {Name: "model", Value: "*"}}, EndsAt: now.Add(time.Hour)}, "would mute every alert"},
		{"until 9999", Silence{Matchers: ok, EndsAt: time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)}, "ends_at: 9999-01-01T00:00:00Z is more than a year ahead"},
		{"a year and a minute", Silence{Matchers: ok, EndsAt: now.Add(MaxSilenceAhead + time.Minute)}, "more than a year ahead"},
		{"exactly a year", Silence{Matchers: ok, EndsAt: now.Add(MaxSilenceAhead)}, ""},
		{"long name", Silence{Matchers: []Matcher{{Name: strings.Repeat("a", 129), Value: "v"}}, EndsAt: now.Add(time.Hour)}, "matchers[0].name: longer than 128 bytes"},
		{"not a label name", Silence{Matchers: []Matcher{{Name: "a-b", Value: "v"}}, EndsAt: now.Add(time.Hour)}, "not a label name"},
		{"long value", Silence{Matchers: []Matcher{{Name: "a", Value: strings.Repeat("v", 1025)}}, EndsAt: now.Add(time.Hour)}, "matchers[0].value: longer than 1024 bytes"},
		// An acknowledgement mutes its one alert, whatever its matchers.
		{"ack", Silence{Matchers: []Matcher{{Name: "model", Value: ""}}, UntilResolved: "fp"}, ""},
	} {
		err := tc.s.Validate(now)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: err = %v, want %q", tc.name, err, tc.want)
		}
	}
}
