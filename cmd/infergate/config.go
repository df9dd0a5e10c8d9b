package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/infergate/infergate/alert"
	"github.com/infergate/infergate/batcher"
	"github.com/infergate/infergate/internal/bytesize"
	"github.com/infergate/infergate/monitor"
	"github.com/infergate/infergate/monitor/business"
	"github.com/infergate/infergate/monitor/gpu"
	"github.com/infergate/infergate/proxy"
	"github.com/infergate/infergate/proxy/route"
	"github.com/infergate/infergate/release"
	"github.com/infergate/infergate/tracing"

	"go.yaml.in/yaml/v3"
)

// Config is everything infergate reads from its YAML file and flags.
// defaultConfig holds the documented defaults; the file is decoded over
// it and the flags are applied over that, so an explicit 0 is seen as 0.
// Each package owns its section: its struct, defaults and Problems.
type Config struct {
	// Listen is the gRPC address clients use. Default ":9001".
	Listen string `yaml:"listen"`
	// RoutingConfig is the routing part, at the top level of the file:
	// upstream, upstreams, breaker, routes, retry_budget.
	route.RoutingConfig `yaml:",inline"`
	// Config is the proxy's own settings, at the top level of the file:
	// max_message_bytes, upstream_conns, upstream_timeout,
	// upstream_keepalive_time, max_in_flight.
	proxy.Config `yaml:",inline"`
	// FrontDoor bounds what clients can make the proxy hold: the memory
	// budget, streams per connection, connections, idle time.
	FrontDoor FrontDoorConfig `yaml:"front_door"`
	// Admin is the HTTP address for /metrics, /healthz, /readyz and the API.
	// Default "127.0.0.1:9091": loopback unless told otherwise.
	Admin string `yaml:"admin"`
	// ShutdownTimeout bounds the drain of in-flight calls (and queued
	// batches) after the listener closed on SIGTERM. Default 30s.
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout"`
	// DrainDelay is how long, after SIGTERM, /readyz answers 503 while
	// calls are still served, so that load balancers notice before the
	// listener closes. Default 5s; 0s turns the delay off.
	DrainDelay time.Duration `yaml:"drain_delay"`
	// Readiness configures the /readyz probe of the upstream (ready.go).
	Readiness ReadinessConfig `yaml:"readiness"`
	// TLS configures the client-facing listener; empty means plaintext.
	TLS ServerTLS `yaml:"tls"`
	// UpstreamTLS configures the connection to the model server.
	UpstreamTLS ClientTLS `yaml:"upstream_tls"`
	// Monitor configures measurement.
	Monitor monitor.Config `yaml:"monitor"`
	// Log configures structured logging.
	Log LogConfig `yaml:"log"`
	// Pprof serves Go's /debug/pprof/ on the admin listener. Default false.
	Pprof bool `yaml:"pprof"`
	// Batching configures request batching. Default off.
	Batching batcher.Settings `yaml:"batching"`
	// FlowControl decides who waits when a model's replicas are full.
	// Default off.
	FlowControl FlowControlConfig `yaml:"flow_control"`
	// GPU configures GPU telemetry and its correlation with latency
	// (gpu.go). Default off.
	GPU gpu.Config `yaml:"gpu"`
	// BusinessMetrics are read from Prometheus and set beside each
	// model's p99 (monitor/business).
	BusinessMetrics []business.Config `yaml:"business_metrics"`
	// Cost prices GPU time and energy for /api/v1/cost (cost.go).
	// Default unpriced.
	Cost CostConfig `yaml:"cost"`
	// Tracing configures OpenTelemetry tracing over the OTEL_*
	// environment. Default off.
	Tracing tracing.Config `yaml:"tracing"`
	// Rules are the alert rules (alert.RuleConfig); absent means the
	// built-in defaults.
	Rules []alert.RuleConfig `yaml:"rules"`
	// SLO are per-model latency objectives (alert.SLOConfig).
	SLO []alert.SLOConfig `yaml:"slo"`
	// Alerting holds the rest of alerting: route, receivers,
	// inhibit_rules, schedules, baseline, state_file (alert.Config).
	Alerting alert.Config `yaml:"alerting"`
	// RulesFile (--rules) is a YAML file of alerting sections that
	// replace those of this file.
	RulesFile string `yaml:"rules_file"`
	// AlertStateFile (--alert-state-file) keeps alert state across
	// restarts.
	AlertStateFile string `yaml:"alert_state_file"`
	// Releases split a model's calls between a stable target and a
	// candidate and judge the candidate on every call (release.Spec,
	// docs/releases.md). They change live at a reload.
	Releases []release.Spec `yaml:"releases"`
	// ReleaseStateFile keeps each release's step, evidence and decisions
	// across restarts. Default: release-state.json in the folder of the
	// alert state file when one is set, else none (a restart starts the
	// releases afresh).
	ReleaseStateFile string `yaml:"release_state_file"`
	// AdminTokenFile holds the bearer token the admin API's writes
	// (silences, acknowledgements) need; none means writes answer 403.
	AdminTokenFile string `yaml:"admin_token_file"`

	alerts     *alert.Config
	adminToken string
	// routes is RoutingConfig as validate checked and converted it, the
	// plan startRouting dials.
	routes *route.Plan
	// args is the command line the configuration was read from: a
	// reload applies it again over the file (flags win).
	args []string
	// level is the log level a reload sets (run makes it).
	level *slog.LevelVar
	// gpuSource and gpuURL hold --gpu-source and --gpu-metrics-url; when
	// either is given they replace gpu.sources (gpuFlags).
	gpuSource, gpuURL string

	// PrintVersion (--version) and CheckOnly (--check-config) are modes of
	// the command line, not settings.
	PrintVersion bool `yaml:"-"`
	CheckOnly    bool `yaml:"-"`
}

