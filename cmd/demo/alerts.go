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
	Value       string            `json:"value"`
	Threshold   string            `json:"threshold"`
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
				announce(fmt.Sprintf("ALERT FIRING %s %s (%s): %s, threshold %s", a.Name, a.subject(), a.Severity, a.Value, a.Threshold))
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

// alertLine summarises the active alerts for the frame.
func alertLine(as []alertDoc) string {
	if len(as) == 0 {
		return "none"
	}
	var parts []string
	for _, a := range as {
		parts = append(parts, fmt.Sprintf("%s %s %s", strings.ToUpper(a.State), a.Name, a.subject()))
	}
	return strings.Join(parts, "; ")
}
