package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"

	"github.com/infergate/infergate/bench/byterelay"
)

// runRelay is "bench relay": the byte relay bench overhead measures as the
// floor of any proxy (path tcp-relay).
func runRelay(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench relay", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:0", "listen address")
	upstream := fs.String("upstream", "", "upstream address (host:port); required")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *upstream == "" || fs.NArg() > 0 {
		return usageError{fmt.Errorf("relay: -upstream is required and takes no arguments")}
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("relay: %w", err)
	}
	fmt.Fprintf(stdout, "bench: relay: listen=%s upstream=%s\n", ln.Addr(), *upstream)
	return byterelay.Serve(ctx, ln, *upstream)
}
