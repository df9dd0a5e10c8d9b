package notify

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestText(t *testing.T) {
	resolved := testMessage()
	resolved.Status = StatusResolved
	resolved.Alerts = resolved.Alerts[1:]
	noGroup := testMessage()
	noGroup.GroupLabels = nil
	noGroup.Alerts = noGroup.Alerts[:1]
	noGroup.Alerts[0].Annotations = map[string]string{"description": "multi\nline"}
	noGroup.Alerts[0].Evidence = ""
	noGroup.Alerts[0].Actions = nil
	for _, tc := range []struct {
		name string
		m    *Message
		want string
	}{
		{"firing", testMessage(), "[FIRING:1] resnet50\n" +
			"• critical HighLatency model=resnet50 — p99 above SLO — p99 812ms over 120 calls, baseline 95ms, GPU0 97%\n" +
			"  actions: fallback resnet50 -> resnet18\n" +
			"• [resolved] warning ErrorRate model=resnet50 — errors above 5%"},
		{"resolved", resolved, "[RESOLVED:1] resnet50\n" +
			"• [resolved] warning ErrorRate model=resnet50 — errors above 5%"},
		{"no group labels, description, no evidence", noGroup, "[FIRING:1] HighLatency\n" +
			"• critical HighLatency model=resnet50 — multi line"},
		{"empty", &Message{Status: StatusFiring}, "[FIRING:0]"},
		{"nil", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Text(tc.m); got != tc.want {
				t.Errorf("Text:\n%s\nwant:\n%s", got, tc.want)
			}
		})
	}
}

func TestTitleGroupLabelsSorted(t *testing.T) {
	m := &Message{Status: StatusFiring, GroupLabels: map[string]string{"severity": "critical", "model": "resnet50", "alertname": "HighLatency"},
		Alerts: []Alert{{Status: StatusFiring}, {Status: StatusFiring}}}
	if got, want := Title(m), "[FIRING:2] HighLatency resnet50 critical"; got != want {
		t.Errorf("Title = %q, want %q", got, want)
	}
}

func TestTruncate(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		max  int
		want string
	}{
		{"fits", "abc", 3, "abc"},
		{"ascii", "abcdefgh", 6, "abc…"},
		{"rune boundary", "ab€€", 7, "ab…"}, // € is 3 bytes: a cut at 4 lands inside the first
		{"line boundary", "line one is long\nline two is long", 24, "line one is long\n…"},
		{"line too early", "line one\nline two is long", 20, "line one\nline two…"},
		{"too small", "abcdef", 2, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := truncate(tc.in, tc.max)
			if got != tc.want {
				t.Errorf("truncate(%q, %d) = %q, want %q", tc.in, tc.max, got, tc.want)
			}
			if len(got) > tc.max || !utf8.ValidString(got) {
				t.Errorf("truncate(%q, %d) = %q: %d bytes, valid UTF-8 %v", tc.in, tc.max, got, len(got), utf8.ValidString(got))
			}
		})
	}
	// Every cut of a string of 1- to 4-byte runes stays valid.
	s := strings.Repeat("aé€😀", 50)
	for max := 3; max < len(s); max++ {
		if got := truncate(s, max); len(got) > max || !utf8.ValidString(got) || !strings.HasSuffix(got, "…") {
			t.Fatalf("truncate(_, %d) = %q", max, got)
		}
	}
}
