package pool

import (
	"context"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/infergate/infergate/proto/kservepb"
)

// Models where they are. Replicas of one upstream need not hold the same
// models (a model rolled out to some pods first, a big one on the GPUs
// that fit it). A pool asks each endpoint for its ready models (KServe's
// RepositoryIndex) every modelsEvery, and sends a model's calls only to
// endpoints that hold it. An endpoint that cannot say (TF-Serving has no
// such call) is taken to hold every model until it answers NOT_FOUND for
// one: then it is left out for that model for absentFor, and the call,
// on the gRPC path, goes again to one that holds it.
const (
	modelsEvery = 5 * time.Second
	absentFor   = 30 * time.Second
)

// modelHeld says whether some endpoint of u holds model at t.
func (u *Pool) modelHeld(model string, t int64) bool {
	for _, e := range u.eps.Load().list {
		if e.holds(model, t) {
			return true
		}
	}
	return false
}

// pollModels asks each endpoint of u for its ready models every
// modelsEvery, and at once when poke says endpoints changed, until ctx
// ends.
func (u *Pool) pollModels(ctx context.Context, poke <-chan struct{}) {
	t := time.NewTicker(modelsEvery)
	defer t.Stop()
	for {
		if list := u.eps.Load().list; len(list) > 1 {
			var wg sync.WaitGroup
			for _, e := range list {
				wg.Go(func() { e.askModels(ctx) })
			}
			wg.Wait()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-poke:
		}
	}
}

// askModels asks e for its ready models (RepositoryIndex).
func (e *Endpoint) askModels(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	resp, err := kservepb.NewGRPCInferenceServiceClient(e.Conn()).RepositoryIndex(ctx, &kservepb.RepositoryIndexRequest{Ready: true})
	switch status.Code(err) {
	case codes.OK:
		ready := make(map[string]bool, len(resp.GetModels()))
		for _, m := range resp.GetModels() {
			if m.GetState() == "" || m.GetState() == "READY" {
				ready[m.GetName()] = true
			}
		}
		e.setReady(ready)
	case codes.Unimplemented:
		e.setReady(nil) // it cannot say: NOT_FOUND answers will
	}
	// Another error (unreachable, slow): what it said last holds.
}

// notFound says whether a call's failure is the endpoint's NOT_FOUND for
// its model: the model is not there.
func NotFound(code codes.Code, fromUpstream bool) bool {
	return code == codes.NotFound && fromUpstream
}

// Replicas is how many endpoints of the pool may take a call of model at
// t (up, not ejected, holding it), at least 1.
func (u *Pool) Replicas(model string, t int64) int {
	list := u.eps.Load().list
	if len(list) < 2 {
		return 1
	}
	if !u.modelHeld(model, t) {
		model = ""
	}
	n := 0
	for _, e := range list {
		if e.UsableFor(model, t) {
			n++
		}
	}
	return max(n, 1)
}
