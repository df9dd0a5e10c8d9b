package main

import (
	"errors"
	"flag"
	"fmt"
	"github.com/infergate/infergate/batcher"
	"io"
	"net"
	"os"
	"strings"
	"time"

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
	// UpstreamConns is the number of pooled HTTP/2 connections to the
	// upstream. Default 2.
	UpstreamConns int `yaml:"upstream_conns"`
	// Admin is the HTTP address for /metrics, /healthz, /readyz and the API.
	// Default "127.0.0.1:9091": loopback unless told otherwise.
	Admin string `yaml:"admin"`
	// MaxMessageBytes caps one gRPC message in either direction. Default
	// 64 MiB; tensors are big.
	MaxMessageBytes int `yaml:"max_message_bytes"`
	// ShutdownTimeout bounds the drain of in-flight calls on SIGTERM.
	// Default 30s.
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout"`
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
}

// LogConfig configures log/slog output on stderr.
type LogConfig struct {
	// Level is debug, info, warn or error. Default warn (quiet).
	Level string `yaml:"level"`
	// Format is text or json. Default text.
	Format string `yaml:"format"`
	// Requests logs one line per call at info level. Default false.
	Requests bool `yaml:"requests"`
}

const (
	defaultListen          = ":9001"
	defaultAdmin           = "127.0.0.1:9091"
	defaultMaxMessageBytes = 64 << 20
	defaultUpstreamConns   = 2
	defaultShutdownTimeout = 30 * time.Second
	defaultMaxSeries       = 1000
)

// enabled reports whether upstream TLS is on.
func (c ClientTLS) enabled() bool {
	return c.Enabled || c.CAFile != "" || c.CertFile != "" || c.KeyFile != "" || c.ServerName != "" || c.InsecureSkipVerify
}

// Validate fills defaults, then returns every problem, each naming its field.
func (c *Config) Validate() error {
	if c.Listen == "" {
		c.Listen = defaultListen
	}
	if c.Admin == "" {
		c.Admin = defaultAdmin
	}
	if c.MaxMessageBytes == 0 {
		c.MaxMessageBytes = defaultMaxMessageBytes
	}
	if c.UpstreamConns == 0 {
		c.UpstreamConns = defaultUpstreamConns
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = defaultShutdownTimeout
	}
	if c.Monitor.MaxSeries == 0 {
		c.Monitor.MaxSeries = defaultMaxSeries
	}
	if c.Log.Level == "" {
		c.Log.Level = "warn"
	}
	if c.Log.Format == "" {
		c.Log.Format = "text"
	}

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
	if c.Upstream == "" {
		bad("upstream", "required (the model server's gRPC address, e.g. 127.0.0.1:8001)")
	} else {
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
	errs = append(errs, c.Batching.validate()...)
	errs = append(errs, c.GPU.validate()...)
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
		return c, fmt.Errorf("config: %s: %w", path, err)
	}
	return c, nil
}

// zeroIsNotDefault lists the flags whose field reads 0 as "use the
// default" (an absent YAML key is 0). Given explicitly on the command line,
// 0 is a mistake, not a request for the default: it is rejected with the
// field's valid range.
var zeroIsNotDefault = map[string]string{
	"max-message-bytes": "must be positive",
	"upstream-conns":    "must be between 1 and 64",
	"max-series":        "must be positive",
	"batch-max-size":    fmt.Sprintf("must be between 1 and %d", batcher.MaxBatchSize),
	"batch-queue-size":  "must be positive",
	"batch-slo":         "must be positive",
	"batch-slots":       "must be between 1 and 1024",
	"gpu-interval":      "must be positive",
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
	)
	batchFlags := addBatchingFlags(fs)
	gpuFlags := addGPUFlags(fs)
	if err := fs.Parse(args); err != nil {
		return Config{}, err
	}
	if fs.NArg() > 0 {
		return Config{}, fmt.Errorf("config: unexpected argument %q", fs.Arg(0))
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
		default:
			batchFlags.apply(f.Name, &c.Batching, &flagErrs)
			gpuFlags.apply(f.Name, &c.GPU)
		}
	})
	return c, errors.Join(append(flagErrs, c.Validate())...)
}
