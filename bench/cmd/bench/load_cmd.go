package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/infergate/infergate/bench/load"
	"github.com/infergate/infergate/bench/report"
)

// runLoad is "bench load".
func runLoad(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench load", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		target   = fs.String("target", "127.0.0.1:8001", "loopback host:port of the gRPC server or proxy")
		proto    = fs.String("proto", "kserve", "protocol: kserve (ModelInfer) or tf (Predict)")
		model    = fs.String("model", "simple", "model name")
		inputs   = fs.String("input", "", "comma-separated input names (default: the model's known inputs, else INPUT0)")
		shape    = fs.String("shape", "", "input shape, e.g. 1,16 (default: the model's known shape, else 1,1024)")
		dtype    = fs.String("dtype", "", "input datatype, KServe spelling: FP32, INT32, ... (default: the model's, else FP32)")
		conc     = fs.Int("c", 1, "closed loop: concurrent callers (ignored when -rate is set)")
		rate     = fs.Float64("rate", 0, "open loop: requests per second, latency measured from intended send times")
		arrival  = fs.String("arrival", "fixed", "open-loop arrivals: fixed or poisson")
		maxIn    = fs.Int("max-inflight", load.DefaultMaxInFlight, "open loop: cap on outstanding requests; beyond it requests are late or dropped")
		dur      = fs.Duration("d", 10*time.Second, "measured duration")
		warmup   = fs.Duration("warmup", 2*time.Second, "warmup before measuring, not recorded")
		requests = fs.Int64("n", 0, "stop after this many measured requests (0: no limit)")
		timeout  = fs.Duration("timeout", load.DefaultTimeout, "per-request timeout")
		conns    = fs.Int("conns", 1, "client connections")
		label    = fs.String("label", "", "run label in reports")
		jsonOut  = fs.String("out", "", "write the result as JSON to this file")
		mdOut    = fs.String("md", "", "write the Markdown table to this file (it is printed either way)")
		quiet    = fs.Bool("q", false, "no progress lines")
		stream   = fs.Bool("stream", false, "send on ModelStreamInfer (decoupled models, e.g. -model llm_stream): one stream per caller, one request at a time; reports each request's first response, gaps and responses")
	)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("load: unexpected argument %q", fs.Arg(0))}
	}
	p, err := load.ParseProtocol(*proto)
	if err != nil {
		return usageError{err}
	}
	arr, err := load.ParseArrival(*arrival)
	if err != nil {
		return usageError{err}
	}
	tensors, err := resolveInputs(*model, *inputs, *shape, *dtype)
	if err != nil {
		return usageError{err}
	}
	pl, err := load.NewPayload(p, *model, tensors)
	if err != nil {
		return usageError{err}
	}
	cfg := load.Config{
		Label: *label, Target: *target, Payload: pl,
		Concurrency: *conc, Rate: *rate, Arrival: arr, MaxInFlight: *maxIn,
		Duration: *dur, Warmup: *warmup, Requests: *requests, Timeout: *timeout, Conns: *conns,
		Stream: *stream,
	}
	if cfg.Label == "" {
		cfg.Label = *model
	}
	if !*quiet {
		cfg.Progress = stderr
	}
	if err := cfg.Validate(); err != nil {
		return usageError{err}
	}
	res, err := load.Run(ctx, cfg)
	if err != nil {
		return err
	}
	md := report.LoadTable(fmt.Sprintf("%s %s @ %s", p, *model, *target), []*load.Result{res}).Markdown()
	if st := report.StreamTable("per request", []*load.Result{res}); st != nil {
		md += "\n" + st.Markdown()
	}
	fmt.Fprint(stdout, md)
	if *mdOut != "" {
		if err := report.WriteFile(*mdOut, []byte(md)); err != nil {
			return err
		}
	}
	if *jsonOut != "" {
		if err := report.WriteJSONFile(*jsonOut, res); err != nil {
			return err
		}
	}
	return nil
}

// resolveInputs builds the request inputs: flags win, then the model's
// known defaults, then INPUT0 FP32 [1,1024].
func resolveInputs(model, names, shape, dtype string) ([]load.Tensor, error) {
	defaults, known := load.ModelDefaults(model)
	if !known {
		defaults = []load.Tensor{{Name: "INPUT0", Datatype: "FP32", Shape: []int64{1, 1024}}}
	}
	if names == "" && shape == "" && dtype == "" {
		return defaults, nil
	}
	var list []string
	if names != "" {
		for _, n := range strings.Split(names, ",") {
			if n = strings.TrimSpace(n); n != "" {
				list = append(list, n)
			}
		}
	} else {
		for _, t := range defaults {
			list = append(list, t.Name)
		}
	}
	dims := defaults[0].Shape
	if shape != "" {
		var err error
		if dims, err = load.ParseShape(shape); err != nil {
			return nil, err
		}
	}
	dt := defaults[0].Datatype
	if dtype != "" {
		dt = strings.ToUpper(dtype)
	}
	out := make([]load.Tensor, len(list))
	for i, n := range list {
		out[i] = load.Tensor{Name: n, Datatype: dt, Shape: dims}
	}
	return out, nil
}
