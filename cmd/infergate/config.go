package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"reflect"
	"strings"
	"time"

	"github.com/infergate/infergate/alert"
	"github.com/infergate/infergate/batcher"
	"github.com/infergate/infergate/proxy"

	"go.yaml.in/yaml/v3"
)

// Config is everything infergate reads from its YAML file and flags. Zero
// values mean the documented defaults, filled in by Validate.
type Config struct {
	// Listen is the gRPC address clients use. Default ":9001".
	Listen string `yaml:"listen"`
	// Upstream is the model server's gRPC address (Triton :8001,
	// TF-Serving :8500). Required.
	Upstream string `yaml:"upstream"`
	// Upstreams are named model servers for routes (routing.go); the
	// first is the default upstream when upstream is empty.
	Upstreams []UpstreamConfig `yaml:"upstreams"`
	// Breaker turns on the circuit breaker of upstream (the default one).
	Breaker *BreakerYAML `yaml:"breaker"`
	// Routes are per-model routes: fallback, cascade, shedding, hedging.
	Routes []RouteYAML `yaml:"routes"`
	// RetryBudget bounds retries and hedges.
	RetryBudget RetryBudgetYAML `yaml:"retry_budget"`
	// UpstreamConns is the number of pooled HTTP/2 connections to the
	// upstream. Default 2.
	UpstreamConns int `yaml:"upstream_conns"`
	// Admin is the HTTP address for /metrics, /healthz, /readyz and the API.
	// Default "127.0.0.1:9091": loopback unless told otherwise.
	Admin string `yaml:"admin"`
	// MaxMessageBytes caps one gRPC message in either direction. Default
	// 64 MiB; tensors are big.
	MaxMessageBytes int `yaml:"max_message_bytes"`
	// ShutdownTimeout bounds the drain of in-flight calls (and queued
	// batches) after the listener closed on SIGTERM. Default 30s.
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout"`
	// DrainDelay is how long, after SIGTERM, /readyz answers 503 while
	// calls are still served, so that load balancers notice before the
	// listener closes. Default 5s; 0s turns the delay off.
	DrainDelay *time.Duration `yaml:"drain_delay"`
	// UpstreamTimeout bounds unary calls that carry no client deadline;
	// they end with DEADLINE_EXCEEDED. Default 60s; 0s means none.
	UpstreamTimeout *time.Duration `yaml:"upstream_timeout"`
	// UpstreamKeepaliveTime is the interval of HTTP/2 pings to the upstream
	// while calls are in flight and no data flows. Default 5m30s, just over
	// the 5 minutes gRPC servers (grpc-go, and gRPC core under Triton and
	// TF-Serving) allow by default: they close connections that ping more
	// often. Lower it only for servers that allow it.
	UpstreamKeepaliveTime time.Duration `yaml:"upstream_keepalive_time"`
	// MaxInFlight caps the calls in progress through the proxy; beyond it
	// calls are rejected at once with RESOURCE_EXHAUSTED. Default 10000;
	// 0 means no cap.
	MaxInFlight *int `yaml:"max_in_flight"`
	// Readiness configures the /readyz probe of the upstream.
	Readiness ReadinessConfig `yaml:"readiness"`
	// TLS configures the client-facing listener; empty means plaintext.
	TLS ServerTLS `yaml:"tls"`
	// UpstreamTLS configures the connection to the model server.
	UpstreamTLS ClientTLS `yaml:"upstream_tls"`
	// Monitor configures measurement.
	Monitor MonitorConfig `yaml:"monitor"`
	// Log configures structured logging.
	Log LogConfig `yaml:"log"`
	// Pprof serves Go's /debug/pprof/ on the admin listener. Default false.
	Pprof bool `yaml:"pprof"`
	// Batching configures request batching (batching.go). Default off.
	Batching BatchingConfig `yaml:"batching"`
	// GPU configures GPU telemetry and its correlation with latency
	// (gpu.go). Default off.
	GPU GPUConfig `yaml:"gpu"`
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
	// AdminTokenFile holds the bearer token the admin API's writes
	// (silences, acknowledgements) need; none means writes answer 403.
	AdminTokenFile string `yaml:"admin_token_file"`

	alerts     *alert.Config
	adminToken string

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

// MonitorConfig configures the latency series.
type MonitorConfig struct {
	// MaxSeries caps distinct series; beyond it calls count under "other".
	// Default 1000.
	MaxSeries int `yaml:"max_series"`
	// SeriesIdleTimeout drops a series without calls for this long, freeing
	// its memory and its place under the cap. Default 15m, the longest
	// window; shorter values cut the 5m and 15m windows of quiet series.
	SeriesIdleTimeout time.Duration `yaml:"series_idle_timeout"`
	// MaxLabelBytes is the longest model, version or method a client's call
	// may turn into a label value; longer or non-UTF-8 values count under
	// "other". Default 128.
	MaxLabelBytes int `yaml:"max_label_bytes"`
}

// ReadinessConfig configures how /readyz checks the upstream, off the
// request path, over the proxy's own upstream connections (TLS included).
type ReadinessConfig struct {
	// Probe is auto (grpc.health.v1, then KServe ServerReady, then
	// TF-Serving model metadata), health, kserve, tfserving or tcp.
	// Default auto.
	Probe string `yaml:"probe"`
	// Model is the model whose status the tfserving probe (and auto, on a
	// TF-Serving upstream) checks. Default none: the server answering is
	// enough.
	Model string `yaml:"model"`
	// Interval is the time between probes. Default 2s.
	Interval time.Duration `yaml:"interval"`
	// Timeout bounds one probe. Default 1s.
	Timeout time.Duration `yaml:"timeout"`
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
	// what was left out. Default 10s.
	Interval time.Duration `yaml:"interval"`
}

const (
	defaultListen          = ":9001"
	defaultAdmin           = "127.0.0.1:9091"
	defaultMaxMessageBytes = 64 << 20
	defaultUpstreamConns   = 2
	defaultShutdownTimeout = 30 * time.Second
	defaultMaxSeries       = 1000
	defaultDrainDelay      = 5 * time.Second
	defaultUpstreamTimeout = proxy.DefaultUpstreamTimeout
	defaultKeepaliveTime   = proxy.DefaultKeepaliveTime
	defaultMaxInFlight     = 10000
	defaultSeriesIdle      = 15 * time.Minute
	defaultMaxLabelBytes   = 128
	defaultLogInterval     = 10 * time.Second
	defaultReadyInterval   = 2 * time.Second
	defaultReadyTimeout    = time.Second
)

func ptr[T any](v T) *T { return &v }

// defaultTo sets *field to def when it holds its zero value (absent from
// the YAML file and not given as a flag).
func defaultTo[T comparable](field *T, def T) {
	var zero T
	if *field == zero {
		*field = def
	}
}

// defaultPtr is defaultTo for the fields whose explicit zero means "none"
// and whose absence is nil.
func defaultPtr[T any](field **T, def T) {
	if *field == nil {
		*field = &def
	}
}

// enabled reports whether upstream TLS is on.
func (c ClientTLS) enabled() bool {
	return c.Enabled || c.CAFile != "" || c.CertFile != "" || c.KeyFile != "" || c.ServerName != "" || c.InsecureSkipVerify
}

// Validate fills defaults, then returns every problem, each naming its field.
func (c *Config) Validate() error {
	defaultTo(&c.Listen, defaultListen)
	defaultTo(&c.Admin, defaultAdmin)
	defaultTo(&c.MaxMessageBytes, defaultMaxMessageBytes)
	defaultTo(&c.UpstreamConns, defaultUpstreamConns)
	defaultTo(&c.ShutdownTimeout, defaultShutdownTimeout)
	defaultTo(&c.Monitor.MaxSeries, defaultMaxSeries)
	defaultPtr(&c.DrainDelay, defaultDrainDelay)
	defaultPtr(&c.UpstreamTimeout, defaultUpstreamTimeout)
	defaultTo(&c.UpstreamKeepaliveTime, defaultKeepaliveTime)
	defaultPtr(&c.MaxInFlight, defaultMaxInFlight)
	defaultTo(&c.Monitor.SeriesIdleTimeout, defaultSeriesIdle)
	defaultTo(&c.Monitor.MaxLabelBytes, defaultMaxLabelBytes)
	defaultTo(&c.Log.Interval, defaultLogInterval)
	defaultTo(&c.Readiness.Probe, "auto")
	defaultTo(&c.Readiness.Interval, defaultReadyInterval)
	defaultTo(&c.Readiness.Timeout, defaultReadyTimeout)
	defaultTo(&c.Log.Level, "warn")
	defaultTo(&c.Log.Format, "text")

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
	if c.Upstream == "" && len(c.Upstreams) == 0 {
		bad("upstream", "required (the model server's gRPC address, e.g. 127.0.0.1:8001), or upstreams")
	} else if c.Upstream != "" {
		checkAddr("upstream", c.Upstream)
	}
	if c.MaxMessageBytes < 0 {
		bad("max_message_bytes", "must be positive, got %d", c.MaxMessageBytes)
	}
	if c.UpstreamConns < 0 || c.UpstreamConns > 64 {
		bad("upstream_conns", "must be between 1 and 64, got %d", c.UpstreamConns)
	}
	if c.ShutdownTimeout < 0 {
		bad("shutdown_timeout", "must be positive, got %s", c.ShutdownTimeout)
	}
	if c.Monitor.MaxSeries < 0 {
		bad("monitor.max_series", "must be positive, got %d", c.Monitor.MaxSeries)
	}
	if c.Monitor.SeriesIdleTimeout < 0 {
		bad("monitor.series_idle_timeout", "must be positive, got %s", c.Monitor.SeriesIdleTimeout)
	}
	if c.Monitor.MaxLabelBytes < 0 || c.Monitor.MaxLabelBytes > 4096 {
		bad("monitor.max_label_bytes", "must be between 1 and 4096, got %d", c.Monitor.MaxLabelBytes)
	}
	if *c.DrainDelay < 0 {
		bad("drain_delay", "must be 0 or positive, got %s", *c.DrainDelay)
	}
	if *c.UpstreamTimeout < 0 {
		bad("upstream_timeout", "must be 0 (none) or positive, got %s", *c.UpstreamTimeout)
	}
	if c.UpstreamKeepaliveTime < 10*time.Second {
		// gRPC raises anything lower to 10s anyway; saying so beats a
		// silent change.
		bad("upstream_keepalive_time", "must be at least 10s, got %s", c.UpstreamKeepaliveTime)
	}
	if *c.MaxInFlight < 0 {
		bad("max_in_flight", "must be 0 (no cap) or positive, got %d", *c.MaxInFlight)
	}
	if c.Log.Interval < 0 {
		bad("log.interval", "must be positive, got %s", c.Log.Interval)
	}
	switch c.Readiness.Probe {
	case "auto", "health", "kserve", "tfserving", "tcp":
	default:
		bad("readiness.probe", "must be auto, health, kserve, tfserving or tcp, got %q", c.Readiness.Probe)
	}
	if c.Readiness.Interval < 0 {
		bad("readiness.interval", "must be positive, got %s", c.Readiness.Interval)
	}
	if c.Readiness.Timeout < 0 {
		bad("readiness.timeout", "must be positive, got %s", c.Readiness.Timeout)
	}
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		bad("log.level", "must be debug, info, warn or error, got %q", c.Log.Level)
	}
	switch c.Log.Format {
	case "text", "json":
	default:
		bad("log.format", "must be text or json, got %q", c.Log.Format)
	}
	if (c.TLS.CertFile == "") != (c.TLS.KeyFile == "") {
		bad("tls", "cert_file and key_file must be set together")
	}
	if c.TLS.ClientCAFile != "" && c.TLS.CertFile == "" {
		bad("tls.client_ca_file", "needs tls.cert_file and tls.key_file (mTLS is on top of TLS)")
	}
	if (c.UpstreamTLS.CertFile == "") != (c.UpstreamTLS.KeyFile == "") {
		bad("upstream_tls", "cert_file and key_file must be set together")
	}
	for field, path := range map[string]string{
		"tls.cert_file": c.TLS.CertFile, "tls.key_file": c.TLS.KeyFile, "tls.client_ca_file": c.TLS.ClientCAFile,
		"upstream_tls.ca_file": c.UpstreamTLS.CAFile, "upstream_tls.cert_file": c.UpstreamTLS.CertFile,
		"upstream_tls.key_file": c.UpstreamTLS.KeyFile,
	} {
		if path == "" {
			continue
		}
		if _, err := os.Stat(path); err != nil {
			bad(field, "cannot read %q: %v", path, errors.Unwrap(err))
		}
	}
	errs = append(errs, c.validateRouting()...)
	errs = append(errs, c.Batching.validate()...)
	errs = append(errs, c.GPU.validate()...)
	errs = append(errs, c.alertingConfig()...)
	sortErrs(errs)
	return errors.Join(errs...)
}

