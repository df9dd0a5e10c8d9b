package flowstats

import (
	"fmt"
	"testing"
	"time"

	"github.com/infergate/infergate/flow"
)

// Tenants get series of their own once busy, at most maxTenantSeries of
// them; the rest count under other, so clients cannot grow the metrics.
func TestFlowTenantsBounded(t *testing.T) {
	var ft Tenants
	for i := range maxTenantSeries + 5 {
		for range tenantPromoteAfter + 10 {
			ft.stat(fmt.Sprint("t", i), 1).calls[flow.Standard][AtOnce].Add(1)
		}
	}
	for range 10 {
		ft.stat("quiet", 1).calls[flow.Standard][AtOnce].Add(1)
	}
	for i := range 5000 {
		ft.stat(fmt.Sprint("made-up-", i), 1).calls[flow.Standard][AtOnce].Add(1)
	}
	all := ft.all()
	if n := len(all); n != maxTenantSeries+1 || all[n-1].name != OtherTenant {
		t.Fatalf("%d series (last %q), want %d named and other", n, all[n-1].name, maxTenantSeries)
	}
	var total uint64
	for _, s := range all {
		total += s.calls[flow.Standard][AtOnce].Load()
	}
	if want := uint64((maxTenantSeries+5)*(tenantPromoteAfter+10) + 10 + 5000); total != want {
		t.Errorf("%d calls counted, want %d: none lost to the bound", total, want)
	}
	if len(ft.candidates) > maxTenantCandidate {
		t.Errorf("%d candidates kept", len(ft.candidates))
	}
}

// The names follow who sends now: a tenant that comes once the table is
// full gets a name when one of the first goes silent for tenantIdle, and
// a tenant must send tenantPromoteAfter calls within tenantWindow, not
// over days, to take one.
func TestFlowTenantsFollowWhoSendsNow(t *testing.T) {
	var ft Tenants
	at := int64(time.Hour)
	send := func(tenant string, n int) *tenantStat {
		var s *tenantStat
		for range n {
			s = ft.stat(tenant, at)
		}
		return s
	}
	for i := range maxTenantSeries {
		send(fmt.Sprint("early", i), tenantPromoteAfter)
	}
	if s := send("late", tenantPromoteAfter); s.name == "late" {
		t.Fatal("late named with the table full of busy tenants")
	}
	// All the early ones but early0 keep sending; early0 goes silent.
	for step := range 11 {
		at += int64(time.Minute)
		for i := 1; i < maxTenantSeries; i++ {
			send(fmt.Sprint("early", i), 1)
		}
		if step < 10 {
			if s := send("late", 1); s.name == "late" {
				t.Fatalf("late named after %d minutes, while early0 was silent for less than %s", step+1, tenantIdle)
			}
		}
	}
	if s := send("late", tenantPromoteAfter); s.name != "late" {
		t.Fatalf("late not named once early0 was silent for %s", tenantIdle)
	}
	for _, s := range ft.all() {
		if s.name == "early0" {
			t.Error("early0 still has series after its place went to late")
		}
	}
	// A trickle never takes a name: 99 calls a window.
	var trickle Tenants
	for w := range 5 {
		for range tenantPromoteAfter - 1 {
			if s := trickle.stat("trickle", int64(w)*int64(tenantWindow)); s.name == "trickle" {
				t.Fatalf("a tenant sending %d calls per %s named", tenantPromoteAfter-1, tenantWindow)
			}
		}
	}
}