// ServerTLS is the listener's TLS. CertFile and KeyFile together turn TLS on;
// ClientCAFile additionally requires and verifies client certificates (mTLS).
type ServerTLS struct {
	CertFile     string `yaml:"cert_file"`
	KeyFile      string `yaml:"key_file"`
	ClientCAFile string `yaml:"client_ca_file"`
}

// ClientTLS is the upstream connection's TLS. Enabled (or any file set)
// turns it on; CAFile verifies the server (system roots when empty);
// CertFile/KeyFile present a client certificate (mTLS).
type ClientTLS struct {
	Enabled            bool   `yaml:"enabled"`
	CAFile             string `yaml:"ca_file"`
	CertFile           string `yaml:"cert_file"`
	KeyFile            string `yaml:"key_file"`
	ServerName         string `yaml:"server_name"`
	InsecureSkipVerify bool   `yaml:"insecure_skip_verify"`
}

// LogConfig configures log/slog output on stderr.
type LogConfig struct {
	// Level is debug, info, warn or error. Default warn (quiet).
	Level string `yaml:"level"`
	// Format is text or json. Default text.
	Format string `yaml:"format"`
	// Requests logs one line per call, whatever the level. Default false.
	Requests bool `yaml:"requests"`
	// Interval is the least time between two log lines about repeated
	// failures of one kind (per upstream and code); the next line counts
	// what was left out. Default proxy.DefaultLogInterval.
	Interval time.Duration `yaml:"interval"`
}

// defaultConfig returns the documented defaults of every setting; the
// packages' own defaults come from their DefaultConfig functions.
func defaultConfig() Config { return defaultConfigFrom(os.Getenv) }

// defaultConfigFrom is defaultConfig with the environment that tracing's
// defaults follow (OTEL_*) read through getenv: the reference pages pass
// an empty one, so they show what -help prints where no OTEL_* is set.
func defaultConfigFrom(getenv func(string) string) Config {
	return Config{
		Listen:          ":9001",
		Config:          proxy.DefaultConfig(),
		FrontDoor:       defaultFrontDoor(),
		Admin:           "127.0.0.1:9091",
		ShutdownTimeout: 30 * time.Second,
		DrainDelay:      5 * time.Second,
		Readiness:       defaultReadiness(),
		FlowControl:     defaultFlowControl(),
		Monitor:         monitor.DefaultConfig(),
		Log:             LogConfig{Level: "warn", Format: "text", Interval: proxy.DefaultLogInterval},
		Batching:        batcher.DefaultSettings(),
		GPU:             gpu.DefaultConfig(),
		Tracing:         tracing.DefaultConfig(getenv),
	}
}

// enabled reports whether upstream TLS is on.
func (c ClientTLS) enabled() bool {
	return c.Enabled || c.CAFile != "" || c.CertFile != "" || c.KeyFile != "" || c.ServerName != "" || c.InsecureSkipVerify
}

// Problems returns one error per bad field of the log section.
func (c LogConfig) Problems() []error {
	var errs []error
	switch c.Level {
	case "debug", "info", "warn", "error":
	default:
		errs = append(errs, fmt.Errorf("level: must be debug, info, warn or error, got %q", c.Level))
	}
	switch c.Format {
	case "text", "json":
	default:
		errs = append(errs, fmt.Errorf("format: must be text or json, got %q", c.Format))
	}
	if c.Interval <= 0 {
		errs = append(errs, fmt.Errorf("interval: must be positive, got %s", c.Interval))
	}
	return errs
}

// Problems returns the listener TLS's problems; the files are read at
// start (readFiles), not here.
func (c ServerTLS) Problems() []error {
	var errs []error
	if (c.CertFile == "") != (c.KeyFile == "") {
		errs = append(errs, errors.New("cert_file and key_file must be set together"))
	}
	if c.ClientCAFile != "" && c.CertFile == "" {
		errs = append(errs, errors.New("client_ca_file: needs tls.cert_file and tls.key_file (mTLS is on top of TLS)"))
	}
	return errs
}

// Problems returns the upstream TLS's problems; the files are read at
// start (readFiles), not here.
func (c ClientTLS) Problems() []error {
	if (c.CertFile == "") != (c.KeyFile == "") {
		return []error{errors.New("cert_file and key_file must be set together")}
	}
	return nil
}

