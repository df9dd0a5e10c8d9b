package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
)

// alertDoc is the part of /api/v1/alerts the demo shows.
type alertDoc struct {
	Name        string            `json:"name"`
	Fingerprint string            `json:"fingerprint"`
	State       string            `json:"state"`
	Severity    string            `json:"severity"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
	Value       string            `json:"value"`
	Threshold   string            `json:"threshold"`
	// ResolvesAt is when a firing alert whose condition no longer holds
	// resolves if it stays so.
	ResolvesAt time.Time `json:"resolves_at"`
}

// summary is the alert's summary annotation, the words infergate's
// notifications and status page use ("resnet50: p99 31.2ms at 21:50:36,
// over its baseline bound 24.1ms; now ..."), or its subject and value
// when it has none.
func (a alertDoc) summary() string {
	if s := a.Annotations["summary"]; s != "" {
		return s
	}
	return fmt.Sprintf("%s: %s, threshold %s", a.subject(), a.Value, a.Threshold)
}

func (a alertDoc) subject() string {
	if m := a.Labels["model"]; m != "" {
		return m
	}
	return "gpu " + a.Labels["gpu"]
}

func fetchAlerts(ctx context.Context, hc *http.Client, admin string) ([]alertDoc, error) {
	body, err := httpGet(ctx, hc, "http://"+admin+"/api/v1/alerts")
	if err != nil {
		return nil, err
	}
	defer body.Close()
	var v struct {
		Alerts []alertDoc `json:"alerts"`
	}
	if err := json.NewDecoder(body).Decode(&v); err != nil {
		return nil, fmt.Errorf("alerts: %w", err)
	}
	return v.Alerts, nil
}

// watchAlerts polls infergate's alerts every second and announces each
// one that starts firing and each that resolves, so the demo shows the
// built-in rules catching the injected fault and letting go of it.
func watchAlerts(ctx context.Context, hc *http.Client, admin string, announce func(string)) {
	firing := map[string]alertDoc{}
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		actx, cancel := context.WithTimeout(ctx, 2*time.Second)
		as, err := fetchAlerts(actx, hc, admin)
		cancel()
		if err != nil {
			continue
		}
		now := map[string]bool{}
		for _, a := range as {
			if a.State != "firing" {
				continue
			}
			now[a.Fingerprint] = true
			if _, ok := firing[a.Fingerprint]; !ok {
				firing[a.Fingerprint] = a
				announce(fmt.Sprintf("ALERT FIRING %s (%s) %s", a.Name, a.Severity, a.summary()))
			}
		}
		var gone []string
		for fp := range firing {
			if !now[fp] {
				gone = append(gone, fp)
			}
		}
		slices.Sort(gone)
		for _, fp := range gone {
			a := firing[fp]
			delete(firing, fp)
			announce(fmt.Sprintf("ALERT RESOLVED %s %s", a.Name, a.subject()))
		}
	}
}

// alertLines are the frame's "alerts:" lines: each active alert with its
// summary, wrapped to the screen.
func alertLines(as []alertDoc) string {
	if len(as) == 0 {
		return "alerts: none\n"
	}
	var b strings.Builder
	for i, a := range as {
		prefix := "alerts: "
		if i > 0 {
			prefix = strings.Repeat(" ", len(prefix))
		}
		b.WriteString(wrap(prefix, fmt.Sprintf("%s %s %s", strings.ToUpper(a.State), a.Name, a.summary()), " "))
	}
	return b.String()
}

// recovering is what the hints line says of a model whose latency alert
// fires while its condition no longer holds: the hints read a shorter
// window, and a line saying nothing is up beside an alert that fires
// would contradict it. elapsed turns a time into the demo's clock.
func recovering(as []alertDoc, elapsed func(time.Time) time.Duration) map[string]string {
	out := map[string]string{}
	for _, a := range as {
		m := a.Labels["model"]
		if a.State != "firing" || m == "" || a.Labels["kind"] != "latency" {
			continue
		}
		if a.ResolvesAt.IsZero() {
			out[m] = "alert " + a.Name + " firing"
			continue
		}
		out[m] = "recovering: alert holds until " + elapsed(a.ResolvesAt).Truncate(time.Second).String()
	}
	return out
}
