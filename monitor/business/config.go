package business

import (
	"fmt"
	"net/url"
	"regexp"
	"time"
)

// Defaults of a metric's optional settings.
const (
	// DefaultInterval is how often a metric is read: Prometheus' usual
	// scrape interval, so each read sees a new sample.
	DefaultInterval = 15 * time.Second
	DefaultTimeout  = 5 * time.Second
	// DefaultHistory bounds the samples the lag search runs over: 480 at
	// 15 s, enough to see a few rises and falls without weighing last
	// week's traffic.
	DefaultHistory = 2 * time.Hour
	DefaultMaxLag  = 5 * time.Minute
)

// Config is one entry of business_metrics.
type Config struct {
	// Name labels the metric (infergate_business_metric{name}) and keys
	// it on /api/v1/models and /api/v1/status.
	Name string `yaml:"name"`
	// Query is a PromQL expression of one series (wrap it in sum() or
	// avg() when it has several), read as an instant query.
	Query string `yaml:"query"`
	// URL is the Prometheus server (http://prometheus:9090), as gpu's
	// prometheus sources name theirs: the API path is appended.
	URL string `yaml:"url"`
	// Interval is the read period and the step of the lag search.
	Interval time.Duration `yaml:"interval"`
	// Timeout bounds one read; at most Interval, so reads never queue.
	Timeout time.Duration `yaml:"timeout"`
	// History is how far back the correlation looks.
	History time.Duration `yaml:"history"`
	// MaxLag bounds the lags searched, both ways.
	MaxLag time.Duration `yaml:"max_lag"`
}

// WithDefaults fills the settings left at zero.
func (c Config) WithDefaults() Config {
	if c.Interval == 0 {
		c.Interval = DefaultInterval
	}
	if c.Timeout == 0 {
		c.Timeout = min(DefaultTimeout, c.Interval)
	}
	if c.History == 0 {
		c.History = DefaultHistory
	}
	if c.MaxLag == 0 {
		c.MaxLag = DefaultMaxLag
	}
	return c
}

// steps returns the history and the largest lag in intervals.
func (c Config) steps() (history, maxLag int) {
	return max(1, int(c.History/c.Interval)), int(c.MaxLag / c.Interval)
}

var nameRE = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_:-]*$`)

// Problems returns one error per bad field, each named as the file
// spells it (business_metrics[1].query).
func Problems(cs []Config) []error {
	var errs []error
	seen := map[string]int{}
	for i, c := range cs {
		field := fmt.Sprintf("business_metrics[%d]", i)
		bad := func(f, format string, args ...any) {
			errs = append(errs, fmt.Errorf("%s.%s: %s", field, f, fmt.Sprintf(format, args...)))
		}
		switch j, dup := seen[c.Name]; {
		case c.Name == "":
			bad("name", "must be set")
		case !nameRE.MatchString(c.Name):
			bad("name", "must be letters, digits, _, : or -, got %q", c.Name)
		case dup:
			bad("name", "%q is already business_metrics[%d]", c.Name, j)
		default:
			seen[c.Name] = i
		}
		if c.Query == "" {
			bad("query", "must be set (a PromQL expression of one series)")
		}
		if u, err := url.Parse(c.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad("url", "must be the http(s) URL of a Prometheus server (e.g. http://prometheus:9090), got %q", c.URL)
		}
		c = c.WithDefaults()
		if c.Interval < 0 {
			bad("interval", "must be positive, got %s", c.Interval)
		}
		if c.Timeout < 0 || (c.Interval > 0 && c.Timeout > c.Interval) {
			bad("timeout", "must be positive and at most interval (%s), got %s", c.Interval, c.Timeout)
		}
		if c.Interval > 0 && c.History < 4*c.Interval {
			bad("history", "must be at least 4 intervals (%s), got %s", 4*c.Interval, c.History)
		}
		if c.MaxLag < 0 || c.MaxLag >= c.History {
			bad("max_lag", "must be 0 or positive and below history (%s), got %s", c.History, c.MaxLag)
		}
	}
	return errs
}
