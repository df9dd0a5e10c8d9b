package notify

import (
	"context"
	"maps"
	"slices"
	"time"
)

// Alert statuses, the values of [Alert.Status] and [Message.Status].
const (
	StatusFiring   = "firing"
	StatusResolved = "resolved"
)

// Alert is one alert as a receiver sees it.
type Alert struct {
	Name         string            // rule name (also Labels["alertname"])
	Status       string            // "firing" or "resolved"
	Severity     string            // "warning" or "critical" (also Labels["severity"])
	Labels       map[string]string // identity: alertname, severity, model, ...
	Annotations  map[string]string // summary, description, ... (already rendered)
	StartsAt     time.Time
	EndsAt       time.Time // zero while firing
	Fingerprint  string    // stable id of the label set
	Evidence     string    // one human-readable line: values, call counts, baseline, GPU, hint
	Actions      []string  // actions taken, e.g. "fallback resnet50 -> resnet18"
	GeneratorURL string
}

// Message is what one flush of one alert group sends to one receiver.
// A Message handed to [Receiver.Send] or [Sender.Send] is read by worker
// goroutines later, so the caller must not modify it afterwards.
type Message struct {
	Receiver    string
	GroupKey    string
	GroupLabels map[string]string
	Status      string // "firing" when any alert fires, else "resolved"
	Alerts      []Alert
	ExternalURL string
}

// Notifier sends one message once. retryable reports whether a failure may
// succeed if tried again later (network errors, 5xx, 429); a 4xx (other
// than 429) is not retryable. Notify must return soon after ctx ends: a
// [Sender] cancels it to stop, and waits for it.
type Notifier interface {
	Notify(ctx context.Context, m *Message) (retryable bool, err error)
}

// NotifierFunc adapts a function to the [Notifier] interface.
type NotifierFunc func(ctx context.Context, m *Message) (retryable bool, err error)

// Notify calls f(ctx, m).
func (f NotifierFunc) Notify(ctx context.Context, m *Message) (bool, error) { return f(ctx, m) }

// alertName is the rule name, from the field or, failing that, the label.
func (a *Alert) alertName() string {
	if a.Name != "" {
		return a.Name
	}
	return a.Labels["alertname"]
}

// severity is the severity, from the field or, failing that, the label.
func (a *Alert) severity() string {
	if a.Severity != "" {
		return a.Severity
	}
	return a.Labels["severity"]
}

// firing reports whether the alert fires; an alert with an unknown status
// counts as firing so that it is never mistaken for good news.
func (a *Alert) firing() bool { return a.Status != StatusResolved }

// commonKV returns the pairs that every map in ms holds with the same
// value (Alertmanager's commonLabels and commonAnnotations). It is never
// nil so that it encodes as {} rather than null.
func commonKV(ms []map[string]string) map[string]string {
	out := map[string]string{}
	if len(ms) == 0 {
		return out
	}
	for k, v := range ms[0] {
		same := true
		for _, m := range ms[1:] {
			if w, ok := m[k]; !ok || w != v {
				same = false
				break
			}
		}
		if same {
			out[k] = v
		}
	}
	return out
}

// orEmpty returns m, or an empty map for nil so that JSON gets {}.
func orEmpty(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

// sortedKeys returns m's keys in order, for deterministic output.
func sortedKeys(m map[string]string) []string { return slices.Sorted(maps.Keys(m)) }