// sortErrs orders errors by text so messages are stable (map iteration above).
func sortErrs(errs []error) {
	for i := 1; i < len(errs); i++ {
		for j := i; j > 0 && errs[j].Error() < errs[j-1].Error(); j-- {
			errs[j], errs[j-1] = errs[j-1], errs[j]
		}
	}
}

// loadFile reads a YAML config; unknown fields are errors, so a typo is
// caught before the process serves anything.
func loadFile(path string) (Config, error) {
	var c Config
	f, err := os.Open(path)
	if err != nil {
		return c, fmt.Errorf("config: %w", err)
	}
	defer f.Close()
	dec := yaml.NewDecoder(f)
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		if errors.Is(err, io.EOF) {
			return c, nil
		}
		return c, fmt.Errorf("config: %s: %s", path, yamlMessage(err))
	}
	return c, nil
}

// yamlMessage rewrites the YAML decoder's messages in the file's terms:
// "line 3: field upstreem not found in type main.Config" becomes
// `line 3: unknown field "upstreem"` (and names the section it is in),
// and Go type names in type errors become the YAML section they decode.
func yamlMessage(err error) string {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return strings.TrimPrefix(err.Error(), "yaml: ")
	}
	paths := yamlSections()
	msgs := make([]string, 0, len(te.Errors))
	for _, m := range te.Errors {
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

// yamlSections maps the Go type name of every struct the YAML file decodes
// into ("main.MonitorConfig") to its section as a user writes it
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
			tag, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if tag == "" || tag == "-" {
				continue
			}
			walk(f.Type, path+"."+tag)
		}
	}
	walk(reflect.TypeOf(Config{}), "")
	return out
}