// section prefixes every error of a section's Problems with "config: "
// and the section's name as the file spells it ("monitor."; "" for the
// top level). An error that names no field of its own (TLS's "cert_file
// and key_file ...") is about the section itself.
func section(name string, errs []error) []error {
	out := make([]error, 0, len(errs))
	for _, err := range errs {
		msg := err.Error()
		field, _, ok := strings.Cut(msg, ": ")
		switch {
		case name == "":
			out = append(out, fmt.Errorf("config: %s", msg))
		case ok && !strings.Contains(field, " "):
			out = append(out, fmt.Errorf("config: %s.%s", name, msg))
		default:
			out = append(out, fmt.Errorf("config: %s: %s", name, msg))
		}
	}
	return out
}

// validate returns every problem of c, each naming its field: the
// Problems of every section, plus the rules that join sections. It does
// no I/O (readFiles does) except the alerting files named by --rules and
// admin_token_file, which it loads.
func (c *Config) validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("config: %s: %s", field, fmt.Sprintf(format, args...)))
	}
	checkAddr := func(field, v string) {
		if _, _, err := net.SplitHostPort(v); err != nil {
			bad(field, "%q is not host:port", v)
		}
	}
	checkAddr("listen", c.Listen)
	checkAddr("admin", c.Admin)
	if c.UpstreamDNSServer != "" {
		checkAddr("upstream_dns_server", c.UpstreamDNSServer)
	}
	if c.ShutdownTimeout <= 0 {
		bad("shutdown_timeout", "must be positive, got %s", c.ShutdownTimeout)
	}
	if c.DrainDelay < 0 {
		bad("drain_delay", "must be 0 or positive, got %s", c.DrainDelay)
	}
	plan, routeErrs := c.RoutingConfig.Plan()
	c.routes = plan
	errs = slices.Concat(errs,
		section("", c.Config.Problems()),
		section("", routeErrs),
		section("front_door", c.FrontDoor.Problems()),
		section("monitor", c.Monitor.Problems()),
		section("log", c.Log.Problems()),
		section("readiness", c.Readiness.Problems()),
		section("tls", c.TLS.Problems()),
		section("upstream_tls", c.UpstreamTLS.Problems()),
		section("batching", c.Batching.Problems()),
		section("flow_control", c.FlowControl.Problems()),
		section("gpu", c.GPU.Problems()),
		section("cost", c.Cost.Problems()),
		section("tracing", c.Tracing.Problems()),
		section("", business.Problems(c.BusinessMetrics)),
		batchingProblems(c.Batching),
		idempotencyProblems(c.Batching, c.RoutingConfig),
		c.alertingConfig(),
		c.releaseProblems(),
	)
	sortErrs(errs)
	return errors.Join(errs...)
}

// readFiles checks that every TLS file the config names can be read,
// naming the field of one that cannot. It is the I/O step after
// validation: run calls it before serving and for --check-config.
func (c *Config) readFiles() error {
	var errs []error
	for _, f := range []struct{ field, path string }{
		{"tls.cert_file", c.TLS.CertFile}, {"tls.key_file", c.TLS.KeyFile}, {"tls.client_ca_file", c.TLS.ClientCAFile},
		{"upstream_tls.ca_file", c.UpstreamTLS.CAFile}, {"upstream_tls.cert_file", c.UpstreamTLS.CertFile},
		{"upstream_tls.key_file", c.UpstreamTLS.KeyFile},
	} {
		if f.path == "" {
			continue
		}
		fh, err := os.Open(f.path)
		if err != nil {
			errs = append(errs, fmt.Errorf("config: %s: cannot read %q: %v", f.field, f.path, errors.Unwrap(err)))
			continue
		}
		fh.Close()
	}
	return errors.Join(errs...)
}

// sortErrs orders errors by text so messages are stable (map iteration above).
func sortErrs(errs []error) {
	slices.SortStableFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
}

// loadFile decodes a YAML config over the defaults: a key the file
// leaves out keeps its default, an explicit 0 is 0. Unknown fields are
// errors, so a typo is caught before the process serves anything.
func loadFile(path string) (Config, error) {
	c := defaultConfig()
	f, err := os.Open(path)
	if err != nil {
		return c, fmt.Errorf("config: %w", err)
	}
	defer f.Close()
	src, err := io.ReadAll(f)
	if err != nil {
		return c, fmt.Errorf("config: %w", err)
	}
	// Sizes with units ("64MiB") in *_bytes keys become bytes first,
	// line by line, so the decoder's line numbers stay the file's.
	if src, err = bytesize.RewriteYAML(src); err != nil {
		return c, fmt.Errorf("config: %s: %v", path, err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(src))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) {
		return c, fmt.Errorf("config: %s: %s", path, yamlMessage(err, src))
	}
	return c, nil
}

