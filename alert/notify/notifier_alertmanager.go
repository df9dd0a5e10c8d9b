package notify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"
)

// alertmanagerNotifier posts alerts to every peer of an Alertmanager
// cluster through API v2, as Prometheus does. Alertmanager does its own
// grouping, inhibition and routing; the cluster deduplicates.
type alertmanagerNotifier struct {
	cfg    AlertmanagerConfig
	client *http.Client
	now    func() time.Time
}

// postableAlert is an element of POST /api/v2/alerts.
type postableAlert struct {
	Labels       map[string]string `json:"labels"`
	Annotations  map[string]string `json:"annotations,omitempty"`
	StartsAt     time.Time         `json:"startsAt,omitzero"`
	EndsAt       time.Time         `json:"endsAt,omitzero"`
	GeneratorURL string            `json:"generatorURL,omitempty"` // Alertmanager rejects "" as not a URI
}

// AlertmanagerPayload returns the JSON array the alertmanager integration
// posts to /api/v2/alerts for m at time now. A firing alert's endsAt is
// now+validity, so Alertmanager resolves it by itself if infergate stops
// re-sending it; a resolved alert carries its real endsAt (now if unset).
// A non-empty evidence goes into annotations["evidence"], and actions,
// joined by "; ", into annotations["actions"].
func AlertmanagerPayload(m *Message, now time.Time, validity time.Duration) []byte {
	out := make([]postableAlert, len(m.Alerts))
	for i := range m.Alerts {
		a := &m.Alerts[i]
		ann := make(map[string]string, len(a.Annotations)+2)
		for k, v := range a.Annotations {
			ann[k] = v
		}
		if a.Evidence != "" {
			ann["evidence"] = a.Evidence
		}
		if len(a.Actions) > 0 {
			ann["actions"] = strings.Join(a.Actions, "; ")
		}
		labels := orEmpty(a.Labels)
		if labels["alertname"] == "" && a.Name != "" {
			// Alertmanager requires alertname to route and display.
			labels = make(map[string]string, len(a.Labels)+1)
			for k, v := range a.Labels {
				labels[k] = v
			}
			labels["alertname"] = a.Name
		}
		ends := now.Add(validity)
		if !a.firing() {
			ends = a.EndsAt
			if ends.IsZero() {
				ends = now
			}
		}
		out[i] = postableAlert{
			Labels:       labels,
			Annotations:  ann,
			StartsAt:     a.StartsAt.UTC(),
			EndsAt:       ends.UTC(),
			GeneratorURL: a.GeneratorURL,
		}
	}
	b, err := json.Marshal(out)
	if err != nil {
		panic(err) // only strings, maps of strings and times: cannot fail
	}
	return b
}

// Notify posts to every peer at once. It succeeds when at least one peer
// accepted, since they share alerts through gossip; otherwise it joins the
// peers' errors and is retryable if any of them was.
func (n *alertmanagerNotifier) Notify(ctx context.Context, m *Message) (bool, error) {
	body := AlertmanagerPayload(m, n.now(), n.cfg.ResendValidity)
	errs := make([]error, len(n.cfg.URLs))
	retry := make([]bool, len(n.cfg.URLs))
	var wg sync.WaitGroup
	for i, u := range n.cfg.URLs {
		wg.Go(func() {
			_, retry[i], errs[i] = postJSON(ctx, n.client, strings.TrimRight(u, "/")+"/api/v2/alerts", n.cfg.Timeout, nil, body)
			if errs[i] != nil {
				errs[i] = fmt.Errorf("alertmanager %s: %w", u, errs[i])
			}
		})
	}
	wg.Wait()
	retryable := false
	for i := range errs {
		if errs[i] == nil {
			return false, nil
		}
		retryable = retryable || retry[i]
	}
	return retryable, errors.Join(errs...)
}
