package statuspage

import (
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

func serve(method, path string) *httptest.ResponseRecorder {
	mux := http.NewServeMux()
	Register(mux)
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
	return rec
}

// TestFiles: each embedded file is served with its content type and the
// page's security headers, with no token; other methods are refused.
func TestFiles(t *testing.T) {
	cases := []struct {
		name, method, path string
		code               int
		ctype              string // prefix of Content-Type
		body               string // substring of the body
	}{
		{"page", "GET", "/status/", 200, "text/html; charset=utf-8", `<script src="app.js" defer></script>`},
		{"script", "GET", "/status/app.js", 200, "text/javascript; charset=utf-8", "async function poll()"},
		{"stylesheet", "GET", "/status/style.css", 200, "text/css; charset=utf-8", ":root"},
		{"icon", "GET", "/status/icon.svg", 200, "image/svg+xml", "<svg"},
		{"head", "HEAD", "/status/", 200, "text/html; charset=utf-8", ""},
		// FileServer's own canonical form: /index.html goes to ./
		{"index.html", "GET", "/status/index.html", 301, "", ""},
		{"missing file", "GET", "/status/nope.js", 404, "text/plain", "404"},
		// Read-only: the mux refuses every other method on the page's paths.
		{"POST page", "POST", "/status/", 405, "text/plain", ""},
		{"PUT script", "PUT", "/status/app.js", 405, "text/plain", ""},
		{"DELETE root", "DELETE", "/", 405, "text/plain", ""},
		{"POST /status", "POST", "/status", 405, "text/plain", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := serve(tc.method, tc.path)
			if rec.Code != tc.code {
				t.Fatalf("%s %s = %d, want %d\n%s", tc.method, tc.path, rec.Code, tc.code, rec.Body)
			}
			if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, tc.ctype) {
				t.Errorf("Content-Type = %q, want %q", ct, tc.ctype)
			}
			if !strings.Contains(rec.Body.String(), tc.body) {
				t.Errorf("body lacks %q:\n%.300s", tc.body, rec.Body)
			}
			if tc.code == 405 && rec.Header().Get("Allow") == "" {
				t.Error("405 without an Allow header")
			}
			if tc.code == 200 {
				for k, v := range headers {
					if got := rec.Header().Get(k); got != v {
						t.Errorf("%s = %q, want %q", k, got, v)
					}
				}
			}
		})
	}
}

// TestRedirects: "/" and "/status" lead to the page by a relative
// Location, which keeps a reverse proxy's path prefix.
func TestRedirects(t *testing.T) {
	for _, p := range []string{"/", "/status"} {
		rec := serve("GET", p)
		if rec.Code != http.StatusFound || rec.Header().Get("Location") != "status/" {
			t.Errorf("GET %s = %d Location %q, want 302 status/", p, rec.Code, rec.Header().Get("Location"))
		}
	}
	// Only "/" itself: other unknown paths stay 404, not the page.
	if rec := serve("GET", "/nothing-here"); rec.Code != http.StatusNotFound {
		t.Errorf("GET /nothing-here = %d, want 404", rec.Code)
	}
}

// TestHandlerRefusesWrites: Handler on its own (mounted without a method
// pattern) refuses writes too.
func TestHandlerRefusesWrites(t *testing.T) {
	rec := httptest.NewRecorder()
	Handler().ServeHTTP(rec, httptest.NewRequest("POST", "/status/", strings.NewReader("x")))
	if rec.Code != http.StatusMethodNotAllowed || rec.Header().Get("Allow") != "GET, HEAD" {
		t.Errorf("POST = %d Allow %q", rec.Code, rec.Header().Get("Allow"))
	}
}

// TestScriptWritesTextOnly: the page puts API strings (model names come
// from clients) into the DOM as text. No file may use an HTML sink, load
// anything from another origin, or carry inline script the policy would
// block anyway.
func TestScriptWritesTextOnly(t *testing.T) {
	sinks := regexp.MustCompile(`innerHTML|outerHTML|insertAdjacentHTML|document\.write|eval\(|new Function|setAttribute\(\s*["']on`)
	remote := regexp.MustCompile(`(?i)(src|href|url)\s*[=(]\s*["']?(https?:)?//`)
	inline := regexp.MustCompile(`(?i)<script>|<script [^>]*>[^<]|\son[a-z]+\s*=|style\s*=`)
	err := fs.WalkDir(static, "static", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := static.ReadFile(path)
		if err != nil {
			return err
		}
		s := string(b)
		if strings.HasSuffix(path, ".js") {
			if m := sinks.FindString(s); m != "" {
				t.Errorf("%s uses %q: put strings into the DOM as text", path, m)
			}
		}
		if m := remote.FindString(s); m != "" {
			t.Errorf("%s loads from another origin (%q): the page must work without internet", path, m)
		}
		if strings.HasSuffix(path, ".html") {
			if m := inline.FindString(s); m != "" {
				t.Errorf("%s has inline script or style (%q): the Content-Security-Policy blocks it", path, m)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
