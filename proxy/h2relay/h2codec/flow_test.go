package h2codec

import (
	"math/rand/v2"
	"testing"
)

// A send window: WINDOW_UPDATEs widen it up to 2^31-1 and no further (RFC
// 9113 6.9.1: past it is a FLOW_CONTROL_ERROR), a smaller initial window
// from the peer may take it below zero (6.9.2), and what is sent comes off
// it.
func TestOutflow(t *testing.T) {
	type step struct {
		take   int64 // sent
		add    int64 // a WINDOW_UPDATE's increment, or an initial window's change
		wantOK bool  // add's report
	}
	tests := []struct {
		name  string
		start int64
		steps []step
		want  int64 // available at the end
	}{
		{"the default window", 65535, nil, 65535},
		{"sending spends it", 65535, []step{{take: 16384}, {take: 49151}}, 0},
		{"an update widens it", 65535, []step{{take: 65535}, {add: 1000, wantOK: true}}, 1000},
		{"up to the largest window", 65535, []step{{add: maxWindow - 65535, wantOK: true}}, maxWindow},
		{"one past it", 65535, []step{{add: maxWindow - 65535 + 1}}, maxWindow + 1},
		{"the largest increment on an empty window", 0, []step{{add: maxWindow, wantOK: true}}, maxWindow},
		{"the largest increment on a window of one", 1, []step{{add: maxWindow}}, maxWindow + 1},
		{"the largest increment twice", 0, []step{{add: maxWindow, wantOK: true}, {add: maxWindow}}, 2 * maxWindow},
		// 6.9.2: the peer's initial window went from 65535 to 0 with
		// 60000 bytes in flight, then back up.
		{"shrunk below what is in flight", 65535, []step{{take: 60000}, {add: -65535, wantOK: true}}, -60000},
		{"and grown back", 65535, []step{{take: 60000}, {add: -65535, wantOK: true}, {add: 65535, wantOK: true}}, 5535},
		{"a negative window still has a ceiling", -100, []step{{add: maxWindow, wantOK: true}, {add: 101}}, maxWindow + 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := outflow{n: tt.start}
			for i, s := range tt.steps {
				if s.take != 0 {
					f.take(s.take)
					continue
				}
				if ok := f.add(s.add); ok != s.wantOK {
					t.Fatalf("step %d: add(%d) reported %v, want %v", i, s.add, ok, s.wantOK)
				}
			}
			if got := f.available(); got != tt.want {
				t.Fatalf("available %d, want %d", got, tt.want)
			}
		})
	}
}

// A receive window takes what the peer sends while it fits, all of it and
// not a byte more.
func TestInflowTake(t *testing.T) {
	tests := []struct {
		name   string
		init   int64
		takes  []int64
		wantOK []bool
		avail  int64
	}{
		{"within", 16384, []int64{1000, 2000}, []bool{true, true}, 13384},
		{"exactly all of it", 16384, []int64{16384}, []bool{true}, 0},
		{"all of it in pieces", 16384, []int64{16383, 1}, []bool{true, true}, 0},
		{"one byte more", 16384, []int64{16384, 1}, []bool{true, false}, -1},
		{"too much at once", 16384, []int64{16385}, []bool{false}, -1},
		{"an empty frame on an empty window", 0, []int64{0}, []bool{true}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var f inflow
			f.init(tt.init)
			for i, n := range tt.takes {
				if ok := f.take(n); ok != tt.wantOK[i] {
					t.Fatalf("take %d (%d bytes) reported %v, want %v", i, n, ok, tt.wantOK[i])
				}
			}
			if f.avail != tt.avail {
				t.Fatalf("avail %d, want %d", f.avail, tt.avail)
			}
		})
	}
}

// Received bytes handed back are granted again in batches: no increment
// until what is owed reaches the batch, then all that is owed at once.
// grant opens the window at once, with what is owed.
func TestInflowReleaseBatches(t *testing.T) {
	type step struct {
		release int64
		grant   int64 // when release is 0: grant(grant)
		want    int64 // the increment to send
	}
	tests := []struct {
		name  string
		batch int64
		steps []step
	}{
		{"below the batch owes", 16384, []step{{release: 10000}, {release: 6000}}},
		{"reaching it exactly sends", 16384, []step{{release: 10000}, {release: 6384, want: 16384}}},
		{"past it sends all that is owed", 16384, []step{{release: 10000}, {release: 10000, want: 20000}}},
		{"the count starts again after a send", 16384, []step{
			{release: 16384, want: 16384}, {release: 1}, {release: 16383, want: 16384}}},
		{"a batch of zero sends every release", 0, []step{{release: 1, want: 1}, {release: 7, want: 7}}},
		{"a batch of one sends every release", 1, []step{{release: 1, want: 1}, {release: 7, want: 7}}},
		{"grant adds what is owed", 16384, []step{{release: 5000}, {grant: 1000, want: 6000}, {release: 5000}}},
		{"grant of nothing flushes what is owed", 16384, []step{{release: 5000}, {grant: 0, want: 5000}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var f inflow
			f.init(65536)
			if !f.take(65536) {
				t.Fatal("take of the whole window refused")
			}
			var sent int64
			for i, s := range tt.steps {
				var got int64
				if s.release != 0 {
					got = f.release(s.release, tt.batch)
				} else {
					got = f.grant(s.grant)
				}
				if got != s.want {
					t.Fatalf("step %d: increment %d, want %d", i, got, s.want)
				}
				sent += got
			}
			// What the peer was told is what it may send.
			if f.avail != sent {
				t.Fatalf("avail %d after granting %d in all", f.avail, sent)
			}
		})
	}
}

// The receive window and the sender's view of it never disagree: whatever
// order data arrives, is handed back and windows are opened in, the
// sender's window (its initial window, plus every increment sent, less
// what it sent) is avail, and what is received but not granted again is
// unacked plus what is still held. A sender that keeps within its window
// is never refused.
func TestInflowAgreesWithTheSender(t *testing.T) {
	rng := rand.New(rand.NewPCG(45, 4))
	for _, batch := range []int64{0, 1, 4096, 16384, 1 << 20} {
		const initial = 65535
		var f inflow
		f.init(initial)
		senderWin := int64(initial) // as the peer counts it
		var held int64              // received and not handed back
		var granted int64           // opened by grant beyond what was received
		for i := range 20000 {
			switch rng.IntN(4) {
			case 0, 1: // the peer sends what its window allows
				n := rng.Int64N(senderWin + 1)
				if !f.take(n) {
					t.Fatalf("batch %d, op %d: %d bytes within the sender's window %d refused", batch, i, n, senderWin)
				}
				senderWin -= n
				held += n
			case 2: // some of it left
				n := rng.Int64N(held + 1)
				held -= n
				senderWin += f.release(n, batch)
			case 3:
				if rng.IntN(8) == 0 {
					extra := rng.Int64N(4096)
					granted += extra
					senderWin += f.grant(extra)
				}
			}
			if f.avail != senderWin {
				t.Fatalf("batch %d, op %d: avail %d, the sender's window %d", batch, i, f.avail, senderWin)
			}
			if f.unacked < 0 || (batch > 0 && f.unacked >= batch) {
				t.Fatalf("batch %d, op %d: %d owed", batch, i, f.unacked)
			}
			if got, want := f.avail+f.unacked+held, initial+granted; got != want {
				t.Fatalf("batch %d, op %d: avail+owed+held %d, want %d", batch, i, got, want)
			}
		}
	}
}
