package notify

import (
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

func TestValidateErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  ReceiverConfig
		want string
	}{
		{"ok", ReceiverConfig{Name: "oncall", Webhook: []WebhookConfig{{URL: "http://hook"}}, Log: true}, ""},
		{"empty receiver is a blackhole", ReceiverConfig{Name: "null"}, ""},
		{"name", ReceiverConfig{Log: true}, `receiver "": name: missing`},
		{"webhook url", ReceiverConfig{Name: "oncall", Webhook: []WebhookConfig{{}, {URL: "x"}, {URL: "ftp://h/"}, {URL: "http://"}, {URL: "http://h", Timeout: -time.Second}}},
			`receiver "oncall": webhook_configs[0].url: missing` + "\n" +
				`receiver "oncall": webhook_configs[1].url "x": must be http or https` + "\n" +
				`receiver "oncall": webhook_configs[2].url "ftp://h/": must be http or https` + "\n" +
				`receiver "oncall": webhook_configs[3].url "http://": missing host` + "\n" +
				`receiver "oncall": webhook_configs[4].timeout "-1s": must not be negative`},
		{"webhook url unparsable", ReceiverConfig{Name: "oncall", Webhook: []WebhookConfig{{URL: "http://a b/%zz"}}},
			`receiver "oncall": webhook_configs[0].url "http://a b/%zz": not a URL`},
		{"headers", ReceiverConfig{Name: "oncall", Webhook: []WebhookConfig{{URL: "http://h", Headers: map[string]string{"Bad Name": "v", "X-Ok": "a\r\nb"}}}},
			`receiver "oncall": webhook_configs[0].headers "Bad Name": not a valid header name` + "\n" +
				`receiver "oncall": webhook_configs[0].headers[X-Ok]: must not contain a line break`},
		{"alertmanager", ReceiverConfig{Name: "am", Alertmanager: []AlertmanagerConfig{{}, {URLs: []string{"http://a:9093", "b:9093"}, ResendValidity: -time.Minute}}},
			`receiver "am": alertmanager_configs[0].urls: missing` + "\n" +
				`receiver "am": alertmanager_configs[1].urls[1] "b:9093": must be http or https` + "\n" +
				`receiver "am": alertmanager_configs[1].resend_validity "-1m0s": must not be negative`},
		{"slack and wecom", ReceiverConfig{Name: "chat", Slack: []SlackConfig{{}}, WeCom: []WeComConfig{{URL: "qyapi.weixin.qq.com"}}},
			`receiver "chat": slack_configs[0].url: missing` + "\n" +
				`receiver "chat": wecom_configs[0].url "qyapi.weixin.qq.com": must be http or https`},
		{"email", ReceiverConfig{Name: "mail", Email: []EmailConfig{
			{},
			{To: []string{"ops@example.com", "not an address"}, From: "Infergate <alerts@example.com>", Smarthost: "smtp.example.com", AuthUsername: "u"},
			{To: []string{"ops@example.com"}, From: "alerts@example.com", Smarthost: "smtp:25", AuthPasswordFile: "/p"},
		}},
			`receiver "mail": email_configs[0].to: missing` + "\n" +
				`receiver "mail": email_configs[0].from: missing` + "\n" +
				`receiver "mail": email_configs[0].smarthost: missing` + "\n" +
				`receiver "mail": email_configs[1].to[1] "not an address": not an e-mail address` + "\n" +
				`receiver "mail": email_configs[1].smarthost "smtp.example.com": must be host:port` + "\n" +
				`receiver "mail": email_configs[1].auth_password_file: missing (auth_username is set)` + "\n" +
				`receiver "mail": email_configs[2].auth_username: missing (auth_password_file is set)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ""
			if err := tc.cfg.Validate(); err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Errorf("Validate:\n%s\nwant:\n%s", got, tc.want)
			}
		})
	}
}

// TestConfigYAML loads a config the way the caller does and checks the
// field names, duration parsing and the defaults Validate fills in.
func TestConfigYAML(t *testing.T) {
	const doc = `
name: oncall
webhook_configs:
  - url: https://hooks.example.com/infergate
    timeout: 3s
    headers: {X-Tenant: ml}
    bearer_token_file: /run/secrets/hook
alertmanager_configs:
  - urls: [http://127.0.0.1:9093, http://127.0.0.1:9094]
slack_configs:
  - url: https://hooks.slack.com/services/T/B/X
    channel: "#alerts"
    username: infergate
wecom_configs:
  - url: https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key=k
    mentioned_mobile_list: ["13800000000"]
email_configs:
  - to: [ops@example.com]
    from: alerts@example.com
    smarthost: smtp.example.com:587
    auth_username: alerts
    auth_password_file: /run/secrets/smtp
    require_tls: true
    headers: {Reply-To: ops@example.com}
log: true
`
	var c ReceiverConfig
	if err := yaml.Unmarshal([]byte(doc), &c); err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"webhook timeout", c.Webhook[0].Timeout, 3 * time.Second},
		{"webhook header", c.Webhook[0].Headers["X-Tenant"], "ml"},
		{"webhook bearer", c.Webhook[0].BearerTokenFile, "/run/secrets/hook"},
		{"alertmanager urls", len(c.Alertmanager[0].URLs), 2},
		{"alertmanager default timeout", c.Alertmanager[0].Timeout, DefaultTimeout},
		{"alertmanager default validity", c.Alertmanager[0].ResendValidity, DefaultResendValidity},
		{"slack channel", c.Slack[0].Channel, "#alerts"},
		{"slack username", c.Slack[0].Username, "infergate"},
		{"slack default timeout", c.Slack[0].Timeout, DefaultTimeout},
		{"wecom mentions", len(c.WeCom[0].MentionedMobileList), 1},
		{"email smarthost", c.Email[0].Smarthost, "smtp.example.com:587"},
		{"email require_tls", c.Email[0].RequireTLS, true},
		{"email password file", c.Email[0].AuthPasswordFile, "/run/secrets/smtp"},
		{"email header", c.Email[0].Headers["Reply-To"], "ops@example.com"},
		{"email default timeout", c.Email[0].Timeout, DefaultTimeout},
		{"log", c.Log, true},
	}
	for _, ch := range checks {
		if ch.got != ch.want {
			t.Errorf("%s = %v, want %v", ch.name, ch.got, ch.want)
		}
	}
}
