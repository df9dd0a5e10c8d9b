// Package admin serves infergate's admin listener: /metrics, /healthz,
// /readyz, the JSON API under /api/v1 (series, slow calls, models and
// GPUs, batching, routes, alerts, rules, silences, baselines), the reload
// endpoints and the status page over them. It never sits on the request
// path: it reads the parts it shows, and its writes (silences, acks,
// forced routes, reloads) need the admin token.
package admin

import (
	"crypto/subtle"
	"encoding/json"
	"net/http"
	"net/http/pprof"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/infergate/infergate/alert"
	"github.com/infergate/infergate/batcher"
	"github.com/infergate/infergate/monitor"
	"github.com/infergate/infergate/monitor/business"
	"github.com/infergate/infergate/monitor/correlate"
	"github.com/infergate/infergate/monitor/gpu"
	"github.com/infergate/infergate/proxy/flowstats"
	"github.com/infergate/infergate/proxy/route"
	"github.com/infergate/infergate/statuspage"
)

// Server is the admin listener's handler and what it shows. Fields left
// nil leave their endpoints out.
type Server struct {
	Gatherer prometheus.Gatherer
	// Ready returns the upstream's cached readiness.
	Ready func() ReadyState
	// Monitor serves /api/v1/series and /api/v1/slow, and the version
	// comparison of /api/v1/models.
	Monitor *monitor.Registry
	// Batcher is shown on /api/v1/batching; nil shows no model batched.
	Batcher *batcher.Batcher
	// GPUs and Correlator serve /api/v1/gpus and /api/v1/models.
	GPUs       *gpu.Hub
	Correlator *correlate.Correlator
	// Business adds each model's business metric correlations to
	// /api/v1/models and the reads' health to /api/v1/status.
	Business *business.Hub
	// Cost serves /api/v1/cost.
	Cost *correlate.Attributor
	// Pprof adds Go's profiler endpoints.
	Pprof bool
	// Alerts serves /api/v1/alerts, rules, silences and baselines.
	Alerts *alert.Engine
	// Token is the bearer token every write needs; "" refuses writes
	// with 403 and says how to configure one.
	Token string
	// Router serves /api/v1/routes; infergate always builds one, empty
	// while nothing is routed.
	Router *route.Router
	// Flow and FlowTenants are flow control's gates and tenants on
	// /api/v1/flow; nil none.
	Flow        func() []flowstats.GateStatus
	FlowTenants func() []flowstats.TenantStatus
	// Releases serves /api/v1/releases; nil leaves it out.
	Releases Releases
	// Reload answers POST /-/reload (a write) and StatusConfig GET
	// /api/v1/status/config.
	Reload, StatusConfig http.HandlerFunc

	// draining flips /readyz to 503 the moment SIGTERM arrives, while calls
	// are still served for the drain delay, so a load balancer stops
	// sending new calls before the listener closes.
	draining atomic.Bool
}

// ReadyState is one readiness verdict: the JSON body of /readyz.
type ReadyState struct {
	Ready bool `json:"ready"`
	// Reason says why not (or, when ready, what answered).
	Reason   string `json:"reason"`
	Upstream string `json:"upstream"`
	// Probe is the RPC that decided: grpc.health.v1, kserve.ServerReady,
	// tfserving.GetModelMetadata or tcp.
	Probe     string    `json:"probe,omitempty"`
	CheckedAt time.Time `json:"checked_at"`
	// RecentCalls and RecentFailed count the proxied calls of the last few
	// seconds and those the upstream failed (server errors).
	RecentCalls  uint64 `json:"recent_calls"`
	RecentFailed uint64 `json:"recent_failed"`
}

// Drain makes /readyz answer 503 from now on: the process is shutting
// down.
func (a *Server) Drain() { a.draining.Store(true) }

