package alert

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/infergate/infergate/alert/notify"
)

// maxOwed bounds the outbox: a receiver down for hours while thousands
// of groups change must not grow the state file without limit. The
// oldest notice is given up (logged) for a new one.
const maxOwed = 5000

// owed is one notification a receiver is owed. It is written to the state
// file before it is sent and leaves the outbox when every one of its
// integrations has accepted it or given it up, so a notice flushed before
// SIGTERM, SIGKILL or a crash is sent after the restart, with its
// original content and time (Alertmanager keeps a notification log for
// the same reason).
type owed struct {
	ID       uint64    `json:"id"`
	Receiver string    `json:"receiver"`
	Created  time.Time `json:"created"`
	// Pending are the integrations that have not accepted it yet.
	Pending []string        `json:"pending"`
	Message *notify.Message `json:"message"`
	// Resend marks an Alertmanager re-send of firing alerts (see
	// flushStage.resend), of which one per group is enough.
	Resend bool `json:"resend,omitempty"`

	handed bool // given to the receiver by this process
}

// outbox is what the receivers are owed, oldest first. It has its own
// lock: the senders report outcomes from their goroutines, sometimes
// while the engine's lock is held (a send after Close drops at once).
type outbox struct {
	mu      sync.Mutex
	nextID  uint64
	entries []*owed // oldest first
	changed bool    // since the last save
	log     *slog.Logger
}

// owe adds m for receiver's integrations (pending) and returns the entry.
func (o *outbox) owe(receiver string, m *notify.Message, pending []string, now time.Time, resend bool) {
	if len(pending) == 0 {
		return // a receiver without integrations (a blackhole) is owed nothing
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	// The same content still owed to the same receiver (a flush repeated
	// while the receiver is down) is owed once, as Alertmanager's
	// notification log dedups by group and content.
	key := contentKey(m)
	for _, e := range o.entries {
		if !e.Resend && !resend && e.Receiver == receiver && e.Message.GroupKey == m.GroupKey && contentKey(e.Message) == key &&
			slices.Equal(e.Pending, pending) {
			return
		}
	}
	if len(o.entries) >= maxOwed {
		old := o.entries[0]
		o.entries = o.entries[1:]
		o.log.Warn("alert notification given up: the outbox is full", "receiver", old.Receiver, "group", old.Message.GroupKey,
			"status", old.Message.Status, "pending", old.Pending, "owed_since", old.Created)
	}
	o.nextID++
	o.entries = append(o.entries, &owed{ID: o.nextID, Receiver: receiver, Created: now, Pending: slices.Clone(pending), Message: m, Resend: resend})
	o.changed = true
}

// contentKey identifies what a message says: its status and each alert's
// fingerprint and status (the alerts are sorted by fingerprint).
func contentKey(m *notify.Message) string {
	var b strings.Builder
	b.WriteString(m.Status)
	for _, a := range m.Alerts {
		b.WriteString(";" + a.Fingerprint + "=" + a.Status)
	}
	return b.String()
}

// resendPending reports whether an Alertmanager re-send of group key is
// still owed (then another adds nothing).
func (o *outbox) resendPending(receiver, key string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, e := range o.entries {
		if e.Resend && e.Receiver == receiver && e.Message.GroupKey == key {
			return true
		}
	}
	return false
}

// unhanded returns copies of the entries not yet given to a receiver by
// this process, oldest first, and marks them handed. Copies: the senders
// settle the originals from their goroutines.
func (o *outbox) unhanded() []*owed {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []*owed
	for _, e := range o.entries {
		if !e.handed {
			e.handed = true
			c := *e
			c.Pending = slices.Clone(e.Pending)
			out = append(out, &c)
		}
	}
	return out
}

// settle records how integration ended with entry id: accepted or given
// up, it no longer waits for it; abandoned (infergate stopping), it stays
// owed.
func (o *outbox) settle(id uint64, integration string, oc notify.Outcome) {
	if oc == notify.Abandoned {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	i := slices.IndexFunc(o.entries, func(e *owed) bool { return e.ID == id })
	if i < 0 {
		return
	}
	e := o.entries[i]
	e.Pending = slices.DeleteFunc(e.Pending, func(n string) bool { return n == integration })
	if len(e.Pending) == 0 {
		o.entries = slices.Delete(o.entries, i, i+1)
	}
	o.changed = true
}

// snapshot returns a copy for the state file and clears changed;
// saveFailed sets it again when the save failed.
func (o *outbox) snapshot() (nextID uint64, entries []owed) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, e := range o.entries {
		c := *e
		c.Pending = slices.Clone(e.Pending)
		entries = append(entries, c)
	}
	o.changed = false
	return o.nextID, entries
}

// saveFailed marks the outbox changed again after a failed save.
func (o *outbox) saveFailed() {
	o.mu.Lock()
	o.changed = true
	o.mu.Unlock()
}

// dirty reports whether the outbox changed since the last save: a new
// entry (which must be saved before it is sent) or a settled one.
func (o *outbox) dirty() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.changed
}

// restore replaces the outbox with what a state file held, bounded; the
// entries will be handed to the receivers at the next step.
func (o *outbox) restore(nextID uint64, entries []owed) (skipped int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.nextID = nextID
	o.entries = nil
	for i := range entries {
		e := entries[i]
		if e.Message == nil || e.Receiver == "" || len(e.Pending) == 0 || len(o.entries) >= maxOwed {
			skipped++
			continue
		}
		// Keep NextID above every restored id, so that a crafted file
		// cannot make two entries share one.
		o.nextID = max(o.nextID, e.ID)
		e.handed = false
		o.entries = append(o.entries, &e)
	}
	return skipped
}

// len returns how many notices are owed.
func (o *outbox) len() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.entries)
}

// deliverStage hands what the outbox holds and no receiver has yet to the
// receivers. It runs after persist, which has saved any new entry: a
// notice is on disk before it leaves.
type deliverStage struct {
	outbox *outbox
	send   func(e *owed)
}

func (st deliverStage) exec(_ context.Context, _ *step) {
	for _, e := range st.outbox.unhanded() {
		st.send(e)
	}
}
