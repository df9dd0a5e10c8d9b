package main

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/infergate/infergate/alert"
)

// TestStatusPageSameAccessAsReads: with an admin token configured, the
// status page answers without one, as the JSON reads it draws from do,
// while a write still needs the token; the page itself refuses writes.
// With nothing routed, /api/v1/routes answers empty lists (the page reads
// it) rather than 404.
func TestStatusPageSameAccessAsReads(t *testing.T) {
	a := &admin{
		gatherer: prometheus.NewRegistry(),
		series:   func() any { return []seriesDoc{} },
		alerts:   &alert.API{Token: "s3cret"},
	}
	h := a.handler()
	do := func(method, path string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(method, path, strings.NewReader("{}")))
		return rec
	}
	cases := []struct {
		method, path string
		code         int
		body         string
	}{
		{"GET", "/api/v1/series", 200, "[]"},
		{"GET", "/status/", 200, "<title>infergate status</title>"},
		{"GET", "/status/app.js", 200, "fetch("},
		{"GET", "/", 302, ""},
		{"GET", "/api/v1/routes", 200, `"routes": []`},
		{"POST", "/status/", 405, ""},
		{"POST", "/api/v1/silences", 401, "bearer token"},
	}
	for _, tc := range cases {
		rec := do(tc.method, tc.path)
		if rec.Code != tc.code || !strings.Contains(rec.Body.String(), tc.body) {
			t.Errorf("%s %s = %d, want %d with %q:\n%.300s", tc.method, tc.path, rec.Code, tc.code, tc.body, rec.Body)
		}
	}
}
