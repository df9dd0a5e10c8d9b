package notify

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

type amAlert struct {
	Labels       map[string]string `json:"labels"`
	Annotations  map[string]string `json:"annotations"`
	StartsAt     time.Time         `json:"startsAt"`
	EndsAt       time.Time         `json:"endsAt"`
	GeneratorURL string            `json:"generatorURL"`
}

// amPeer is a fake Alertmanager that records POST /api/v2/alerts.
type amPeer struct {
	*httptest.Server
	mu    sync.Mutex
	posts [][]amAlert
	other []string // any other request
}

func newAMPeer(t *testing.T, status int) *amPeer {
	p := &amPeer{}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		defer p.mu.Unlock()
		if r.Method != http.MethodPost || r.URL.Path != "/api/v2/alerts" {
			p.other = append(p.other, r.Method+" "+r.URL.Path)
			http.NotFound(w, r)
			return
		}
		var as []amAlert
		dec := json.NewDecoder(r.Body)
		dec.DisallowUnknownFields()
		if err := dec.Decode(&as); err != nil {
			t.Errorf("decoding alerts: %v", err)
		}
		p.posts = append(p.posts, as)
		w.WriteHeader(status)
		io.WriteString(w, http.StatusText(status))
	}))
	t.Cleanup(p.Close)
	return p
}

func TestAlertmanagerNotify(t *testing.T) {
	a, b := newAMPeer(t, http.StatusOK), newAMPeer(t, http.StatusOK)
	now := t0.Add(30 * time.Second)
	n := &alertmanagerNotifier{
		cfg:    AlertmanagerConfig{URLs: []string{a.URL, b.URL + "/"}, Timeout: 5 * time.Second, ResendValidity: 4 * time.Minute},
		client: &http.Client{},
		now:    func() time.Time { return now },
	}
	if retryable, err := n.Notify(context.Background(), testMessage()); err != nil {
		t.Fatalf("Notify = %v (retryable %v)", err, retryable)
	}
	want := []amAlert{
		{
			Labels: map[string]string{"alertname": "HighLatency", "severity": "critical", "model": "resnet50"},
			Annotations: map[string]string{
				"summary":     "p99 above SLO",
				"description": "p99 latency of resnet50 is 812ms",
				"evidence":    "p99 812ms over 120 calls, baseline 95ms, GPU0 97%",
				"actions":     "fallback resnet50 -> resnet18",
			},
			StartsAt:     t0,
			EndsAt:       now.Add(4 * time.Minute), // firing: valid until re-sent
			GeneratorURL: "http://infergate:8080/alerts",
		},
		{
			Labels:       map[string]string{"alertname": "ErrorRate", "severity": "warning", "model": "resnet50"},
			Annotations:  map[string]string{"summary": "errors above 5%", "description": "error rate of resnet50"},
			StartsAt:     t0.Add(-time.Hour),
			EndsAt:       tEnds, // resolved: the real end
			GeneratorURL: "http://infergate:8080/alerts",
		},
	}
	for name, p := range map[string]*amPeer{"a": a, "b": b} {
		if len(p.posts) != 1 || len(p.other) != 0 {
			t.Errorf("peer %s got %d posts and %v; want exactly one POST /api/v2/alerts", name, len(p.posts), p.other)
			continue
		}
		if !reflect.DeepEqual(p.posts[0], want) {
			t.Errorf("peer %s got\n%+v\nwant\n%+v", name, p.posts[0], want)
		}
	}
}

func TestAlertmanagerPayloadAddsAlertname(t *testing.T) {
	m := &Message{Alerts: []Alert{{Name: "Down", Status: StatusResolved, Labels: map[string]string{"model": "m"}}}}
	var as []map[string]any
	if err := json.Unmarshal(AlertmanagerPayload(m, t0, time.Minute), &as); err != nil {
		t.Fatal(err)
	}
	if got := as[0]["labels"].(map[string]any)["alertname"]; got != "Down" {
		t.Errorf("alertname %v, want Down", got)
	}
	if got := as[0]["endsAt"]; got != "2026-03-01T12:00:00Z" {
		t.Errorf("resolved without EndsAt: endsAt %v, want now", got)
	}
	for _, k := range []string{"startsAt", "generatorURL"} {
		if _, ok := as[0][k]; ok {
			t.Errorf("%s sent although unset", k)
		}
	}
	if m.Alerts[0].Labels["alertname"] != "" {
		t.Error("the message's labels were modified")
	}
}

func TestAlertmanagerPeers(t *testing.T) {
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	for _, tc := range []struct {
		name      string
		statuses  []int // 0: connection refused
		ok        bool
		retryable bool
	}{
		{"one down", []int{0, 200}, true, false},
		{"one 500", []int{500, 200}, true, false},
		{"both down", []int{0, 0}, false, true},
		{"refused and 400", []int{0, 400}, false, true},
		{"both 400", []int{400, 400}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var urls []string
			for _, s := range tc.statuses {
				if s == 0 {
					urls = append(urls, down.URL)
				} else {
					urls = append(urls, newAMPeer(t, s).URL)
				}
			}
			n := &alertmanagerNotifier{cfg: AlertmanagerConfig{URLs: urls, Timeout: 5 * time.Second, ResendValidity: time.Minute},
				client: &http.Client{}, now: time.Now}
			retryable, err := n.Notify(context.Background(), testMessage())
			if (err == nil) != tc.ok || retryable != tc.retryable {
				t.Fatalf("Notify = %v, retryable %v; want ok %v, retryable %v", err, retryable, tc.ok, tc.retryable)
			}
			if err != nil {
				for _, u := range urls {
					if !strings.Contains(err.Error(), u) {
						t.Errorf("error %q does not name peer %s", err, u)
					}
				}
			}
		})
	}
}