// yamlMessage rewrites the YAML decoder's messages in the file's terms:
// "line 3: field upstreem not found in type main.Config" becomes
// `line 3: unknown field "upstreem"` (and names the section it is in);
// "line 8: cannot unmarshal !!seq into map[string]batcher.ModelSettings"
// becomes "line 8: batching.models: a map of name to settings, got a
// list" when src (the file) says which key is on that line; other Go
// type names become the YAML section they decode.
func yamlMessage(err error, src []byte) string {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return strings.TrimPrefix(err.Error(), "yaml: ")
	}
	paths := yamlSections()
	keys := yamlKeyLines(src)
	msgs := make([]string, 0, len(te.Errors))
	for _, m := range te.Errors {
		if g := typeErrorRE.FindStringSubmatch(m); g != nil {
			if line, _ := strconv.Atoi(g[1]); keys[line] != "" {
				msgs = append(msgs, fmt.Sprintf("line %s: %s: %s, got %s", g[1], keys[line], expectYAML(g[4]), yamlKind(g[2], g[3])))
				continue
			}
		}
		if i := strings.Index(m, " not found in type "); i >= 0 && strings.Contains(m, "field ") {
			j := strings.Index(m, "field ")
			field := m[j+len("field ") : i]
			where := ""
			if sec := paths[m[i+len(" not found in type "):]]; sec != "" {
				where = " in section " + sec
			}
			m = fmt.Sprintf("%sunknown field %q%s", m[:j], field, where)
		}
		for goName, sec := range paths {
			if sec == "" {
				sec = "the top level"
			}
			m = strings.ReplaceAll(m, "into "+goName, "into "+sec)
		}
		m = strings.ReplaceAll(m, "time.Duration", "a duration (e.g. 5s)")
		msgs = append(msgs, m)
	}
	return strings.Join(msgs, "; ")
}

// typeErrorRE reads a YAML type error: line, tag, value, Go type.
var typeErrorRE = regexp.MustCompile("^line (\\d+): cannot unmarshal (!!\\w+)(?: `([^`]*)`)? into (.+)$")

// yamlKeyLines maps the line of each value in a YAML document to its key
// path ("batching.models", "routes[0].fallback"); empty for no document.
func yamlKeyLines(src []byte) map[int]string {
	out := map[int]string{}
	var doc yaml.Node
	if len(src) == 0 || yaml.Unmarshal(src, &doc) != nil {
		return out
	}
	var walk func(n *yaml.Node, path string)
	walk = func(n *yaml.Node, path string) {
		switch n.Kind {
		case yaml.DocumentNode:
			for _, c := range n.Content {
				walk(c, path)
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				p := n.Content[i].Value
				if path != "" {
					p = path + "." + p
				}
				if _, seen := out[n.Content[i+1].Line]; !seen {
					out[n.Content[i+1].Line] = p
				}
				walk(n.Content[i+1], p)
			}
		case yaml.SequenceNode:
			for i, c := range n.Content {
				p := fmt.Sprintf("%s[%d]", path, i)
				if _, seen := out[c.Line]; !seen {
					out[c.Line] = p
				}
				walk(c, p)
			}
		}
	}
	walk(&doc, "")
	return out
}

// expectYAML says in YAML's terms what a Go type takes.
func expectYAML(goType string) string {
	switch {
	case strings.HasPrefix(goType, "map["):
		_, elem, _ := strings.Cut(goType, "]")
		return "a map of name to " + strings.TrimPrefix(strings.TrimPrefix(expectYAML(elem), "a "), "an ")
	case strings.HasPrefix(goType, "[]"):
		return "a list of " + strings.TrimPrefix(strings.TrimPrefix(expectYAML(goType[2:]), "a "), "an ")
	case strings.HasPrefix(goType, "*"):
		return expectYAML(goType[1:])
	case goType == "time.Duration":
		return "a duration (e.g. 5s)"
	case goType == "string":
		return "a string"
	case goType == "bool":
		return "true or false"
	case strings.HasPrefix(goType, "int"), strings.HasPrefix(goType, "uint"):
		return "a whole number"
	case strings.HasPrefix(goType, "float"):
		return "a number"
	case strings.Contains(goType, "."):
		return "settings (a mapping)"
	}
	return goType
}

// yamlKind says what a YAML tag (and value) is.
func yamlKind(tag, value string) string {
	switch tag {
	case "!!seq":
		return "a list"
	case "!!map":
		return "a mapping"
	case "!!bool":
		return "true or false (" + value + ")"
	case "!!int", "!!float":
		return "a number (" + value + ")"
	case "!!null":
		return "nothing"
	}
	return fmt.Sprintf("%q", value)
}

// yamlSections maps the Go type name of every struct the YAML file decodes
// into ("monitor.Config") to its section as a user writes it
// ("monitor"; "" for the top level).
func yamlSections() map[string]string {
	out := map[string]string{}
	var walk func(t reflect.Type, path string)
	walk = func(t reflect.Type, path string) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Map || t.Kind() == reflect.Slice {
			if t.Kind() == reflect.Map {
				path += ".<name>"
			}
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || t.PkgPath() == "time" {
			return
		}
		if _, seen := out[t.String()]; seen {
			return
		}
		out[t.String()] = strings.TrimPrefix(path, ".")
		for i := range t.NumField() {
			f := t.Field(i)
			tag, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			switch {
			case opts == "inline":
				walk(f.Type, path)
			case tag != "" && tag != "-":
				walk(f.Type, path+"."+tag)
			}
		}
	}
	walk(reflect.TypeOf(Config{}), "")
	return out
}

// flagRow is one command-line flag: its name, its usage, the setting it
// sets as the YAML file names it, and how it binds to a Config. The
// default -help shows is the bound field's value in defaultConfig.
type flagRow struct {
	name, field, usage string
	bind               binder
}

