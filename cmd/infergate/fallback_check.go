package main

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/infergate/infergate/alert"
	"github.com/infergate/infergate/proto/kservepb"
	"github.com/infergate/infergate/proxy"
	"github.com/infergate/infergate/proxy/route"
)

// A model the model server does not have makes a setting do nothing
// without a word: a fallback fails only when it is needed, in the middle
// of an incident; a route, an alert rule or an SLO for a model the server
// does not serve never sees a call. The config cannot know the server's
// models, so at start and at each reload that changes routes or alerting
// each upstream named is asked (KServe RepositoryIndex, as the batching
// discovery does) and each setting naming a model it does not hold is
// logged at WARN. A server without the API (TF-Serving) cannot say; it is
// left alone. Globs (a rule's select: {model: "resnet*"}) are not checked.

// fallbackCheckRetry is how often a server that did not answer the index
// is asked again, until it answers once.
const fallbackCheckRetry = 30 * time.Second

// indexFunc lists the models of one model server's repository.
type indexFunc func(ctx context.Context) (*kservepb.RepositoryIndexResponse, error)

// modelRef is one setting that names a model: setting as the file spells
// it (routes[resnet50].fallback, rules[Slow].select.model); fallback says
// it is a fallback model, whose absence fails calls rather than doing
// nothing.
type modelRef struct {
	setting, model string
	fallback       bool
}

// checkModels starts, for each upstream a setting of routes or ac points
// at, one check of its repository against the models named: routes'
// models on their primary upstream (def unless the route names one),
// fallback models on the fallback's upstream, and the models of alert
// rules and SLOs on the upstream of their model's route, else def.
func checkModels(ctx context.Context, routes []route.RouteConfig, ac *alert.Config, def *proxy.Upstream, log *slog.Logger) {
	byUp := map[*proxy.Upstream][]modelRef{}
	primary := map[string]*proxy.Upstream{}
	add := func(up *proxy.Upstream, r modelRef) {
		if up != nil && r.model != "" && !strings.ContainsAny(r.model, "*?[") {
			byUp[up] = append(byUp[up], r)
		}
	}
	for _, rc := range routes {
		up, _ := rc.Upstream.(*proxy.Upstream)
		if up == nil {
			up = def
		}
		primary[rc.Model] = up
		add(up, modelRef{setting: "routes[" + rc.Model + "]", model: rc.Model})
		if rc.Fallback == nil {
			continue
		}
		fbUp, _ := rc.Fallback.Upstream.(*proxy.Upstream)
		if fbUp == nil {
			fbUp = up
		}
		fb := rc.Fallback.Model
		if fb == "" {
			fb = rc.Model
		}
		add(fbUp, modelRef{setting: "routes[" + rc.Model + "].fallback", model: fb, fallback: true})
	}
	upOf := func(model string) *proxy.Upstream {
		if up := primary[model]; up != nil {
			return up
		}
		return def
	}
	if ac != nil {
		for _, r := range ac.Rules {
			add(upOf(r.Select.Model), modelRef{setting: "rules[" + r.Name + "].select.model", model: r.Select.Model})
		}
		for _, s := range ac.SLO {
			add(upOf(s.Model), modelRef{setting: "slo[" + s.Model + "]", model: s.Model})
		}
	}
	for up, refs := range byUp {
		kc := kservepb.NewGRPCInferenceServiceClient(up)
		ask := func(ctx context.Context) (*kservepb.RepositoryIndexResponse, error) {
			return kc.RepositoryIndex(ctx, &kservepb.RepositoryIndexRequest{})
		}
		t := time.NewTicker(fallbackCheckRetry)
		go func() {
			defer t.Stop()
			warnUnknownModels(ctx, up.Name(), refs, ask, t.C, log)
		}()
	}
}

// warnUnknownModels asks the index of upstream until it answers once
// (again at each tick of retry) and logs a WARN for each setting of refs
// whose model it does not hold. It returns after the first answer, when
// the server has no index API, or when ctx ends.
func warnUnknownModels(ctx context.Context, upstream string, refs []modelRef, ask indexFunc, retry <-chan time.Time, log *slog.Logger) {
	for {
		actx, cancel := context.WithTimeout(ctx, 10*time.Second)
		idx, err := ask(actx)
		cancel()
		switch {
		case err == nil:
			known := map[string]bool{}
			for _, m := range idx.GetModels() {
				known[m.GetName()] = true
			}
			refs = slices.Clone(refs)
			slices.SortFunc(refs, func(a, b modelRef) int { return strings.Compare(a.setting, b.setting) })
			for _, r := range refs {
				switch {
				case known[r.model]:
				case r.fallback:
					log.Warn("configuration: the fallback model is not in its upstream's model repository: calls sent to the fallback will fail",
						"setting", r.setting, "model", r.model, "upstream", upstream)
				default:
					log.Warn("configuration: the model is not in its upstream's model repository: the setting has no effect until the server loads it",
						"setting", r.setting, "model", r.model, "upstream", upstream)
				}
			}
			return
		case status.Code(err) == codes.Unimplemented:
			log.Debug("configuration: the upstream lists no models (no KServe RepositoryIndex); the models settings name are not checked", "upstream", upstream)
			return
		case ctx.Err() != nil:
			return
		}
		log.Debug("configuration: cannot list the upstream's models yet", "upstream", upstream, "error", err)
		select {
		case <-ctx.Done():
			return
		case <-retry:
		}
	}
}
