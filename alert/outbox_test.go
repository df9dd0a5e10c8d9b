package alert

import (
	"log/slog"
	"testing"
	"time"

	"github.com/infergate/infergate/alert/notify"
)

// TestOutboxOwesOnce: the same content owed to the same receiver is owed
// once; a change, or another group, is owed again; what every integration
// settled leaves; an abandoned one stays owed.
func TestOutboxOwesOnce(t *testing.T) {
	o := &outbox{log: slog.New(slog.DiscardHandler)}
	now := newClock().now()
	firing := func(key string, fps ...string) *notify.Message {
		m := &notify.Message{GroupKey: key, Status: notify.StatusFiring}
		for _, fp := range fps {
			m.Alerts = append(m.Alerts, notify.Alert{Fingerprint: fp, Status: notify.StatusFiring})
		}
		return m
	}
	both := []string{"webhook", "email"}
	o.owe("r", firing("g", "a"), both, now, false)
	o.owe("r", firing("g", "a"), both, now.Add(time.Minute), false) // again: the same content
	o.owe("r", firing("g", "a", "b"), both, now, false)             // changed
	o.owe("r", firing("h", "a"), both, now, false)                  // another group
	if n := o.len(); n != 3 {
		t.Fatalf("%d owed, want 3", n)
	}
	es := o.unhanded()
	if len(es) != 3 || len(o.unhanded()) != 0 {
		t.Fatalf("handed %d, then more", len(es))
	}
	o.settle(es[0].ID, "webhook", notify.Delivered)
	o.settle(es[0].ID, "email", notify.Abandoned) // stopping: still owed
	o.settle(es[1].ID, "webhook", notify.Delivered)
	o.settle(es[1].ID, "email", notify.GivenUp)
	if n := o.len(); n != 2 {
		t.Fatalf("%d owed after settling, want 2 (one abandoned, one untouched)", n)
	}
	nextID, saved := o.snapshot()
	if len(saved[0].Pending) != 1 || saved[0].Pending[0] != "email" {
		t.Errorf("first entry pending %v, want [email]", saved[0].Pending)
	}
	// After a restart the owed entries are handed again, in order.
	r := &outbox{log: o.log}
	r.restore(nextID, saved)
	if es := r.unhanded(); len(es) != 2 || es[0].ID >= es[1].ID {
		t.Errorf("restored %+v", es)
	}
}

// TestOutboxBlackholeReceiver: a receiver without integrations is owed
// nothing, so its groups never fill the outbox.
func TestOutboxBlackholeReceiver(t *testing.T) {
	o := &outbox{log: slog.New(slog.DiscardHandler)}
	for range 10 {
		o.owe("none", &notify.Message{GroupKey: "g", Status: notify.StatusFiring}, nil, newClock().now(), false)
	}
	if n := o.len(); n != 0 {
		t.Errorf("%d owed to a receiver without integrations, want 0", n)
	}
}
