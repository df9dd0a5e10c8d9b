package proxy

import (
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/infergate/infergate/proto/methods"
	"github.com/infergate/infergate/proto/wire"
)

// Sequence affinity. Triton's stateful models keep a sequence's state
// (sequence_id, from sequence_start to sequence_end) in one model instance
// of one server: every call of the sequence must reach the replica its
// first call reached. So a pool pins a sequence to its first endpoint
// and sends it nowhere else; if that endpoint is gone (removed, or no
// connection to it), the sequence's calls fail with ABORTED, until one
// starts it again, rather than move silently to a replica without its
// state.
const (
	// sequenceIdle forgets a sequence after this long without a call
	// (Triton's own idle timeout is shorter: its state is gone by then).
	sequenceIdle = 5 * time.Minute
	// maxSequences bounds the sequences a pool remembers: ids are the
	// client's, and one client must not make the proxy hold millions.
	maxSequences = 100_000
	// maxSequenceKey bounds a remembered sequence's id and model name
	// (bytes each): a 1 MiB string id would make the map hold 100 GB.
	maxSequenceKey = 256
)

// sequences pins each sequence of a pool to an endpoint.
type sequences struct {
	mu sync.Mutex
	m  map[sequenceKey]*pinned
	// swept is when the map was last swept for idle sequences (unix
	// nanoseconds): at most once a second, so a client sending new ids
	// to a full map costs a scan a second, not one a call.
	swept int64
}

type sequenceKey struct{ model, id string }

type pinned struct {
	e    *Endpoint
	last int64 // unix nanoseconds of its last call
}

// pooled says whether a call of method to u must be read for its
// sequence: a ModelInfer to a pool.
func (u *Upstream) pooled(method string) bool {
	return method == methods.ModelInfer && len(u.eps.Load().list) > 1
}

// acquireCall is acquire for one ModelInfer call of model to a pool whose
// request is msg: a call of a sequence goes where the sequence is pinned
// (pinned true: it must go nowhere else).
func (u *Upstream) acquireCall(now time.Time, model string, msg []byte) (e *Endpoint, pinned bool, err error) {
	seq := wire.SequenceOf(msg)
	if seq.ID == "" {
		return u.acquire(now, model), false, nil
	}
	if len(seq.ID) > maxSequenceKey || len(seq.Model) > maxSequenceKey {
		return nil, true, status.Error(codes.InvalidArgument, fmt.Sprintf(
			"infergate: a sequence_id and model name of at most %d bytes each can be kept on one replica", maxSequenceKey))
	}
	if e, err = u.seqs.endpoint(u, now, seq); err != nil {
		return nil, true, err
	}
	e.inFlight.Add(1)
	e.calls.Add(1)
	return e, true, nil
}

// endpoint is where a call of seq goes: the endpoint its sequence is
// pinned to, or, for a sequence's first call (or one that starts it
// again), the picker's choice, pinned from then on.
func (s *sequences) endpoint(u *Upstream, now time.Time, seq wire.Sequence) (*Endpoint, error) {
	key := sequenceKey{seq.Model, seq.ID}
	t := now.UnixNano()
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.m[key]
	if p != nil && !seq.Start {
		if !u.holds(p.e) || !p.e.up.Load() {
			// Kept: every call of the sequence is refused the same
			// way until one starts it again (sequence_start).
			p.last = t
			return nil, status.Error(codes.Aborted, fmt.Sprintf(
				"infergate: sequence %s of model %s was on replica %s, which is gone: its state is lost; start the sequence again",
				seq.ID, seq.Model, p.e.addr))
		}
	} else {
		if s.m == nil {
			s.m = map[sequenceKey]*pinned{}
		}
		if len(s.m) >= maxSequences && t-s.swept > int64(time.Second) {
			s.swept = t
			s.sweep(t)
		}
		p = &pinned{e: u.pick(t, seq.Model)}
		if len(s.m) < maxSequences {
			s.m[key] = p
		}
	}
	p.last = t
	if seq.End {
		delete(s.m, key)
	}
	return p.e, nil
}

// sweep forgets the sequences idle for sequenceIdle; s.mu is held.
func (s *sequences) sweep(t int64) {
	for k, p := range s.m {
		if t-p.last > int64(sequenceIdle) {
			delete(s.m, k)
		}
	}
}

// holds says whether e is one of u's endpoints now.
func (u *Upstream) holds(e *Endpoint) bool {
	for _, x := range u.eps.Load().list {
		if x == e {
			return true
		}
	}
	return false
}
