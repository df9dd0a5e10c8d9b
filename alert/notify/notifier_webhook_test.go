package notify

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestWebhookNotify(t *testing.T) {
	type gotAlert struct {
		Status       string            `json:"status"`
		Labels       map[string]string `json:"labels"`
		Annotations  map[string]string `json:"annotations"`
		StartsAt     string            `json:"startsAt"`
		EndsAt       string            `json:"endsAt"`
		GeneratorURL string            `json:"generatorURL"`
		Fingerprint  string            `json:"fingerprint"`
		Evidence     string            `json:"evidence"`
		Actions      []string          `json:"actions"`
	}
	type gotBody struct {
		Version           string            `json:"version"`
		GroupKey          string            `json:"groupKey"`
		TruncatedAlerts   *int              `json:"truncatedAlerts"`
		Status            string            `json:"status"`
		Receiver          string            `json:"receiver"`
		GroupLabels       map[string]string `json:"groupLabels"`
		CommonLabels      map[string]string `json:"commonLabels"`
		CommonAnnotations map[string]string `json:"commonAnnotations"`
		ExternalURL       string            `json:"externalURL"`
		Alerts            []gotAlert        `json:"alerts"`
	}
	var (
		body   gotBody
		header http.Header
		method string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		method, header = r.Method, r.Header
		dec := json.NewDecoder(r.Body)
		dec.DisallowUnknownFields()
		if err := dec.Decode(&body); err != nil {
			t.Errorf("decoding body: %v", err)
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	n := &webhookNotifier{cfg: WebhookConfig{URL: srv.URL + "/hook", Timeout: 5 * time.Second,
		Headers: map[string]string{"X-Tenant": "ml"}, BearerTokenFile: tokenFile}, client: srv.Client()}
	if retryable, err := n.Notify(context.Background(), testMessage()); err != nil {
		t.Fatalf("Notify = %v (retryable %v)", err, retryable)
	}
	if method != http.MethodPost {
		t.Errorf("method %s", method)
	}
	for k, want := range map[string]string{
		"Content-Type":  "application/json",
		"X-Tenant":      "ml",
		"Authorization": "Bearer s3cret",
	} {
		if got := header.Get(k); got != want {
			t.Errorf("header %s = %q, want %q", k, got, want)
		}
	}
	zero := 0
	want := gotBody{
		Version:         "4",
		GroupKey:        `{}:{model="resnet50"}`,
		TruncatedAlerts: &zero,
		Status:          "firing",
		Receiver:        "oncall",
		GroupLabels:     map[string]string{"model": "resnet50"},
		CommonLabels:    map[string]string{"model": "resnet50"},
		// Both alerts have a summary and a description, but different ones.
		CommonAnnotations: map[string]string{},
		ExternalURL:       "http://infergate:8080",
		Alerts: []gotAlert{
			{
				Status:       "firing",
				Labels:       map[string]string{"alertname": "HighLatency", "severity": "critical", "model": "resnet50"},
				Annotations:  map[string]string{"summary": "p99 above SLO", "description": "p99 latency of resnet50 is 812ms"},
				StartsAt:     "2026-03-01T12:00:00Z",
				EndsAt:       "0001-01-01T00:00:00Z",
				GeneratorURL: "http://infergate:8080/alerts",
				Fingerprint:  "a1b2c3",
				Evidence:     "p99 812ms over 120 calls, baseline 95ms, GPU0 97%",
				Actions:      []string{"fallback resnet50 -> resnet18"},
			},
			{
				Status:       "resolved",
				Labels:       map[string]string{"alertname": "ErrorRate", "severity": "warning", "model": "resnet50"},
				Annotations:  map[string]string{"summary": "errors above 5%", "description": "error rate of resnet50"},
				StartsAt:     "2026-03-01T11:00:00Z",
				EndsAt:       "2026-03-01T12:10:00Z",
				GeneratorURL: "http://infergate:8080/alerts",
				Fingerprint:  "d4e5f6",
			},
		},
	}
	if !reflect.DeepEqual(body, want) {
		t.Errorf("body\n%+v\nwant\n%+v", body, want)
	}
}

func TestWebhookCommonLabels(t *testing.T) {
	m := &Message{Alerts: []Alert{
		{Labels: map[string]string{"alertname": "A", "model": "m", "severity": "critical"}, Annotations: map[string]string{"runbook": "r"}},
		{Labels: map[string]string{"alertname": "A", "model": "m", "severity": "warning"}, Annotations: map[string]string{"runbook": "r"}},
		{Labels: map[string]string{"alertname": "A", "model": "m"}, Annotations: map[string]string{"runbook": "r", "x": "y"}},
	}}
	var p struct {
		CommonLabels      map[string]string `json:"commonLabels"`
		CommonAnnotations map[string]string `json:"commonAnnotations"`
		GroupLabels       map[string]string `json:"groupLabels"`
	}
	if err := json.Unmarshal(WebhookPayload(m), &p); err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"alertname": "A", "model": "m"}; !reflect.DeepEqual(p.CommonLabels, want) {
		t.Errorf("commonLabels %v, want %v", p.CommonLabels, want)
	}
	if want := map[string]string{"runbook": "r"}; !reflect.DeepEqual(p.CommonAnnotations, want) {
		t.Errorf("commonAnnotations %v, want %v", p.CommonAnnotations, want)
	}
	if p.GroupLabels == nil {
		t.Error("groupLabels is null, want {}")
	}
}

// TestHTTPStatusRetryable covers the classification every HTTP
// integration shares.
func TestHTTPStatusRetryable(t *testing.T) {
	for _, tc := range []struct {
		code      int
		ok        bool
		retryable bool
	}{
		{200, true, false},
		{202, true, false},
		{400, false, false},
		{401, false, false},
		{404, false, false},
		{413, false, false},
		{429, false, true},
		{500, false, true},
		{502, false, true},
		{503, false, true},
	} {
		t.Run(http.StatusText(tc.code), func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
				w.WriteHeader(tc.code)
				io.WriteString(w, "upstream says no")
			}))
			defer srv.Close()
			n := &webhookNotifier{cfg: WebhookConfig{URL: srv.URL, Timeout: 5 * time.Second}, client: srv.Client()}
			retryable, err := n.Notify(context.Background(), testMessage())
			if (err == nil) != tc.ok || retryable != tc.retryable {
				t.Errorf("Notify = %v, retryable %v; want ok %v, retryable %v", err, retryable, tc.ok, tc.retryable)
			}
			if err != nil && !strings.Contains(err.Error(), "upstream says no") {
				t.Errorf("error %q does not quote the response", err)
			}
		})
	}
}

