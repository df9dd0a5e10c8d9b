package notify

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"
)

// webhookNotifier posts Alertmanager's webhook format, so that anything
// that takes Alertmanager webhooks takes infergate's too.
type webhookNotifier struct {
	cfg    WebhookConfig
	client *http.Client
}

// webhookPayload is Alertmanager's webhook body, version 4, with
// infergate's evidence and actions added to each alert.
type webhookPayload struct {
	Version           string            `json:"version"`
	GroupKey          string            `json:"groupKey"`
	TruncatedAlerts   int               `json:"truncatedAlerts"`
	Status            string            `json:"status"`
	Receiver          string            `json:"receiver"`
	GroupLabels       map[string]string `json:"groupLabels"`
	CommonLabels      map[string]string `json:"commonLabels"`
	CommonAnnotations map[string]string `json:"commonAnnotations"`
	ExternalURL       string            `json:"externalURL"`
	Alerts            []webhookAlert    `json:"alerts"`
}

type webhookAlert struct {
	Status       string            `json:"status"`
	Labels       map[string]string `json:"labels"`
	Annotations  map[string]string `json:"annotations"`
	StartsAt     time.Time         `json:"startsAt"`
	EndsAt       time.Time         `json:"endsAt"` // zero encodes as 0001-01-01T00:00:00Z, as in Alertmanager
	GeneratorURL string            `json:"generatorURL"`
	Fingerprint  string            `json:"fingerprint"`
	Evidence     string            `json:"evidence,omitempty"`
	Actions      []string          `json:"actions,omitempty"`
}

// WebhookPayload returns the JSON body the webhook integration posts for
// m: Alertmanager's webhook format (version 4) with each alert's evidence
// and actions added.
func WebhookPayload(m *Message) []byte {
	p := webhookPayload{
		Version:     "4",
		GroupKey:    m.GroupKey,
		Status:      m.Status,
		Receiver:    m.Receiver,
		GroupLabels: orEmpty(m.GroupLabels),
		ExternalURL: m.ExternalURL,
		Alerts:      make([]webhookAlert, len(m.Alerts)),
	}
	labels := make([]map[string]string, len(m.Alerts))
	annotations := make([]map[string]string, len(m.Alerts))
	for i := range m.Alerts {
		a := &m.Alerts[i]
		labels[i], annotations[i] = orEmpty(a.Labels), orEmpty(a.Annotations)
		p.Alerts[i] = webhookAlert{
			Status:       a.Status,
			Labels:       labels[i],
			Annotations:  annotations[i],
			StartsAt:     a.StartsAt.UTC(),
			EndsAt:       a.EndsAt.UTC(),
			GeneratorURL: a.GeneratorURL,
			Fingerprint:  a.Fingerprint,
			Evidence:     a.Evidence,
			Actions:      a.Actions,
		}
	}
	p.CommonLabels = commonKV(labels)
	p.CommonAnnotations = commonKV(annotations)
	b, err := json.Marshal(p)
	if err != nil {
		panic(err) // only strings, maps of strings and times: cannot fail
	}
	return b
}

// Notify posts the message once.
func (n *webhookNotifier) Notify(ctx context.Context, m *Message) (bool, error) {
	h := make(http.Header, len(n.cfg.Headers)+1)
	for k, v := range n.cfg.Headers {
		h.Set(k, v)
	}
	if n.cfg.BearerTokenFile != "" {
		tok, err := os.ReadFile(n.cfg.BearerTokenFile)
		if err != nil {
			return false, fmt.Errorf("webhook bearer_token_file: %w", err)
		}
		h.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
	}
	_, retryable, err := postJSON(ctx, n.client, n.cfg.URL, n.cfg.Timeout, h, WebhookPayload(m))
	if err != nil {
		return retryable, fmt.Errorf("webhook: %w", err)
	}
	return false, nil
}
