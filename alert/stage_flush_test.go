package alert

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/infergate/infergate/alert/notify"
)

// TestFlushStage: the stage alone sends a group's message exactly when
// one is due.
func TestFlushStage(t *testing.T) {
	now := newClock().now()
	rt := routed{receiver: "log", wait: 5 * time.Second, interval: time.Minute, repeat: 5 * time.Minute}
	firing := notify.Alert{Fingerprint: "f", Status: notify.StatusFiring}
	resolved := notify.Alert{Fingerprint: "f", Status: notify.StatusResolved}
	cases := []struct {
		name      string
		created   time.Duration // before now
		lastFlush time.Duration // before now; 0 for never
		notified  bool          // f was sent as firing
		alert     notify.Alert
		want      string // status of the message sent, "" for none
	}{
		{name: "new group within group_wait", created: 4 * time.Second, alert: firing},
		{name: "new group after group_wait", created: 5 * time.Second, alert: firing, want: notify.StatusFiring},
		{name: "unchanged before repeat_interval", created: time.Hour, lastFlush: 4 * time.Minute, notified: true, alert: firing},
		{name: "unchanged after repeat_interval", created: time.Hour, lastFlush: 5 * time.Minute, notified: true, alert: firing, want: notify.StatusFiring},
		{name: "changed before group_interval", created: time.Hour, lastFlush: 30 * time.Second, notified: true, alert: resolved},
		{name: "changed after group_interval", created: time.Hour, lastFlush: time.Minute, notified: true, alert: resolved, want: notify.StatusResolved},
		{name: "resolved never sent as firing", created: time.Hour, lastFlush: time.Hour, alert: resolved},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := &group{Key: "k", Receiver: "log", Created: now.Add(-tc.created), Notified: map[string]bool{"f": tc.notified},
				rt: rt, alerts: map[string]notify.Alert{"f": tc.alert}}
			if tc.lastFlush > 0 {
				g.LastFlush = now.Add(-tc.lastFlush)
			}
			sk := &sink{}
			owe := func(receiver string, m *notify.Message, _ []string, _ bool) { sk.send(receiver, m) }
			st := flushStage{owe: owe, externalURL: "http://ig", metrics: newEngineMetrics(nil), log: slog.New(slog.DiscardHandler)}
			s := newStep(nil)
			s.groups = []*group{g}
			st.exec(withNow(context.Background(), now), s)
			msgs, to := sk.take()
			switch {
			case tc.want == "" && len(msgs) != 0:
				t.Fatalf("sent %+v, want nothing", msgs[0])
			case tc.want == "":
				return
			case len(msgs) != 1 || to[0] != "log" || msgs[0].Status != tc.want || msgs[0].ExternalURL != "http://ig":
				t.Fatalf("sent %+v to %v, want one %s message to log", msgs, to, tc.want)
			}
			if !g.LastFlush.Equal(now) || g.Notified["f"] != (tc.want == notify.StatusFiring) {
				t.Errorf("after the flush: last %v, notified %v", g.LastFlush, g.Notified)
			}
		})
	}
}
