package main

import (
	"encoding/json"
	"net/http"
	"net/http/pprof"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/infergate/infergate/alert"
	"github.com/infergate/infergate/proxy"
	"github.com/infergate/infergate/statuspage"
)

// admin serves the HTTP admin listener: /metrics, /healthz, /readyz, the
// read-only JSON API and the status page over it. It never sits on the
// request path.
type admin struct {
	gatherer prometheus.Gatherer
	// ready returns the upstream's cached readiness (ready.go).
	ready func() readyState
	// draining flips /readyz to 503 the moment SIGTERM arrives, while calls
	// are still served for the drain delay, so a load balancer stops
	// sending new calls before the listener closes.
	draining atomic.Bool
	// series returns the JSON body of /api/v1/series.
	series func() any
	// batching returns the JSON body of /api/v1/batching (batching.go).
	batching func() any
	// models and gpus return the JSON bodies of /api/v1/models and
	// /api/v1/gpus (gpu_api.go).
	models, gpus func() any
	// slow serves /api/v1/slow (slow_api.go); nil: not served.
	slow slowSource
	// pprof adds Go's profiler endpoints.
	pprof bool
	// alerts serves /api/v1/alerts, rules, silences and baselines.
	alerts *alert.API
	// router serves /api/v1/routes (routes_api.go).
	router *proxy.Router // always built, empty while nothing is routed
	// reload serves POST /-/reload and /api/v1/status/config (reload.go).
	reload *reloader
}

func (a *admin) handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(a.gatherer, promhttp.HandlerOpts{EnableOpenMetrics: true}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", a.readyz)
	mux.HandleFunc("GET /api/v1/series", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, a.series())
	})
	if a.models != nil {
		mux.HandleFunc("GET /api/v1/models", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, http.StatusOK, a.models()) })
		mux.HandleFunc("GET /api/v1/gpus", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, http.StatusOK, a.gpus()) })
	}
	if a.slow != nil {
		mux.HandleFunc("GET /api/v1/slow", slowAPI(a.slow))
	}
	if a.batching != nil {
		mux.HandleFunc("GET /api/v1/batching", func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, http.StatusOK, a.batching())
		})
	}
	if a.alerts != nil {
		a.alerts.Register(mux)
	}
	a.routesAPI(mux)
	if a.reload != nil {
		guard := func(h http.HandlerFunc) http.HandlerFunc {
			return func(w http.ResponseWriter, r *http.Request) {
				writeJSON(w, http.StatusForbidden, map[string]string{"error": "writes are disabled: start infergate with --admin-token-file"})
			}
		}
		if a.alerts != nil {
			guard = a.alerts.Guard // the admin token, as every admin write
		}
		a.reload.register(mux, guard)
	}
	// The page only reads the endpoints above, so it is as open as they
	// are.
	statuspage.Register(mux)
	if a.pprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	return mux
}

// readyz answers 200 while the upstream answers its readiness probe and
// the process is not draining, 503 otherwise; the JSON body says why.
func (a *admin) readyz(w http.ResponseWriter, r *http.Request) {
	st := a.ready()
	if a.draining.Load() {
		st.Ready = false
		st.Reason = "draining: shutting down after SIGTERM"
	}
	code := http.StatusOK
	if !st.Ready {
		code = http.StatusServiceUnavailable
	}
	writeJSON(w, code, st)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}
