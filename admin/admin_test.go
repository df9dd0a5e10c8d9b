package admin

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/infergate/infergate/monitor"
	"github.com/infergate/infergate/proxy/route"
)

// TestStatusPageSameAccessAsReads: with an admin token configured, the
// status page answers without one, as the JSON reads it draws from do,
// while a write still needs the token; the page itself refuses writes.
// With nothing routed, /api/v1/routes answers empty lists (the page reads
// it) rather than 404.
func TestStatusPageSameAccessAsReads(t *testing.T) {
	r, err := route.NewRouter(route.RouterOptions{}) // nothing routed, as infergate builds it
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	a := &Server{
		Gatherer: prometheus.NewRegistry(),
		Monitor:  monitor.NewRegistry(monitor.Options{}),
		Alerts:   newEngine(t, ""),
		Token:    "s3cret",
		Router:   r,
	}
	h := a.Handler()
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
		{"GET", "/api/v1/routes", 200, `"breakers": []`},
		{"POST", "/api/v1/routes/unrouted", 401, "bearer token"},
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

// A route write whose body passes its cap is answered 413 with the limit,
// not 400 with a decoder's "unexpected EOF".
func TestRouteWriteBodyTooLarge(t *testing.T) {
	r, err := route.NewRouter(route.RouterOptions{Routes: []route.RouteConfig{{Model: "m", Fallback: &route.FallbackTarget{Model: "m2"}}}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	a := &Server{Gatherer: prometheus.NewRegistry(), Token: "t", Router: r}
	h := a.Handler()
	for _, tc := range []struct {
		body string
		code int
		want string
	}{
		{`{"route": "fallback"}` + strings.Repeat(" ", maxRouteBody), 413, "limit of 4096 bytes (4 KiB)"},
		{`{"route": `, 400, "body: want"},
		{`{"route": "fallback"}`, 200, `"model": "m"`},
	} {
		req := httptest.NewRequest("POST", "/api/v1/routes/m", strings.NewReader(tc.body))
		req.Header.Set("Authorization", "Bearer t")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != tc.code || !strings.Contains(rec.Body.String(), tc.want) {
			t.Errorf("body of %d bytes: %d %s, want %d with %q", len(tc.body), rec.Code, rec.Body, tc.code, tc.want)
		}
	}
}
