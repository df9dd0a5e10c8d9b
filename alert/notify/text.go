package notify

import (
	"maps"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Text renders m as concise plain text, the body of the slack, wecom,
// email and log integrations. The first line is the [Title]; then one
// line per alert:
//
//   - critical HighLatency model=resnet50 — p99 above SLO — p99 812ms over 120 calls
//     actions: fallback resnet50 -> resnet18
//
// Resolved alerts start with "[resolved]". Empty parts are left out.
func Text(m *Message) string {
	if m == nil {
		return ""
	}
	var b strings.Builder
	b.WriteString(Title(m))
	for i := range m.Alerts {
		a := &m.Alerts[i]
		b.WriteString("\n•")
		if !a.firing() {
			b.WriteString(" [resolved]")
		}
		for _, s := range []string{a.severity(), a.alertName()} {
			if s != "" {
				b.WriteByte(' ')
				b.WriteString(oneLine(s))
			}
		}
		if model := a.Labels["model"]; model != "" {
			b.WriteString(" model=")
			b.WriteString(oneLine(model))
		}
		summary := a.Annotations["summary"]
		if summary == "" {
			summary = a.Annotations["description"]
		}
		for _, s := range []string{summary, a.Evidence} {
			if s != "" {
				b.WriteString(" — ")
				b.WriteString(oneLine(s))
			}
		}
		if len(a.Actions) > 0 {
			b.WriteString("\n  actions: ")
			for j, act := range a.Actions {
				if j > 0 {
					b.WriteString("; ")
				}
				b.WriteString(oneLine(act))
			}
		}
	}
	return b.String()
}

// Title is the first line of [Text] and the e-mail subject:
// "[FIRING:2] resnet50 critical", the status, the number of alerts in that
// status and the group labels' values ordered by label name. A group
// without group labels is named by its alerts' common rule name.
func Title(m *Message) string {
	if m == nil {
		return ""
	}
	firing := 0
	for i := range m.Alerts {
		if m.Alerts[i].firing() {
			firing++
		}
	}
	status, n := StatusFiring, firing
	if m.Status == StatusResolved || (m.Status == "" && firing == 0) {
		status, n = StatusResolved, len(m.Alerts)-firing
	}
	var b strings.Builder
	b.WriteByte('[')
	b.WriteString(strings.ToUpper(status))
	b.WriteByte(':')
	b.WriteString(strconv.Itoa(n))
	b.WriteByte(']')
	if len(m.GroupLabels) > 0 {
		for _, k := range slices.Sorted(maps.Keys(m.GroupLabels)) {
			if v := m.GroupLabels[k]; v != "" {
				b.WriteByte(' ')
				b.WriteString(oneLine(v))
			}
		}
	} else if name := commonName(m.Alerts); name != "" {
		b.WriteByte(' ')
		b.WriteString(oneLine(name))
	}
	return b.String()
}

// commonName returns the rule name shared by all alerts, or "".
func commonName(as []Alert) string {
	if len(as) == 0 {
		return ""
	}
	name := as[0].alertName()
	for i := range as[1:] {
		if as[i+1].alertName() != name {
			return ""
		}
	}
	return name
}

// oneLine folds line breaks into spaces: one alert must stay one line, and
// an e-mail subject must never break the header.
func oneLine(s string) string {
	if !strings.ContainsAny(s, "\r\n") {
		return s
	}
	return strings.Join(strings.Fields(strings.NewReplacer("\r", " ", "\n", " ").Replace(s)), " ")
}

// ellipsis marks text that was cut.
const ellipsis = "…"

// truncate returns s cut to at most max bytes on a UTF-8 boundary, ending
// with an ellipsis when it was cut. It prefers to cut at a line break in
// the last quarter so that no alert line is left half-written.
func truncate(s string, max int) string {
	if len(s) <= max {
		return s
	}
	limit := max - len(ellipsis)
	if limit < 0 {
		return ""
	}
	cut := limit
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	if nl := strings.LastIndexByte(s[:cut], '\n'); nl >= limit*3/4 {
		cut = nl + 1
	}
	return s[:cut] + ellipsis
}
