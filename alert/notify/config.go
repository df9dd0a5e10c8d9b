package notify

import (
	"errors"
	"fmt"
	"net"
	"net/mail"
	"net/url"
	"strings"
	"time"
)

// Defaults filled in by [ReceiverConfig.Validate].
const (
	// DefaultTimeout bounds one delivery attempt of one integration.
	DefaultTimeout = 10 * time.Second
	// DefaultResendValidity is how far in the future the alertmanager
	// integration sets a firing alert's endsAt: 4× the engine's resend
	// interval of one minute, as Prometheus does, so Alertmanager resolves
	// the alert by itself if infergate dies.
	DefaultResendValidity = 4 * time.Minute
	// DefaultResendInterval is how often firing alerts go again to an
	// alertmanager integration (Prometheus's --rules.alert.resend-delay).
	DefaultResendInterval = time.Minute
)

// ReceiverConfig configures one receiver: a name and any number of
// integrations, each delivered independently. A receiver with no
// integration is valid and discards what it gets, like Alertmanager's.
type ReceiverConfig struct {
	Name         string               `yaml:"name"`
	Webhook      []WebhookConfig      `yaml:"webhook_configs"`
	Alertmanager []AlertmanagerConfig `yaml:"alertmanager_configs"`
	Slack        []SlackConfig        `yaml:"slack_configs"`
	WeCom        []WeComConfig        `yaml:"wecom_configs"`
	Email        []EmailConfig        `yaml:"email_configs"`
	Log          bool                 `yaml:"log"`
}

// WebhookConfig posts Alertmanager's webhook JSON to URL.
type WebhookConfig struct {
	URL     string        `yaml:"url"`
	Timeout time.Duration `yaml:"timeout"`
	// Headers are added to every request.
	Headers map[string]string `yaml:"headers"`
	// BearerTokenFile, when set, is read at every send (so a rotated
	// token is picked up) and sent as "Authorization: Bearer <token>".
	BearerTokenFile string `yaml:"bearer_token_file"`
}

// AlertmanagerConfig posts alerts to Alertmanager's API v2.
type AlertmanagerConfig struct {
	// URLs lists every peer of the Alertmanager cluster, e.g.
	// http://127.0.0.1:9093; each gets every alert, and the cluster
	// deduplicates, as with Prometheus.
	URLs    []string      `yaml:"urls"`
	Timeout time.Duration `yaml:"timeout"`
	// ResendValidity is added to the send time to form a firing alert's
	// endsAt; default DefaultResendValidity. It must exceed
	// ResendInterval, or Alertmanager resolves a firing alert between
	// two re-sends.
	ResendValidity time.Duration `yaml:"resend_validity"`
	// ResendInterval is how often firing alerts are sent again to this
	// integration, whatever the route's repeat_interval (which paces
	// people): Alertmanager expects them, as from Prometheus, and a
	// restarted Alertmanager learns them within one interval. Default
	// DefaultResendInterval.
	ResendInterval time.Duration `yaml:"resend_interval"`
}

// SlackConfig posts {"text": ...} to a Slack-compatible incoming webhook
// (Slack, Mattermost, Rocket.Chat, ...).
type SlackConfig struct {
	URL      string        `yaml:"url"`
	Channel  string        `yaml:"channel"`
	Username string        `yaml:"username"`
	Timeout  time.Duration `yaml:"timeout"`
}

// WeComConfig posts to a WeCom (企业微信) group robot,
// https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key=...
type WeComConfig struct {
	URL     string        `yaml:"url"`
	Timeout time.Duration `yaml:"timeout"`
	// MentionedMobileList @-mentions these phone numbers ("@all" for
	// everyone). WeCom supports mentions only in text messages, so when
	// it is set the robot sends a text message instead of markdown.
	MentionedMobileList []string `yaml:"mentioned_mobile_list"`
}

// EmailConfig sends plain-text e-mail over SMTP.
type EmailConfig struct {
	To []string `yaml:"to"`
	// From is the sender, "alerts@example.com" or
	// "Infergate <alerts@example.com>".
	From string `yaml:"from"`
	// Smarthost is the SMTP server as host:port. Port 465 speaks TLS
	// from the start; any other port upgrades with STARTTLS when offered.
	Smarthost        string `yaml:"smarthost"`
	AuthUsername     string `yaml:"auth_username"`
	AuthPasswordFile string `yaml:"auth_password_file"`
	// RequireTLS fails the send when the server does not offer STARTTLS,
	// rather than sending in clear text.
	RequireTLS bool              `yaml:"require_tls"`
	Timeout    time.Duration     `yaml:"timeout"`
	Headers    map[string]string `yaml:"headers"`
}

