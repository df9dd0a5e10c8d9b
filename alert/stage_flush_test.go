package alert

import (
	"context"
	"encoding/json"
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

// TestAlertmanagerResend: between the group's messages, its firing
// alerts go again to the receiver's alertmanager integrations (only)
// every resend interval, and the endsAt they carry lies beyond the next
// re-send, so Alertmanager never resolves an alert that still fires.
func TestAlertmanagerResend(t *testing.T) {
	now := newClock().now()
	type owed struct {
		m      *notify.Message
		only   []string
		resend bool
	}
	var got []owed
	st := flushStage{
		owe: func(_ string, m *notify.Message, only []string, resend bool) {
			got = append(got, owed{m, only, resend})
		},
		resend:        func(string) (time.Duration, []string) { return notify.DefaultResendInterval, []string{"alertmanager"} },
		resendPending: func(string, string) bool { return false },
		metrics:       newEngineMetrics(nil), log: slog.New(slog.DiscardHandler),
	}
	firing := notify.Alert{Fingerprint: "f", Status: notify.StatusFiring, Labels: map[string]string{"alertname": "A"}, StartsAt: now.Add(-time.Hour)}
	g := &group{Key: "k", Receiver: "pager", Created: now.Add(-time.Hour), LastFlush: now.Add(-90 * time.Second),
		LastResend: now.Add(-90 * time.Second), Notified: map[string]bool{"f": true},
		rt: routed{receiver: "pager", interval: 30 * time.Second, repeat: 5 * time.Minute}, alerts: map[string]notify.Alert{"f": firing}}
	step := func(at time.Time) {
		s := newStep(nil)
		s.groups = []*group{g}
		st.exec(withNow(context.Background(), at), s)
	}
	step(now)
	if len(got) != 1 || !got[0].resend || len(got[0].only) != 1 || got[0].only[0] != "alertmanager" || got[0].m.Status != notify.StatusFiring {
		t.Fatalf("owed %+v; want one re-send of the firing alert to the alertmanager integration", got)
	}
	step(now.Add(30 * time.Second)) // within the interval: nothing
	step(now.Add(notify.DefaultResendInterval))
	if len(got) != 2 {
		t.Fatalf("%d messages after one more interval, want 2", len(got))
	}
	var payload []struct {
		EndsAt time.Time `json:"endsAt"`
	}
	if err := json.Unmarshal(notify.AlertmanagerPayload(got[0].m, now, notify.DefaultResendValidity), &payload); err != nil || len(payload) != 1 {
		t.Fatalf("payload: %v %v", err, payload)
	}
	if next := now.Add(notify.DefaultResendInterval); !payload[0].EndsAt.After(next) {
		t.Errorf("endsAt %v is not after the next re-send %v", payload[0].EndsAt, next)
	}
}
