package admin

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/infergate/infergate/proxy/flowstats"
	"github.com/infergate/infergate/proxy/route"
)

// routesAPI serves GET /api/v1/routes (each routed model's route, breaker
// and why; every breaker) and POST /api/v1/routes/{model} with
// {"route": "primary"|"fallback"|"auto"}, which forces a route or gives it
// back to breakers and alerts; the write needs the admin token. With
// nothing routed the read answers empty lists rather than 404, so a
// client (the status page) can tell "no routes" from "no such endpoint";
// the write answers 404 for a model without a route.
//
// maxRouteBody caps the body of POST /api/v1/routes/{model}; a larger
// one is answered 413 with the limit.
const maxRouteBody = 4 << 10

func (a *Server) routesAPI(mux *http.ServeMux) {
	r := a.Router
	mux.HandleFunc("GET /api/v1/routes", func(w http.ResponseWriter, _ *http.Request) {
		routes, breakers := r.Status()
		// Lists, never null: "no routes" reads as such.
		if routes == nil {
			routes = []route.RouteStatus{}
		}
		if breakers == nil {
			breakers = []route.BreakerStatus{}
		}
		WriteJSON(w, http.StatusOK, map[string]any{"routes": routes, "breakers": breakers})
	})
	set := func(w http.ResponseWriter, req *http.Request) {
		var body struct {
			Route string `json:"route"`
		}
		lr := http.MaxBytesReader(w, req.Body, maxRouteBody)
		err := json.NewDecoder(lr).Decode(&body)
		if err == nil {
			// What follows the JSON value counts against the cap too.
			_, err = io.Copy(io.Discard, lr)
		}
		var tooBig *http.MaxBytesError
		switch {
		case errors.As(err, &tooBig):
			WriteJSON(w, http.StatusRequestEntityTooLarge, map[string]string{"error": fmt.Sprintf("body: larger than the limit of %d bytes (%d KiB)", tooBig.Limit, tooBig.Limit>>10)})
			return
		case err != nil:
			WriteJSON(w, http.StatusBadRequest, map[string]string{"error": "body: want {\"route\": \"primary\"|\"fallback\"|\"auto\"}: " + err.Error()})
			return
		}
		model := req.PathValue("model")
		if err := r.SetForced(model, body.Route); err != nil {
			code := http.StatusBadRequest
			if body.Route == route.ForceAuto || body.Route == route.ForcePrimary || body.Route == route.ForceFallback {
				code = http.StatusNotFound
			}
			WriteJSON(w, code, map[string]string{"error": err.Error()})
			return
		}
		routes, _ := r.Status()
		for _, rs := range routes {
			if rs.Model == model {
				WriteJSON(w, http.StatusOK, rs)
				return
			}
		}
	}
	mux.HandleFunc("POST /api/v1/routes/{model}", a.Guard(set))
	// Each upstream's endpoints (its replicas): state and why, calls in
	// flight, latency, ejections.
	mux.HandleFunc("GET /api/v1/endpoints", func(w http.ResponseWriter, _ *http.Request) {
		WriteJSON(w, http.StatusOK, map[string]any{"endpoints": r.Endpoints()})
	})
	// Flow control's gates: each model's capacity (its endpoints' learnt
	// limits), calls in flight and waiting, by band.
	mux.HandleFunc("GET /api/v1/flow", func(w http.ResponseWriter, _ *http.Request) {
		tenants := []flowstats.TenantStatus{}
		if a.FlowTenants != nil {
			tenants = a.FlowTenants()
		}
		gates := []flowstats.GateStatus{}
		if a.Flow != nil {
			gates = a.Flow()
		}
		WriteJSON(w, http.StatusOK, map[string]any{"gates": gates, "tenants": tenants})
	})
}
