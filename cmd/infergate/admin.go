package main

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/pprof"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// admin serves the HTTP admin listener: /metrics, /healthz, /readyz and the
// read-only JSON API. It never sits on the request path.
type admin struct {
	gatherer prometheus.Gatherer
	upstream string
	// draining flips /readyz to 503 once SIGTERM arrives, so a load
	// balancer stops sending new calls while in-flight ones finish.
	draining atomic.Bool
	// series returns the JSON body of /api/v1/series.
	series func() any
	// batching returns the JSON body of /api/v1/batching (batching.go).
	batching func() any
	// models and gpus return the JSON bodies of /api/v1/models and
	// /api/v1/gpus (gpu_api.go).
	models, gpus func() any
	// pprof adds Go's profiler endpoints.
	pprof bool
	// dial checks that the upstream is reachable; replaced in tests.
	dial func(ctx context.Context, addr string) error
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
	if a.batching != nil {
		mux.HandleFunc("GET /api/v1/batching", func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, http.StatusOK, a.batching())
		})
	}
	if a.pprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	return mux
}

// readyz answers 200 when the upstream accepts a TCP connection within a
// second and the process is not draining.
func (a *admin) readyz(w http.ResponseWriter, r *http.Request) {
	if a.draining.Load() {
		http.Error(w, "draining\n", http.StatusServiceUnavailable)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), time.Second)
	defer cancel()
	dial := a.dial
	if dial == nil {
		dial = tcpDial
	}
	if err := dial(ctx, a.upstream); err != nil {
		http.Error(w, "upstream "+a.upstream+" unreachable: "+err.Error()+"\n", http.StatusServiceUnavailable)
		return
	}
	w.Write([]byte("ok\n"))
}

func tcpDial(ctx context.Context, addr string) error {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	return c.Close()
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}
