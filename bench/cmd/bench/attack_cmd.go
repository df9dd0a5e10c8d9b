package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/infergate/infergate/bench/load"
	"github.com/infergate/infergate/internal/attack"
)

// attackRunner runs one attack against addr.
type attackRunner func(ctx context.Context, addr string) (*attack.Report, error)

// attacks maps each attack's name to a function that declares its flags
// on fs and returns its runner.
var attacks = map[string]func(fs *flag.FlagSet) attackRunner{
	"rapid-reset": func(fs *flag.FlagSet) attackRunner {
		d := fs.Duration("d", 5*time.Second, "how long to send HEADERS+DATA+RST_STREAM")
		model := fs.String("model", "", "identity model the reset calls go to (default: the simple request)")
		return func(ctx context.Context, addr string) (*attack.Report, error) {
			return attack.RapidReset(ctx, addr, attack.RapidResetParams{Duration: *d, Model: *model})
		}
	},
	"empty-headers": func(fs *flag.FlagSet) attackRunner {
		n := fs.Int("streams", 400_000, "zero-length streams (HEADERS with END_STREAM)")
		linger := fs.Duration("linger", time.Second, "time to stay connected after the last HEADERS")
		return func(ctx context.Context, addr string) (*attack.Report, error) {
			return attack.EmptyHeaders(ctx, addr, attack.EmptyHeadersParams{Streams: *n, Linger: *linger})
		}
	},
	"hold-streams": func(fs *flag.FlagSet) attackRunner {
		n := fs.Int("streams", 200_000, "streams opened (HEADERS, no END_STREAM, no body)")
		hold := fs.Duration("hold", 2*time.Second, "how long they are held once sent")
		return func(ctx context.Context, addr string) (*attack.Report, error) {
			return attack.HoldStreams(ctx, addr, attack.HoldStreamsParams{Streams: *n, Hold: *hold})
		}
	},
	"never-read": func(fs *flag.FlagSet) attackRunner {
		n := fs.Int("streams", 50, "calls whose answers are never read")
		model := fs.String("model", "identity_fp32", "identity model (answers carry the request's bytes)")
		size := fs.Int("bytes", 4<<20, "bytes per request, and so per answer")
		hold := fs.Duration("hold", 3*time.Second, "how long the connection is kept, unread, after the uploads")
		upload := fs.Duration("upload-timeout", 30*time.Second, "longest wait for the server's window to send the requests")
		return func(ctx context.Context, addr string) (*attack.Report, error) {
			return attack.NeverRead(ctx, addr, attack.NeverReadParams{Streams: *n, Model: *model, AnswerBytes: *size, Hold: *hold, UploadTimeout: *upload})
		}
	},
	"huge-length": func(fs *flag.FlagSet) attackRunner {
		length := fs.Uint("length", 1_000_000_000, "what the gRPC length prefix claims (at most 2^32-1)")
		d := fs.Duration("d", 5*time.Second, "how long DATA keeps coming")
		return func(ctx context.Context, addr string) (*attack.Report, error) {
			if *length == 0 || *length > 1<<32-1 {
				return nil, usageError{fmt.Errorf("attack: huge-length: -length %d: want 1 to 2^32-1", *length)}
			}
			return attack.HugeLength(ctx, addr, attack.HugeLengthParams{Length: uint32(*length), Duration: *d})
		}
	},
	"malformed-neighbour": func(fs *flag.FlagSet) attackRunner {
		m := fs.String("malformation", "uppercase", "uppercase (an upper-case header name) or second-path (two :path)")
		timeout := fs.Duration("timeout", 5*time.Second, "longest wait for the good call's answer")
		return func(ctx context.Context, addr string) (*attack.Report, error) {
			return attack.MalformedNeighbour(ctx, addr, attack.MalformedNeighbourParams{Malformation: *m, Timeout: *timeout})
		}
	},
	"big-uploads": func(fs *flag.FlagSet) attackRunner {
		c := fs.Int("c", 100, "callers, each on its own connection")
		size := fs.Int("bytes", 4<<20, "bytes per request")
		model := fs.String("model", "identity_fp32", "identity model")
		d := fs.Duration("d", 10*time.Second, "how long callers start new calls")
		return func(ctx context.Context, addr string) (*attack.Report, error) {
			return attack.BigUploads(ctx, addr, attack.BigUploadsParams{Callers: *c, Bytes: *size, Model: *model, Duration: *d})
		}
	},
}

func attackNames() []string {
	names := make([]string, 0, len(attacks))
	for n := range attacks {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// runAttack is "bench attack NAME -addr HOST:PORT [flags]": one misbehaving
// HTTP/2 client (internal/attack) against a loopback server or proxy; it
// prints the attack's report.
func runAttack(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help") {
			fmt.Fprintf(stdout, "usage: bench attack NAME -addr HOST:PORT [flags]\nattacks: %s\n", strings.Join(attackNames(), ", "))
			return flag.ErrHelp
		}
		return usageError{fmt.Errorf("attack: name an attack: %s", strings.Join(attackNames(), ", "))}
	}
	name := args[0]
	declare, ok := attacks[name]
	if !ok {
		return usageError{fmt.Errorf("attack: unknown attack %q (have %s)", name, strings.Join(attackNames(), ", "))}
	}
	fs := flag.NewFlagSet("bench attack "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:9001", "loopback host:port of the gRPC server or proxy")
	asJSON := fs.Bool("json", false, "print the report as JSON (attack.Report) instead of text")
	runner := declare(fs)
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("attack: unexpected argument %q", fs.Arg(0))}
	}
	if err := load.CheckLoopback(*addr); err != nil {
		return usageError{err}
	}
	r, err := runner(ctx, *addr)
	if err != nil {
		return err
	}
	if *asJSON {
		return json.NewEncoder(stdout).Encode(r)
	}
	fmt.Fprint(stdout, r)
	return nil
}
