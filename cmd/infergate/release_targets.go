package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/infergate/infergate/proto/kservepb"
	"github.com/infergate/infergate/proto/tfservingpb"
	"github.com/infergate/infergate/proxy"
	"github.com/infergate/infergate/release"
)

// Whether a release's targets exist is asked of the model servers, as
// the batching discovery and the model check ask them: a KServe server
// (Triton) lists its repository (RepositoryIndex, one entry per version);
// a server without that API (TF-Serving) is asked for each model and
// version the releases name (GetModelMetadata with the version, which
// answers NOT_FOUND for a version it does not serve: our TF-Serving
// protos carry the PredictionService, not the ModelService's
// GetModelStatus).

// namedConn is one upstream asked about the targets.
type namedConn struct {
	name string
	cc   grpc.ClientConnInterface
}

// modelVersion is one target asked about; version "" asks for the model.
type modelVersion struct{ model, version string }

// wantedTargets lists the models and versions specs name.
func wantedTargets(specs []release.Spec) []modelVersion {
	var out []modelVersion
	for _, s := range specs {
		ts := []release.Target{s.Stable, s.Candidate}
		if s.Shadow != nil {
			ts = append(ts, s.Shadow.Target)
		}
		for _, t := range ts {
			switch {
			case t.Version != "":
				out = append(out, modelVersion{s.Model, t.Version})
			case t.Model != "":
				out = append(out, modelVersion{t.Model, ""})
			}
		}
	}
	return out
}

// askTargets asks every upstream of conns which of specs' targets it
// holds; a target is known when any of them holds it (a release's model
// may be served from any upstream its route names). An upstream that
// cannot be asked makes it an error: "not checked" is not "unknown".
func askTargets(ctx context.Context, conns []namedConn, specs []release.Spec) (release.Lookup, error) {
	want := wantedTargets(specs)
	have := map[modelVersion]bool{}
	for _, c := range conns {
		if err := askOne(ctx, c.cc, want, have); err != nil {
			return release.Lookup{}, fmt.Errorf("upstream %s: %w", c.name, err)
		}
	}
	return release.Lookup{Model: func(model, version string) bool { return have[modelVersion{model, version}] }}, nil
}

// askOne adds to have what cc holds of want.
func askOne(ctx context.Context, cc grpc.ClientConnInterface, want []modelVersion, have map[modelVersion]bool) error {
	idx, err := kservepb.NewGRPCInferenceServiceClient(cc).RepositoryIndex(ctx, &kservepb.RepositoryIndexRequest{})
	switch {
	case err == nil:
		for _, m := range idx.GetModels() {
			have[modelVersion{m.GetName(), ""}] = true
			// A version listed but not loaded (UNAVAILABLE) would fail
			// every call sent to it.
			if m.GetVersion() != "" && (m.GetState() == "" || m.GetState() == "READY") {
				have[modelVersion{m.GetName(), m.GetVersion()}] = true
			}
		}
		return nil
	case status.Code(err) != codes.Unimplemented:
		return err
	}
	tc := tfservingpb.NewPredictionServiceClient(cc)
	for _, w := range want {
		spec := &tfservingpb.ModelSpec{Name: w.model}
		if w.version != "" {
			v, perr := strconv.ParseInt(w.version, 10, 64)
			if perr != nil {
				continue // TF-Serving's versions are numbers: unknown
			}
			spec.VersionChoice = &tfservingpb.ModelSpec_Version{Version: wrapperspb.Int64(v)}
		}
		_, err := tc.GetModelMetadata(ctx, &tfservingpb.GetModelMetadataRequest{ModelSpec: spec, MetadataField: []string{"signature_def"}})
		switch status.Code(err) {
		case codes.OK:
			have[w] = true
		case codes.NotFound, codes.FailedPrecondition, codes.InvalidArgument:
		default:
			return err
		}
	}
	return nil
}

// upstreamConns names each upstream for askTargets.
func upstreamConns(ups []*proxy.Upstream) []namedConn {
	out := make([]namedConn, 0, len(ups))
	for _, u := range ups {
		out = append(out, namedConn{name: u.Name(), cc: u})
	}
	return out
}

// checkTargetsTimeout bounds --check-config's questions to the model
// servers: a check must not hang on a server that is down.
const checkTargetsTimeout = 5 * time.Second

// checkReleaseTargets is --check-config's look at the model servers: it
// returns the releases whose targets the servers do not hold (each
// naming its field), or, when the servers cannot be asked, a warning
// saying the targets were not checked (the check does not fail on it:
// a configuration is often checked where the servers are not).
func checkReleaseTargets(cfg Config) (problems []error, warning string) {
	if len(cfg.Releases) == 0 || cfg.routes == nil {
		return nil, ""
	}
	creds, err := clientCreds(cfg.UpstreamTLS)
	if err != nil {
		return nil, "releases: the model servers' repository was not checked: " + err.Error()
	}
	ups, err := proxy.OpenRouting(cfg.routes, proxy.UpstreamOptions{Credentials: creds, MaxMsgSize: cfg.MaxMessageBytes,
		Resolver: dnsResolver(cfg.UpstreamDNSServer)}, proxy.DialUpstream)
	if err != nil {
		return nil, "releases: the model servers' repository was not checked: " + err.Error()
	}
	defer ups.Close()
	ctx, cancel := context.WithTimeout(context.Background(), checkTargetsTimeout)
	defer cancel()
	lk, err := askTargets(ctx, upstreamConns(ups.Upstreams), cfg.Releases)
	if err != nil {
		return nil, "releases: the model servers' repository was not checked (" + err.Error() +
			"); the releases' versions and models are checked at start, once the servers answer"
	}
	for _, e := range release.Problems(cfg.Releases, release.Lookup{Model: lk.Model, Upstream: cfg.upstreamNamed()}) {
		problems = append(problems, fmt.Errorf("config: %v", e))
	}
	return problems, ""
}
