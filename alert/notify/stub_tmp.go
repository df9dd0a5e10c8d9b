package notify

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
)

// Temporary stand-in until the notifiers land.

type ReceiverConfig struct {
	Name    string `yaml:"name"`
	Log     bool   `yaml:"log"`
	Webhook []struct {
		URL string `yaml:"url"`
	} `yaml:"webhook_configs"`
}

func (c *ReceiverConfig) Validate() error {
	if c.Name == "" {
		return fmt.Errorf("receiver: name: missing")
	}
	return nil
}

type Option interface{ apply() }

type Metrics struct{}

func NewMetrics(reg prometheus.Registerer) *Metrics { return &Metrics{} }

func WithLogger(l *slog.Logger) Option { return nil }
func WithMetrics(m *Metrics) Option    { return nil }

type Receiver struct{ Name string }

func Build(cfg ReceiverConfig, opts ...Option) (*Receiver, error) {
	return &Receiver{Name: cfg.Name}, nil
}
func (r *Receiver) Send(m *Message)                 {}
func (r *Receiver) Close(ctx context.Context) error { return nil }
func Text(m *Message) string                        { return fmt.Sprint(m) }
