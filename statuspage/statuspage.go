package statuspage

import (
	"embed"
	"io/fs"
	"net/http"
)

//go:embed static
var static embed.FS

// Prefix is the path the page is served under; "/" and "/status"
// redirect to it. The page refers to its own files and to the API by
// relative URLs, so it also works behind a reverse proxy that mounts the
// admin listener under a path of its own.
const Prefix = "/status/"

// headers are set on every file. The policy only lets the page load its
// own files and fetch from its own origin: even a model name that found
// its way into the DOM as markup could run no script and load nothing.
// no-cache makes a browser revalidate, so an upgraded binary's page is
// the one shown.
var headers = map[string]string{
	"Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
		"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
	"X-Content-Type-Options": "nosniff",
	"Referrer-Policy":        "no-referrer",
	"Cache-Control":          "no-cache",
}

// Handler serves the embedded files under Prefix (Prefix itself is
// index.html). It answers GET and HEAD; any other method gets 405.
func Handler() http.Handler {
	sub, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embed directive guarantees the directory
	}
	files := http.StripPrefix(Prefix[:len(Prefix)-1], http.FileServerFS(sub))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "the status page is read-only", http.StatusMethodNotAllowed)
			return
		}
		for k, v := range headers {
			w.Header().Set(k, v)
		}
		files.ServeHTTP(w, r)
	})
}

// Register mounts the page on mux: Handler at Prefix, and redirects from
// "/" and "/status" to it, for GET and HEAD. Other methods on these paths
// get the mux's 405.
func Register(mux *http.ServeMux) {
	mux.Handle("GET "+Prefix, Handler())
	mux.HandleFunc("GET /{$}", toPage)
	mux.HandleFunc("GET /status", toPage)
}

// toPage redirects to the page by a relative Location ("status/" from "/"
// and from "/status" alike), so a path prefix added by a reverse proxy
// stays; http.Redirect would make it absolute and drop the prefix.
func toPage(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Location", "status/")
	w.WriteHeader(http.StatusFound)
}