// binder defines the flag name on fs, bound to c; a flag that finds a bad
// value that its own type cannot refuse reports it to errs.
type binder func(fs *flag.FlagSet, name, usage string, c *Config, errs *[]error)

// to binds a flag to the field get returns.
func to[T int | int64 | string | bool | time.Duration](get func(*Config) *T) binder {
	return func(fs *flag.FlagSet, name, usage string, c *Config, _ *[]error) {
		switch p := any(get(c)).(type) {
		case *int:
			fs.IntVar(p, name, *p, usage)
		case *int64:
			fs.Int64Var(p, name, *p, usage)
		case *string:
			fs.StringVar(p, name, *p, usage)
		case *bool:
			fs.BoolVar(p, name, *p, usage)
		case *time.Duration:
			fs.DurationVar(p, name, *p, usage)
		}
	}
}

// sizeTo binds a flag that is a size in bytes: plain bytes, or a number
// with a unit ("64MiB"), as the YAML file's *_bytes keys take them.
func sizeTo[T int | int64](get func(*Config) *T) binder {
	return func(fs *flag.FlagSet, name, usage string, c *Config, _ *[]error) {
		fs.Var(sizeValue[T]{get(c)}, name, usage)
	}
}

// sizeValue is a flag.Value for a size in bytes.
type sizeValue[T int | int64] struct{ p *T }

func (v sizeValue[T]) String() string {
	if v.p == nil {
		return "0"
	}
	return strconv.FormatInt(int64(*v.p), 10)
}

func (v sizeValue[T]) Set(s string) error {
	n, err := bytesize.Parse(s)
	if err != nil {
		return err
	}
	if int64(T(n)) != n {
		return fmt.Errorf("%q is too large", s)
	}
	*v.p = T(n)
	return nil
}

// with binds a flag whose value set applies to c; def is the default
// -help shows, and a back-quoted word of the usage names the value.
func with(def func(*Config) string, set func(c *Config, v string) error) binder {
	return func(fs *flag.FlagSet, name, usage string, c *Config, errs *[]error) {
		fs.Var(funcValue{def(c), func(v string) error {
			if err := set(c, v); err != nil {
				*errs = append(*errs, fmt.Errorf("config: --%s: %w", name, err))
			}
			return nil
		}}, name, usage)
	}
}

// funcValue is a flag.Value that hands each value to set.
type funcValue struct {
	def string
	set func(string) error
}

func (v funcValue) String() string     { return v.def }
func (v funcValue) Set(s string) error { return v.set(s) }

func none(*Config) string { return "" }