// Handler is the admin listener's handler.
func (a *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(a.Gatherer, promhttp.HandlerOpts{EnableOpenMetrics: true}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("ok\n"))
	})
	if a.Ready != nil {
		mux.HandleFunc("GET /readyz", a.readyz)
	}
	if a.Monitor != nil {
		mux.HandleFunc("GET /api/v1/series", func(w http.ResponseWriter, r *http.Request) {
			WriteJSON(w, http.StatusOK, seriesJSON(a.Monitor.Snapshot()))
		})
		mux.HandleFunc("GET /api/v1/slow", slowAPI(a.Monitor))
	}
	if a.Correlator != nil {
		mux.HandleFunc("GET /api/v1/models", func(w http.ResponseWriter, r *http.Request) { WriteJSON(w, http.StatusOK, a.modelsJSON()) })
	}
	// /api/v1/status is the health of what infergate reads from
	// elsewhere; a Prometheus that is down shows here, not on the calls.
	mux.HandleFunc("GET /api/v1/status", func(w http.ResponseWriter, r *http.Request) { WriteJSON(w, http.StatusOK, a.statusJSON()) })
	if a.Cost != nil {
		mux.HandleFunc("GET /api/v1/cost", func(w http.ResponseWriter, r *http.Request) { WriteJSON(w, http.StatusOK, a.Cost.Report()) })
	}
	if a.GPUs != nil {
		mux.HandleFunc("GET /api/v1/gpus", func(w http.ResponseWriter, r *http.Request) { WriteJSON(w, http.StatusOK, gpusJSON(a.GPUs.State())) })
	}
	mux.HandleFunc("GET /api/v1/batching", func(w http.ResponseWriter, r *http.Request) {
		WriteJSON(w, http.StatusOK, batchingJSON(a.Batcher))
	})
	if a.Alerts != nil {
		a.alertsAPI(mux)
	}
	if a.Router != nil {
		a.routesAPI(mux)
	}
	if a.Releases != nil {
		a.releasesAPI(mux)
	}
	if a.Reload != nil {
		mux.HandleFunc("POST /-/reload", a.Guard(a.Reload))
	}
	if a.StatusConfig != nil {
		mux.HandleFunc("GET /api/v1/status/config", a.StatusConfig)
	}
	// The page only reads the endpoints above, so it is as open as they
	// are.
	statuspage.Register(mux)
	if a.Pprof {
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
func (a *Server) readyz(w http.ResponseWriter, r *http.Request) {
	st := a.Ready()
	if a.draining.Load() {
		st.Ready = false
		st.Reason = "draining: shutting down after SIGTERM"
	}
	code := http.StatusOK
	if !st.Ready {
		code = http.StatusServiceUnavailable
	}
	WriteJSON(w, code, st)
}

// Guard guards a state-changing handler with the bearer token: every
// admin write goes through it.
func (a *Server) Guard(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if a.Token == "" {
			writeError(w, http.StatusForbidden, "writes are disabled: start infergate with --admin-token-file FILE (a file holding a secret token) and send Authorization: Bearer <token>")
			return
		}
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(a.Token)) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="infergate"`)
			writeError(w, http.StatusUnauthorized, "missing or wrong bearer token")
			return
		}
		h(w, r)
	}
}

// WriteJSON writes v as the indented JSON body of a code answer.
func WriteJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func writeError(w http.ResponseWriter, code int, msg string) {
	WriteJSON(w, code, map[string]string{"error": msg})
}

// statusDoc is the body of /api/v1/status.
type statusDoc struct {
	// BusinessMetrics is every business metric's last success and last
	// error, in configuration order; [] when none is configured.
	BusinessMetrics []business.Status `json:"business_metrics"`
}

func (a *Server) statusJSON() statusDoc {
	d := statusDoc{BusinessMetrics: []business.Status{}}
	if a.Business != nil {
		d.BusinessMetrics = append(d.BusinessMetrics, a.Business.Status()...)
	}
	return d
}
