package alert

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
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

func TestSilenceAPIBodies(t *testing.T) {
	r := newRig(t, &Config{Rules: []RuleConfig{thresholdRule()}})
	mux := http.NewServeMux()
	(&API{Engine: r.e, Token: "t"}).Register(mux)
	post := func(path string, body []byte) *httptest.ResponseRecorder {
		req := httptest.NewRequest("POST", path, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer t")
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		return rec
	}
	// A body over the cap: 413 naming the limit, not 400 "unexpected EOF".
	big, _ := json.Marshal(Silence{Matchers: []Matcher{{Name: "alertname", Value: "x"}}, EndsAt: r.c.t.Add(time.Hour), Comment: strings.Repeat("c", MaxSilenceBody)})
	if rec := post("/api/v1/silences", big); rec.Code != http.StatusRequestEntityTooLarge || !strings.Contains(rec.Body.String(), "limit of 65536 bytes (64 KiB)") {
		t.Errorf("big silence: %d %s", rec.Code, rec.Body)
	}
	if rec := post("/api/v1/alerts/fp/ack", bytes.Repeat([]byte(" "), maxAckBody+1)); rec.Code != http.StatusRequestEntityTooLarge || !strings.Contains(rec.Body.String(), "16 KiB") {
		t.Errorf("big ack: %d %s", rec.Code, rec.Body)
	}
	// Refused by validation: 400 with the reason; none stored.
	for _, s := range []Silence{
		{Matchers: []Matcher{{Name: "x", Value: "*"}}, EndsAt: r.c.t.Add(time.Hour)},
		{Matchers: []Matcher{{Name: "alertname", Value: "x"}}, EndsAt: time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)},
	} {
		b, _ := json.Marshal(s)
		if rec := post("/api/v1/silences", b); rec.Code != http.StatusBadRequest {
			t.Errorf("%s: %d %s", b, rec.Code, rec.Body)
		}
	}
	if n := len(r.e.Silences()); n != 0 {
		t.Errorf("%d silences stored, want 0", n)
	}
	good, _ := json.Marshal(Silence{Matchers: []Matcher{{Name: "alertname", Value: "HighP99"}}, EndsAt: r.c.t.Add(time.Hour)})
	if rec := post("/api/v1/silences", good); rec.Code != http.StatusOK {
		t.Errorf("good silence: %d %s", rec.Code, rec.Body)
	}
	// An empty ack body is allowed (who and why are optional).
	if rec := post("/api/v1/alerts/nosuch/ack", nil); rec.Code != http.StatusNotFound {
		t.Errorf("empty ack body: %d %s", rec.Code, rec.Body)
	}
}
