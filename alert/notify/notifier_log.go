package notify

import (
	"context"
	"log/slog"
)

// logNotifier writes messages to a logger: a receiver for development, and
// a record in the log next to the other integrations.
type logNotifier struct {
	log *slog.Logger
}

// Notify logs m at Warn while firing and at Info once resolved. It never
// fails.
func (n *logNotifier) Notify(ctx context.Context, m *Message) (bool, error) {
	level := slog.LevelWarn
	if m.Status == StatusResolved {
		level = slog.LevelInfo
	}
	n.log.Log(ctx, level, Text(m),
		"receiver", m.Receiver, "group", m.GroupKey, "status", m.Status, "count", len(m.Alerts))
	return false, nil
}