// zeroIsNotDefault lists the flags whose field reads 0 as "use the
// default" (an absent YAML key is 0). Given explicitly on the command line,
// 0 is a mistake, not a request for the default: it is rejected with the
// field's valid range.
var zeroIsNotDefault = map[string]string{
	"max-message-bytes":       "must be positive",
	"upstream-conns":          "must be between 1 and 64",
	"max-series":              "must be positive",
	"batch-max-size":          fmt.Sprintf("must be between 1 and %d", batcher.MaxBatchSize),
	"batch-queue-size":        "must be positive",
	"batch-slo":               "must be positive",
	"batch-slots":             fmt.Sprintf("must be between 1 and %d", batcher.MaxSlots),
	"gpu-interval":            "must be positive",
	"series-idle-timeout":     "must be positive",
	"max-label-bytes":         "must be between 1 and 4096",
	"upstream-keepalive-time": "must be at least 10s",
	"log-interval":            "must be positive",
	"readiness-interval":      "must be positive",
	"readiness-timeout":       "must be positive",
}

// parseConfig builds the config from args: the YAML file named by --config
// first, then every flag that was set on the command line (flags win).
func parseConfig(args []string) (Config, error) {
	fs := flag.NewFlagSet("infergate", flag.ContinueOnError)
	var (
		configPath = fs.String("config", "", "YAML config file (flags override it)")
		listen     = fs.String("listen", defaultListen, "gRPC address clients connect to")
		upstream   = fs.String("upstream", "", "model server gRPC address (Triton :8001, TF-Serving :8500)")
		admin      = fs.String("admin", defaultAdmin, "HTTP admin address: /metrics, /healthz, /readyz")
		maxMsg     = fs.Int("max-message-bytes", defaultMaxMessageBytes, "largest gRPC message in either direction")
		conns      = fs.Int("upstream-conns", defaultUpstreamConns, "pooled HTTP/2 connections to the upstream")
		shutdown   = fs.Duration("shutdown-timeout", defaultShutdownTimeout, "drain limit for in-flight calls on SIGTERM")
		maxSeries  = fs.Int("max-series", defaultMaxSeries, "cap on latency series; beyond it calls count as \"other\"")
		tlsCert    = fs.String("tls-cert", "", "listener TLS certificate (PEM)")
		tlsKey     = fs.String("tls-key", "", "listener TLS key (PEM)")
		tlsCA      = fs.String("tls-client-ca", "", "CA for client certificates: turns on mTLS")
		upTLS      = fs.Bool("upstream-tls", false, "use TLS towards the upstream")
		upCA       = fs.String("upstream-ca", "", "CA that signs the upstream's certificate")
		upCert     = fs.String("upstream-cert", "", "client certificate for the upstream (mTLS)")
		upKey      = fs.String("upstream-key", "", "client key for the upstream (mTLS)")
		upName     = fs.String("upstream-server-name", "", "TLS server name of the upstream")
		logLevel   = fs.String("log-level", "warn", "debug, info, warn or error")
		logFormat  = fs.String("log-format", "text", "text or json")
		logReqs    = fs.Bool("log-requests", false, "log one line per call")
		pprof      = fs.Bool("pprof", false, "serve /debug/pprof/ on the admin listener")
		drainDelay = fs.Duration("drain-delay", defaultDrainDelay, "after SIGTERM, keep serving this long with /readyz at 503 before closing the listener")
		upTimeout  = fs.Duration("upstream-timeout", defaultUpstreamTimeout, "deadline for unary calls that carry none (0 = none)")
		keepalive  = fs.Duration("upstream-keepalive-time", defaultKeepaliveTime, "ping interval to the upstream while calls are in flight (servers must allow it)")
		maxIn      = fs.Int("max-in-flight", defaultMaxInFlight, "cap on calls in progress; beyond it RESOURCE_EXHAUSTED (0 = no cap)")
		idle       = fs.Duration("series-idle-timeout", defaultSeriesIdle, "drop a latency series after this long without calls")
		labelMax   = fs.Int("max-label-bytes", defaultMaxLabelBytes, "longest model/version/method that becomes a label value")
		logIvl     = fs.Duration("log-interval", defaultLogInterval, "least time between log lines about repeated failures of one kind")
		readyProbe = fs.String("readiness-probe", "auto", "how /readyz checks the upstream: auto, health, kserve, tfserving or tcp")
		readyModel = fs.String("readiness-model", "", "model whose status the tfserving probe checks")
		readyIvl   = fs.Duration("readiness-interval", defaultReadyInterval, "time between upstream readiness probes")
		readyTO    = fs.Duration("readiness-timeout", defaultReadyTimeout, "limit of one readiness probe")
		version    = fs.Bool("version", false, "print the version and exit")
		checkOnly  = fs.Bool("check-config", false, "validate flags and the YAML file, print the result and exit (0 valid, 2 not)")
		rulesFile  = fs.String("rules", "", "YAML file of alert rules and alerting sections (replaces those of --config)")
		tokenFile  = fs.String("admin-token-file", "", "file holding the bearer token the admin API's writes need")
		alertState = fs.String("alert-state-file", "", "file that keeps alert state, silences and sent notifications across restarts")
		fallbacks  []RouteYAML
	)
	fs.Func("fallback", "MODEL=HOST:PORT[/FALLBACK_MODEL[:VERSION]]: serve MODEL from this fallback while its primary is in trouble (repeatable)", func(v string) error {
		r, err := parseFallbackFlag(v)
		if err != nil {
			return err
		}
		fallbacks = append(fallbacks, r)
		return nil
	})
	batchFlags := addBatchingFlags(fs)
	gpuFlags := addGPUFlags(fs)
	if err := fs.Parse(args); err != nil {
		return Config{}, err
	}
	if fs.NArg() > 0 {
		return Config{}, fmt.Errorf("config: unexpected argument %q", fs.Arg(0))
	}
	if *version {
		return Config{PrintVersion: true}, nil
	}
	var c Config
	if *configPath != "" {
		var err error
		if c, err = loadFile(*configPath); err != nil {
			return c, err
		}
	}
	var flagErrs []error
	fs.Visit(func(f *flag.Flag) {
		if rule, ok := zeroIsNotDefault[f.Name]; ok && (f.Value.String() == "0" || f.Value.String() == "0s") {
			flagErrs = append(flagErrs, fmt.Errorf("config: --%s: %s, got %s", f.Name, rule, f.Value))
		}
		switch f.Name {
		case "listen":
			c.Listen = *listen
		case "upstream":
			c.Upstream = *upstream
		case "admin":
			c.Admin = *admin
		case "max-message-bytes":
			c.MaxMessageBytes = *maxMsg
		case "upstream-conns":
			c.UpstreamConns = *conns
		case "shutdown-timeout":
			c.ShutdownTimeout = *shutdown
		case "max-series":
			c.Monitor.MaxSeries = *maxSeries
		case "tls-cert":
			c.TLS.CertFile = *tlsCert
		case "tls-key":
			c.TLS.KeyFile = *tlsKey
		case "tls-client-ca":
			c.TLS.ClientCAFile = *tlsCA
		case "upstream-tls":
			c.UpstreamTLS.Enabled = *upTLS
		case "upstream-ca":
			c.UpstreamTLS.CAFile = *upCA
		case "upstream-cert":
			c.UpstreamTLS.CertFile = *upCert
		case "upstream-key":
			c.UpstreamTLS.KeyFile = *upKey
		case "upstream-server-name":
			c.UpstreamTLS.ServerName = *upName
		case "log-level":
			c.Log.Level = strings.ToLower(*logLevel)
		case "log-format":
			c.Log.Format = *logFormat
		case "log-requests":
			c.Log.Requests = *logReqs
		case "pprof":
			c.Pprof = *pprof
		case "drain-delay":
			c.DrainDelay = ptr(*drainDelay)
		case "upstream-timeout":
			c.UpstreamTimeout = ptr(*upTimeout)
		case "upstream-keepalive-time":
			c.UpstreamKeepaliveTime = *keepalive
		case "max-in-flight":
			c.MaxInFlight = ptr(*maxIn)
		case "series-idle-timeout":
			c.Monitor.SeriesIdleTimeout = *idle
		case "max-label-bytes":
			c.Monitor.MaxLabelBytes = *labelMax
		case "log-interval":
			c.Log.Interval = *logIvl
		case "readiness-probe":
			c.Readiness.Probe = *readyProbe
		case "readiness-model":
			c.Readiness.Model = *readyModel
		case "readiness-interval":
			c.Readiness.Interval = *readyIvl
		case "readiness-timeout":
			c.Readiness.Timeout = *readyTO
		case "rules":
			c.RulesFile = *rulesFile
		case "admin-token-file":
			c.AdminTokenFile = *tokenFile
		case "alert-state-file":
			c.AlertStateFile = *alertState
		case "fallback":
			// Flags win: a flag's model replaces the file's route fallback.
			for _, fr := range fallbacks {
				replaced := false
				for i := range c.Routes {
					if c.Routes[i].Model == fr.Model {
						c.Routes[i].Fallback, replaced = fr.Fallback, true
					}
				}
				if !replaced {
					c.Routes = append(c.Routes, fr)
				}
			}
		case "version", "check-config":
		default:
			batchFlags.apply(f.Name, &c.Batching, &flagErrs)
			gpuFlags.apply(f.Name, &c.GPU)
		}
	})
	err := errors.Join(append(flagErrs, c.Validate())...)
	c.CheckOnly = *checkOnly
	return c, err
}
