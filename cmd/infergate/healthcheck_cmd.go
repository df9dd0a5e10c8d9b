package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"
)

// defaultHealthURL is the readiness endpoint at the default admin address.
const defaultHealthURL = "http://127.0.0.1:9091/readyz"

// healthcheckCommand runs `infergate healthcheck [--timeout D] [URL]`: one
// GET of URL (default /readyz at the default admin address); exit 0 on a
// 2xx answer, 1 on any other answer or none, 2 on bad usage. It is the
// container image's HEALTHCHECK: the image holds nothing but this binary,
// so there is no shell or curl to ask with.
func healthcheckCommand(args []string, out, errOut io.Writer) int {
	fs := flag.NewFlagSet("infergate healthcheck", flag.ContinueOnError)
	fs.SetOutput(errOut)
	fs.Usage = func() {
		fmt.Fprintln(errOut, "usage: infergate healthcheck [--timeout D] [URL]   (default "+defaultHealthURL+")")
		fs.PrintDefaults()
	}
	timeout := fs.Duration("timeout", 2*time.Second, "limit of the whole request")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	target := defaultHealthURL
	switch fs.NArg() {
	case 0:
	case 1:
		target = fs.Arg(0)
	default:
		fs.Usage()
		return 2
	}
	if u, err := url.Parse(target); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		fmt.Fprintf(errOut, "infergate healthcheck: %q is not an http(s) URL\n", target)
		return 2
	}
	if *timeout <= 0 {
		fmt.Fprintf(errOut, "infergate healthcheck: --timeout must be positive, got %s\n", *timeout)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		fmt.Fprintln(errOut, "infergate healthcheck:", err)
		return 2
	}
	// One request, then the process ends: no connection worth keeping.
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Do(req)
	if err != nil {
		fmt.Fprintln(errOut, "infergate healthcheck:", err)
		return 1
	}
	defer resp.Body.Close()
	// The body says why not ready ({"ready":false,"reason":...}); the
	// container runtime keeps it as the check's output.
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	fmt.Fprintf(out, "%s %s\n%s", resp.Status, target, body)
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return 1
	}
	return 0
}
