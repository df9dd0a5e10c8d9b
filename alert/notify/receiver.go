package notify

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"
)

// Receiver delivers messages to every integration of one receiver, each
// through its own [Sender], so that a slow or failing integration holds up
// none of the others.
type Receiver struct {
	name    string
	senders []*Sender
	// resendEvery and resendTo: the shortest resend_interval of the
	// alertmanager integrations, and their names.
	resendEvery time.Duration
	resendTo    []string
}

// Build validates cfg (see [ReceiverConfig.Validate]) and starts one
// Sender per integration. Stop the Receiver with Close.
func Build(cfg ReceiverConfig, opts ...Option) (*Receiver, error) {
	// Validate fills defaults in cfg, a copy; its slices are copied too
	// so that the caller's config is left as it was.
	cfg.Webhook = append([]WebhookConfig(nil), cfg.Webhook...)
	cfg.Alertmanager = append([]AlertmanagerConfig(nil), cfg.Alertmanager...)
	cfg.Slack = append([]SlackConfig(nil), cfg.Slack...)
	cfg.WeCom = append([]WeComConfig(nil), cfg.WeCom...)
	cfg.Email = append([]EmailConfig(nil), cfg.Email...)
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	o := newOptions(opts)
	r := &Receiver{name: cfg.Name}
	add := func(kind string, i, count int, n Notifier) {
		integration := kind
		if count > 1 {
			integration = fmt.Sprintf("%s/%d", kind, i)
		}
		r.senders = append(r.senders, newSender(cfg.Name, integration, n, o))
	}
	for i, c := range cfg.Webhook {
		add("webhook", i, len(cfg.Webhook), &webhookNotifier{cfg: c, client: o.client})
	}
	for i, c := range cfg.Alertmanager {
		add("alertmanager", i, len(cfg.Alertmanager), &alertmanagerNotifier{cfg: c, client: o.client, now: o.now})
		r.resendTo = append(r.resendTo, r.senders[len(r.senders)-1].integration)
		if r.resendEvery == 0 || c.ResendInterval < r.resendEvery {
			r.resendEvery = c.ResendInterval
		}
	}
	for i, c := range cfg.Slack {
		add("slack", i, len(cfg.Slack), &slackNotifier{cfg: c, client: o.client})
	}
	for i, c := range cfg.WeCom {
		add("wecom", i, len(cfg.WeCom), &wecomNotifier{cfg: c, client: o.client})
	}
	for i, c := range cfg.Email {
		add("email", i, len(cfg.Email), &emailNotifier{cfg: c, now: o.now})
	}
	if cfg.Log {
		l := o.logger
		if l == nil {
			l = slog.Default()
		}
		add("log", 0, 1, &logNotifier{log: l})
	}
	return r, nil
}

// Name returns the receiver's name.
func (r *Receiver) Name() string { return r.name }

// Send queues m for every integration and returns at once; it never
// blocks. m must not be modified afterwards.
func (r *Receiver) Send(m *Message) {
	for _, s := range r.senders {
		s.Send(m)
	}
}

// Integrations returns the names of the receiver's integrations, e.g.
// "webhook", "alertmanager/1", in config order.
func (r *Receiver) Integrations() []string {
	names := make([]string, len(r.senders))
	for i, s := range r.senders {
		names[i] = s.integration
	}
	return names
}

// Resend returns how often firing alerts must go again to the receiver's
// alertmanager integrations, and their names; 0 and nil when it has none.
func (r *Receiver) Resend() (every time.Duration, to []string) { return r.resendEvery, r.resendTo }

// SendTracked queues m, made at at, for the integrations named (all when
// only is nil) and returns at once; done is called once per integration
// with how it ended (see [Sender.SendTracked]).
func (r *Receiver) SendTracked(m *Message, at time.Time, only []string, done func(integration string, o Outcome)) {
	for _, s := range r.senders {
		if only != nil && !slices.Contains(only, s.integration) {
			continue
		}
		s.SendTracked(m, at, func(o Outcome) { done(s.integration, o) })
	}
}

// Close stops accepting messages and lets every integration deliver what
// it has queued until ctx ends, then stops them all (see [Sender.Close]).
// It returns ctx's error when some messages were given up.
func (r *Receiver) Close(ctx context.Context) error {
	errs := make([]error, len(r.senders))
	var wg sync.WaitGroup
	for i, s := range r.senders {
		wg.Go(func() { errs[i] = s.Close(ctx) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
