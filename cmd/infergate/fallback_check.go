package main

import (
	"context"
	"log/slog"
	"slices"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/infergate/infergate/proto/kservepb"
	"github.com/infergate/infergate/proxy"
)

// A fallback model the model server does not have fails only when the
// fallback is needed, in the middle of an incident. The config cannot
// know the server's models, so at start each fallback's server is asked
// (KServe RepositoryIndex, as the batching discovery does) and a fallback
// it does not hold is logged at WARN. A server without the API
// (TF-Serving) cannot say; it is left alone.

// fallbackCheckRetry is how often a server that did not answer the index
// is asked again, until it answers once.
const fallbackCheckRetry = 30 * time.Second

// indexFunc lists the models of one model server's repository.
type indexFunc func(ctx context.Context) (*kservepb.RepositoryIndexResponse, error)

// checkFallbacks starts, for each upstream serving a fallback, one check
// of its repository against the fallback models routed to it.
func checkFallbacks(ctx context.Context, routes []proxy.RouteConfig, def *proxy.Upstream, log *slog.Logger) {
	byUp := map[*proxy.Upstream]map[string]string{}
	for _, rc := range routes {
		if rc.Fallback == nil {
			continue
		}
		up := rc.Fallback.Upstream
		if up == nil {
			up = rc.Upstream
		}
		if up == nil {
			up = def
		}
		if up == nil {
			continue
		}
		if byUp[up] == nil {
			byUp[up] = map[string]string{}
		}
		fb := rc.Fallback.Model
		if fb == "" {
			fb = rc.Model
		}
		byUp[up][rc.Model] = fb
	}
	for up, fallbacks := range byUp {
		kc := kservepb.NewGRPCInferenceServiceClient(up.Conn())
		ask := func(ctx context.Context) (*kservepb.RepositoryIndexResponse, error) {
			return kc.RepositoryIndex(ctx, &kservepb.RepositoryIndexRequest{})
		}
		t := time.NewTicker(fallbackCheckRetry)
		go func() {
			defer t.Stop()
			warnUnknownFallbacks(ctx, up.Name(), fallbacks, ask, t.C, log)
		}()
	}
}

// warnUnknownFallbacks asks the index of upstream until it answers once
// (again at each tick of retry) and logs a WARN for each route whose
// fallback model (fallbacks: route model → fallback model) it does not
// hold. It returns after the first answer, when the server has no index
// API, or when ctx ends.
func warnUnknownFallbacks(ctx context.Context, upstream string, fallbacks map[string]string, ask indexFunc, retry <-chan time.Time, log *slog.Logger) {
	for {
		actx, cancel := context.WithTimeout(ctx, 10*time.Second)
		idx, err := ask(actx)
		cancel()
		switch {
		case err == nil:
			var known []string
			for _, m := range idx.GetModels() {
				known = append(known, m.GetName())
			}
			for _, model := range sortedKeys(fallbacks) {
				if fb := fallbacks[model]; !slices.Contains(known, fb) {
					log.Warn("routes: the fallback model is not in its upstream's model repository: calls sent to the fallback will fail",
						"route", model, "fallback", fb, "upstream", upstream)
				}
			}
			return
		case status.Code(err) == codes.Unimplemented:
			log.Debug("routes: the fallback's upstream lists no models (no KServe RepositoryIndex); fallback models not checked", "upstream", upstream)
			return
		case ctx.Err() != nil:
			return
		}
		log.Debug("routes: cannot list the fallback's upstream's models yet", "upstream", upstream, "error", err)
		select {
		case <-ctx.Done():
			return
		case <-retry:
		}
	}
}