// flags are infergate's command-line flags, one row each.
var flags = []flagRow{
	{"listen", "listen", "gRPC address clients connect to", to(func(c *Config) *string { return &c.Listen })},
	{"upstream", "upstream", "model server gRPC address (Triton :8001, TF-Serving :8500); several host:port separated by commas are its replicas, each call sent to one (balance: latency)", to(func(c *Config) *string { return &c.Upstream })},
	{"fallback", "routes", "MODEL=HOST:PORT[/FALLBACK_MODEL[:VERSION]]: serve MODEL from this fallback while its primary is in trouble (repeatable)",
		func(fs *flag.FlagSet, name, usage string, c *Config, _ *[]error) {
			fs.Func(name, usage, func(v string) error {
				fr, err := route.ParseFallback(v)
				if err != nil {
					return err
				}
				// Flags win: a flag's model replaces the file's route fallback.
				replaced := false
				for i := range c.Routes {
					if c.Routes[i].Model == fr.Model {
						c.Routes[i].Fallback, replaced = fr.Fallback, true
					}
				}
				if !replaced {
					c.Routes = append(c.Routes, fr)
				}
				return nil
			})
		}},
	{"admin", "admin", "HTTP admin address: /metrics, /healthz, /readyz", to(func(c *Config) *string { return &c.Admin })},
	{"max-message-bytes", "max_message_bytes", "largest gRPC message in either direction (a `size`: bytes, or with a unit such as 16MiB)", sizeTo(func(c *Config) *int { return &c.MaxMessageBytes })},
	{"upstream-conns", "upstream_conns", "pooled HTTP/2 connections to the upstream", to(func(c *Config) *int { return &c.UpstreamConns })},
	{"fast-path", "fast_path", "relay plain unary calls frame by frame, not through the gRPC stack (the relay ends TLS on a TLS listener)", to(func(c *Config) *bool { return &c.FastPath })},
	{"shutdown-timeout", "shutdown_timeout", "drain limit for in-flight calls on SIGTERM", to(func(c *Config) *time.Duration { return &c.ShutdownTimeout })},
	{"drain-delay", "drain_delay", "after SIGTERM, keep serving this long with /readyz at 503 before closing the listener",
		to(func(c *Config) *time.Duration { return &c.DrainDelay })},
	{"upstream-timeout", "upstream_timeout", "deadline for unary calls that carry none (0 = none)", to(func(c *Config) *time.Duration { return &c.UpstreamTimeout })},
	{"upstream-keepalive-time", "upstream_keepalive_time", "ping interval to the upstream while calls are in flight (servers must allow it)",
		to(func(c *Config) *time.Duration { return &c.UpstreamKeepaliveTime })},
	{"affinity-header", "affinity_header", "request header whose value keeps a client's calls on one replica of a pool (consistent: the same value, the same replica while it is up)",
		to(func(c *Config) *string { return &c.AffinityHeader })},
	{"upstream-dns-server", "upstream_dns_server", "DNS server (host:port) resolving dns:///NAME:PORT upstreams, each address an endpoint (default: the system's resolver)",
		to(func(c *Config) *string { return &c.UpstreamDNSServer })},
	{"max-in-flight", "max_in_flight", "cap on calls in progress; beyond it RESOURCE_EXHAUSTED (0 = no cap)", to(func(c *Config) *int { return &c.MaxInFlight })},
	{"max-buffered-bytes", "front_door.max_buffered_bytes", "memory budget for every byte held for calls (a `size`: bytes, or with a unit such as 64MiB); when spent, senders wait (0 = auto: a quarter of the container's memory limit, at least 32 MiB, else 64 MiB)",
		sizeTo(func(c *Config) *int64 { return &c.FrontDoor.MaxBufferedBytes })},
	{"max-concurrent-streams", "front_door.max_concurrent_streams", "streams one client connection may have open; over it REFUSED_STREAM",
		to(func(c *Config) *int { return &c.FrontDoor.MaxConcurrentStreams })},
	{"max-connections", "front_door.max_connections", "cap on client connections; new ones past it are closed (0 = no cap)", to(func(c *Config) *int { return &c.FrontDoor.MaxConnections })},
	{"idle-timeout", "front_door.idle_timeout", "close, GOAWAY first, a client connection without streams for this long (0 = the default, negative = never)",
		to(func(c *Config) *time.Duration { return &c.FrontDoor.IdleTimeout })},
	{"max-series", "monitor.max_series", "cap on latency series; beyond it calls count as \"other\"", to(func(c *Config) *int { return &c.Monitor.MaxSeries })},
	{"series-idle-timeout", "monitor.series_idle_timeout", "drop a latency series after this long without calls",
		to(func(c *Config) *time.Duration { return &c.Monitor.SeriesIdleTimeout })},
	{"summary-windows", "monitor.summary_windows", "comma-separated `windows` (1m, 5m, 15m) whose latency summaries /metrics exports per series (the API has them all)",
		with(func(c *Config) string { return strings.Join(c.Monitor.SummaryWindows, ",") }, func(c *Config, v string) error {
			c.Monitor.SummaryWindows = nil
			for _, w := range strings.Split(v, ",") {
				if w = strings.TrimSpace(w); w != "" {
					c.Monitor.SummaryWindows = append(c.Monitor.SummaryWindows, w)
				}
			}
			return nil
		})},
	{"component-quantiles", "monitor.component_quantiles", "comma-separated `quantiles` (0.5, 0.9, 0.99, 0.999) that /metrics exports in the upstream and proxy overhead summaries (the request latency and queue summaries have all four)",
		with(func(c *Config) string {
			var qs []string
			for _, q := range c.Monitor.ComponentQuantiles {
				qs = append(qs, strconv.FormatFloat(q, 'g', -1, 64))
			}
			return strings.Join(qs, ",")
		}, func(c *Config, v string) error {
			c.Monitor.ComponentQuantiles = []float64{}
			for _, s := range strings.Split(v, ",") {
				if s = strings.TrimSpace(s); s == "" {
					continue
				}
				q, err := strconv.ParseFloat(s, 64)
				if err != nil {
					return fmt.Errorf("%q is not a number", s)
				}
				c.Monitor.ComponentQuantiles = append(c.Monitor.ComponentQuantiles, q)
			}
			return nil
		})},
	{"classic-buckets", "monitor.classic_buckets", "export infergate_request_duration_seconds's classic buckets beside its native histogram (false halves a busy model's scrape, for a Prometheus that scrapes native histograms)",
		to(func(c *Config) *bool { return &c.Monitor.ClassicBuckets })},
	{"max-label-bytes", "monitor.max_label_bytes", "longest model/version/method that becomes a label value (a `size`: bytes, or with a unit such as 1KiB)", sizeTo(func(c *Config) *int { return &c.Monitor.MaxLabelBytes })},
	{"tls-cert", "tls.cert_file", "listener TLS certificate (PEM)", to(func(c *Config) *string { return &c.TLS.CertFile })},
	{"tls-key", "tls.key_file", "listener TLS key (PEM)", to(func(c *Config) *string { return &c.TLS.KeyFile })},
	{"tls-client-ca", "tls.client_ca_file", "CA for client certificates: turns on mTLS", to(func(c *Config) *string { return &c.TLS.ClientCAFile })},
	{"upstream-tls", "upstream_tls.enabled", "use TLS towards the upstream", to(func(c *Config) *bool { return &c.UpstreamTLS.Enabled })},
	{"upstream-ca", "upstream_tls.ca_file", "CA that signs the upstream's certificate", to(func(c *Config) *string { return &c.UpstreamTLS.CAFile })},
	{"upstream-cert", "upstream_tls.cert_file", "client certificate for the upstream (mTLS)", to(func(c *Config) *string { return &c.UpstreamTLS.CertFile })},
	{"upstream-key", "upstream_tls.key_file", "client key for the upstream (mTLS)", to(func(c *Config) *string { return &c.UpstreamTLS.KeyFile })},
	{"upstream-server-name", "upstream_tls.server_name", "TLS server name of the upstream", to(func(c *Config) *string { return &c.UpstreamTLS.ServerName })},
	{"log-level", "log.level", "log `level`: debug, info, warn or error", with(func(c *Config) string { return c.Log.Level }, func(c *Config, v string) error {
		c.Log.Level = strings.ToLower(v)
		return nil
	})},
	{"log-format", "log.format", "text or json", to(func(c *Config) *string { return &c.Log.Format })},
	{"log-requests", "log.requests", "log one line per call", to(func(c *Config) *bool { return &c.Log.Requests })},
	{"log-interval", "log.interval", "least time between log lines about repeated failures of one kind", to(func(c *Config) *time.Duration { return &c.Log.Interval })},
	{"pprof", "pprof", "serve /debug/pprof/ on the admin listener (block and mutex profiles sampled too)", to(func(c *Config) *bool { return &c.Pprof })},
	{"readiness-probe", "readiness.probe", "how /readyz checks the upstream: auto, health, kserve, tfserving or tcp", to(func(c *Config) *string { return &c.Readiness.Probe })},
	{"readiness-model", "readiness.model", "model whose status the tfserving probe checks", to(func(c *Config) *string { return &c.Readiness.Model })},
	{"readiness-interval", "readiness.interval", "time between upstream readiness probes", to(func(c *Config) *time.Duration { return &c.Readiness.Interval })},
	{"readiness-timeout", "readiness.timeout", "limit of one readiness probe", to(func(c *Config) *time.Duration { return &c.Readiness.Timeout })},
	{"rules", "rules_file", "YAML file of alert rules and alerting sections (replaces those of --config)", to(func(c *Config) *string { return &c.RulesFile })},
	{"admin-token-file", "admin_token_file", "file holding the bearer token the admin API's writes need", to(func(c *Config) *string { return &c.AdminTokenFile })},
	{"alert-state-file", "alert_state_file", "file that keeps alert state, silences and sent notifications across restarts",
		to(func(c *Config) *string { return &c.AlertStateFile })},
	{"flow-control", "flow_control.enabled", "order the calls waiting when a model's replicas are full: a concurrency limit learnt per replica and model, criticality bands, fair shares between tenants",
		to(func(c *Config) *bool { return &c.FlowControl.Enabled })},
	{"tenant-header", "flow_control.tenant_header", "request header naming a call's tenant (flow control)",
		to(func(c *Config) *string { return &c.FlowControl.TenantHeader })},
	{"priority-header", "flow_control.priority_header", "request header carrying a call's criticality: critical, standard or sheddable (flow control)",
		to(func(c *Config) *string { return &c.FlowControl.PriorityHeader })},
	{"default-priority", "flow_control.default_priority", "criticality of a call that names none (flow control)",
		to(func(c *Config) *string { return &c.FlowControl.DefaultPriority })},
	{"batching", "batching.mode", "batch ModelInfer/Predict calls in this `mode`: off, static or adaptive", with(func(c *Config) string { return c.Batching.Mode }, setBatchingMode)},
	{"batch-key-headers", "batching.key_headers", "comma-separated request `headers` whose values split batches (tenant, priority)",
		with(none, func(c *Config, v string) error {
			c.Batching.KeyHeaders = nil
			for _, k := range strings.Split(v, ",") {
				if k = strings.TrimSpace(k); k != "" {
					c.Batching.KeyHeaders = append(c.Batching.KeyHeaders, strings.ToLower(k))
				}
			}
			return nil
		})},
	{"batch-models", "batching.models", "comma-separated batchable `models` (batch dimension 0)", with(none, addBatchModels)},
	{"batch-max-size", "batching.max_size", "largest batch, in rows", to(func(c *Config) *int { return &c.Batching.MaxSize })},
	{"batch-preferred-sizes", "batching.preferred_sizes", "static: comma-separated batch `sizes` sent as soon as they can be formed", with(none, setPreferredSizes)},
	{"batch-max-delay", "batching.max_delay", "static: longest the oldest request waits for a batch to fill", to(func(c *Config) *time.Duration { return &c.Batching.MaxDelay })},
	{"batch-queue-size", "batching.queue_size", "waiting requests per model before RESOURCE_EXHAUSTED", to(func(c *Config) *int { return &c.Batching.QueueSize })},
	{"batch-slo", "batching.slo", "adaptive: p99 latency target per request", to(func(c *Config) *time.Duration { return &c.Batching.SLO })},
	{"batch-slots", "batching.slots", "batches in flight per model (the upstream's execution slots)", to(func(c *Config) *int { return &c.Batching.Slots })},
	{"batch-shed", "batching.shed", "adaptive: reject with RESOURCE_EXHAUSTED, at once, a request that cannot be answered within the SLO, and one whose wait used it up",
		to(func(c *Config) *bool { return &c.Batching.Shed })},
	{"gpu-source", "gpu.sources", "GPU telemetry `source`: nvml (local driver), prometheus (scrape --gpu-metrics-url) or off",
		with(func(*Config) string { return "off" }, func(c *Config, v string) error { c.gpuSource = v; return nil })},
	{"gpu-metrics-url", "gpu.sources", "Triton (:8002/metrics), DCGM exporter (:9400/metrics) or simserver metrics `URL`",
		with(none, func(c *Config, v string) error { c.gpuURL = v; return nil })},
	{"tracing", "tracing.enabled", "make OpenTelemetry spans and send them by OTLP (OTEL_* variables configure the rest)",
		to(func(c *Config) *bool { return &c.Tracing.Enabled })},
	{"trace-endpoint", "tracing.endpoint", "OTLP collector `URL` (default: OTEL_EXPORTER_OTLP_ENDPOINT, else localhost)",
		to(func(c *Config) *string { return &c.Tracing.Endpoint })},
	{"trace-protocol", "tracing.protocol", "OTLP `protocol`: grpc or http/protobuf", to(func(c *Config) *string { return &c.Tracing.Protocol })},
	{"trace-sample-ratio", "tracing.sample_ratio", "share of new traces recorded, 0 to 1 (a client's sampled trace is always followed)",
		with(func(c *Config) string { return strconv.FormatFloat(c.Tracing.SampleRatio, 'g', -1, 64) }, func(c *Config, v string) error {
			r, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return fmt.Errorf("%q is not a number", v)
			}
			c.Tracing.SampleRatio = r
			return nil
		})},
	{"trace-max-spans-per-second", "tracing.max_spans_per_second", "tail-based sampling: export every failed call's and slow call's spans, the rest at the rate that holds exports at this many spans a second (0: off, --trace-sample-ratio decides at the call's start)",
		with(func(c *Config) string { return strconv.FormatFloat(c.Tracing.MaxSpansPerSecond, 'g', -1, 64) }, func(c *Config, v string) error {
			r, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return fmt.Errorf("%q is not a number", v)
			}
			c.Tracing.MaxSpansPerSecond = r
			return nil
		})},
	{"gpu-interval", "gpu.interval", "GPU sampling and latency-correlation period", to(func(c *Config) *time.Duration { return &c.GPU.Interval })},
	{"version", "", "print the version and exit", to(func(c *Config) *bool { return &c.PrintVersion })},
	{"check-config", "", "validate flags and the YAML file, print the result and exit (0 valid, 2 not)", to(func(c *Config) *bool { return &c.CheckOnly })},
}