// Validate checks c and fills in defaults (timeouts, resend validity). Its
// error joins one error per problem, each naming the field as written in
// YAML, e.g.
//
//	receiver "oncall": webhook_configs[0].url: missing
func (c *ReceiverConfig) Validate() error {
	v := validator{prefix: fmt.Sprintf("receiver %q: ", c.Name)}
	if c.Name == "" {
		v.add("name", "missing")
	}
	for i := range c.Webhook {
		w := &c.Webhook[i]
		f := fmt.Sprintf("webhook_configs[%d].", i)
		v.url(f+"url", w.URL)
		v.timeout(f+"timeout", &w.Timeout, DefaultTimeout)
		v.headers(f+"headers", w.Headers)
	}
	for i := range c.Alertmanager {
		a := &c.Alertmanager[i]
		f := fmt.Sprintf("alertmanager_configs[%d].", i)
		if len(a.URLs) == 0 {
			v.add(f+"urls", "missing")
		}
		for j, u := range a.URLs {
			v.url(fmt.Sprintf("%surls[%d]", f, j), u)
		}
		v.timeout(f+"timeout", &a.Timeout, DefaultTimeout)
		v.timeout(f+"resend_validity", &a.ResendValidity, DefaultResendValidity)
		v.timeout(f+"resend_interval", &a.ResendInterval, DefaultResendInterval)
		if a.ResendInterval > 0 && a.ResendInterval < time.Second {
			v.add(f+"resend_interval", fmt.Sprintf("%s: at least 1s", a.ResendInterval))
		}
		if a.ResendInterval > 0 && a.ResendValidity > 0 && a.ResendValidity <= a.ResendInterval {
			v.add(f+"resend_validity", fmt.Sprintf("%s must exceed resend_interval (%s), or Alertmanager resolves firing alerts between re-sends", a.ResendValidity, a.ResendInterval))
		}
	}
	for i := range c.Slack {
		s := &c.Slack[i]
		f := fmt.Sprintf("slack_configs[%d].", i)
		v.url(f+"url", s.URL)
		v.timeout(f+"timeout", &s.Timeout, DefaultTimeout)
	}
	for i := range c.WeCom {
		w := &c.WeCom[i]
		f := fmt.Sprintf("wecom_configs[%d].", i)
		v.url(f+"url", w.URL)
		v.timeout(f+"timeout", &w.Timeout, DefaultTimeout)
	}
	for i := range c.Email {
		e := &c.Email[i]
		f := fmt.Sprintf("email_configs[%d].", i)
		if len(e.To) == 0 {
			v.add(f+"to", "missing")
		}
		for j, to := range e.To {
			v.address(fmt.Sprintf("%sto[%d]", f, j), to)
		}
		v.address(f+"from", e.From)
		switch host, port, err := net.SplitHostPort(e.Smarthost); {
		case e.Smarthost == "":
			v.add(f+"smarthost", "missing")
		case err != nil || host == "" || port == "":
			v.add(fmt.Sprintf("%ssmarthost %q", f, e.Smarthost), "must be host:port")
		}
		if e.AuthUsername != "" && e.AuthPasswordFile == "" {
			v.add(f+"auth_password_file", "missing (auth_username is set)")
		}
		if e.AuthUsername == "" && e.AuthPasswordFile != "" {
			v.add(f+"auth_username", "missing (auth_password_file is set)")
		}
		v.timeout(f+"timeout", &e.Timeout, DefaultTimeout)
		v.headers(f+"headers", e.Headers)
	}
	return errors.Join(v.errs...)
}

// validator collects the errors of one receiver.
type validator struct {
	prefix string
	errs   []error
}

func (v *validator) add(field, problem string) {
	v.errs = append(v.errs, errors.New(v.prefix+field+": "+problem))
}

// url accepts absolute http and https URLs with a host.
func (v *validator) url(field, s string) {
	if s == "" {
		v.add(field, "missing")
		return
	}
	field = fmt.Sprintf("%s %q", field, s)
	u, err := url.Parse(s)
	switch {
	case err != nil:
		v.add(field, "not a URL")
	case u.Scheme != "http" && u.Scheme != "https":
		v.add(field, "must be http or https")
	case u.Host == "":
		v.add(field, "missing host")
	}
}

// timeout rejects negative durations and replaces zero with def.
func (v *validator) timeout(field string, d *time.Duration, def time.Duration) {
	switch {
	case *d < 0:
		v.add(fmt.Sprintf("%s %q", field, d.String()), "must not be negative")
	case *d == 0:
		*d = def
	}
}

// address accepts one RFC 5322 address, with or without a display name.
func (v *validator) address(field, s string) {
	if s == "" {
		v.add(field, "missing")
		return
	}
	if _, err := mail.ParseAddress(s); err != nil {
		v.add(fmt.Sprintf("%s %q", field, s), "not an e-mail address")
	}
}

// headers rejects names and values that would break the request or the
// message they are written into.
func (v *validator) headers(field string, h map[string]string) {
	for _, k := range sortedKeys(h) {
		switch {
		case k == "" || strings.ContainsFunc(k, func(r rune) bool { return r <= ' ' || r >= 0x7f || r == ':' }):
			v.add(fmt.Sprintf("%s %q", field, k), "not a valid header name")
		case strings.ContainsAny(h[k], "\r\n"):
			v.add(fmt.Sprintf("%s[%s]", field, k), "must not contain a line break")
		}
	}
}