// TestWebhookNetworkErrors: refused connections and timeouts are
// retryable, and the URL (which may hold a secret) stays out of the error.
func TestWebhookNetworkErrors(t *testing.T) {
	hang := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-hang }))
	defer slow.Close()
	defer close(hang)
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	for _, tc := range []struct {
		name string
		url  string
	}{
		{"refused", down.URL + "/hook?key=topsecret"},
		{"timeout", slow.URL + "/hook?key=topsecret"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := &webhookNotifier{cfg: WebhookConfig{URL: tc.url, Timeout: 50 * time.Millisecond}, client: &http.Client{}}
			retryable, err := n.Notify(context.Background(), testMessage())
			if err == nil || !retryable {
				t.Fatalf("Notify = %v, retryable %v; want a retryable error", err, retryable)
			}
			if strings.Contains(err.Error(), "topsecret") {
				t.Errorf("error %q leaks the URL", err)
			}
		})
	}
	slow.CloseClientConnections()
}

func TestWebhookBearerFileMissing(t *testing.T) {
	n := &webhookNotifier{cfg: WebhookConfig{URL: "http://127.0.0.1:1", Timeout: time.Second,
		BearerTokenFile: filepath.Join(t.TempDir(), "absent")}, client: &http.Client{}}
	if retryable, err := n.Notify(context.Background(), testMessage()); err == nil || retryable {
		t.Errorf("Notify = %v, retryable %v; want a permanent error", err, retryable)
	}
}