// newFlagSet returns the flags bound to c, and --config bound to path.
func newFlagSet(c *Config, path *string, errs *[]error) *flag.FlagSet {
	fs := flag.NewFlagSet("infergate", flag.ContinueOnError)
	fs.StringVar(path, "config", "", "YAML config file (flags override it)")
	for _, r := range flags {
		r.bind(fs, r.name, r.usage, c, errs)
	}
	return fs
}

// parseConfig builds the config from args: the defaults, the YAML file
// named by --config decoded over them, then every flag given on the
// command line (flags win), then one validation of the result.
func parseConfig(args []string) (Config, error) {
	// The first pass reads --config and reports bad flags and -help,
	// showing the defaults; the second applies the flags over the file.
	var path string
	var errs []error
	d := defaultConfig()
	fs := newFlagSet(&d, &path, &errs)
	if err := fs.Parse(args); err != nil {
		return Config{}, err
	}
	if fs.NArg() > 0 {
		return Config{}, fmt.Errorf("config: unexpected argument %q", fs.Arg(0))
	}
	if d.PrintVersion {
		return Config{PrintVersion: true}, nil
	}
	c := defaultConfig()
	if path != "" {
		var err error
		if c, err = loadFile(path); err != nil {
			return c, err
		}
	}
	errs = nil
	fs = newFlagSet(&c, &path, &errs)
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	if given["gpu-source"] || given["gpu-metrics-url"] {
		errs = append(errs, c.gpuFlags()...)
	}
	c.GPU = c.GPU.Resolved()
	c.FrontDoor.fromFlag = given["max-buffered-bytes"]
	c.args = slices.Clone(args)
	// validate keeps what it converts (the routing plan, the alerting
	// config) in c: it runs before c is returned.
	err := c.validate()
	return c, errors.Join(append(errs, flagNames(err, fs, given)...)...)
}

// flagNames names by its flag each problem of a field that a flag set to
// 0: a command line's 0 is refused like the file's, and the message
// points at what the user typed.
func flagNames(err error, fs *flag.FlagSet, given map[string]bool) []error {
	if err == nil {
		return nil
	}
	errs := unjoin(err)
	for _, r := range flags {
		if v := fs.Lookup(r.name).Value.String(); !given[r.name] || r.field == "" || (v != "0" && v != "0s") {
			continue
		}
		prefix := "config: " + r.field + ": "
		for i, e := range errs {
			if rest, ok := strings.CutPrefix(e.Error(), prefix); ok {
				errs[i] = fmt.Errorf("config: --%s: %s", r.name, rest)
			}
		}
	}
	return errs
}
