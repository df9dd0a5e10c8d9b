package pool

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
// sequence (a ModelInfer to a pool) or its affinity header.
func (u *Pool) pooled(method string) bool {
	return len(u.eps.Load().list) > 1 && (method == methods.ModelInfer || u.affinity.Load() != nil)
}

// pickCall is pick for one call of method and model to a pool whose
// request is msg and whose affinity header carries key ("" none): a
// ModelInfer call of a sequence goes where the sequence is pinned (pinned
// true: it must go nowhere else); one with a key where the key maps.
func (u *Pool) pickCall(now time.Time, method, model string, msg []byte, key string) (e *Endpoint, pinned bool, err error) {
	var seq wire.Sequence
	if method == methods.ModelInfer {
		seq = wire.SequenceOf(msg)
	}
	if seq.ID == "" {
		if key != "" {
			return u.pickKeyed(now, model, key), false, nil
		}
		return u.pick(now.UnixNano(), model), false, nil
	}
	if len(seq.ID) > maxSequenceKey || len(seq.Model) > maxSequenceKey {
		return nil, true, status.Error(codes.InvalidArgument, fmt.Sprintf(
			"infergate: a sequence_id and model name of at most %d bytes each can be kept on one replica", maxSequenceKey))
	}
	if e, err = u.seqs.endpoint(u, now, seq); err != nil {
		return nil, true, err
	}
	return e, true, nil
}

// endpoint is where a call of seq goes: the endpoint its sequence is
// pinned to, or, for a sequence's first call (or one that starts it
// again), the picker's choice, pinned from then on.
func (s *sequences) endpoint(u *Pool, now time.Time, seq wire.Sequence) (*Endpoint, error) {
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
func (u *Pool) holds(e *Endpoint) bool {
	for _, x := range u.eps.Load().list {
		if x == e {
			return true
		}
	}
	return false
}

// Header affinity. A pool may name a request header (affinity_header)
// whose value keeps a client's calls on one endpoint: a session's
// caches, a client that wants its calls where its last ones went. Unlike
// a sequence it is a preference, not a correctness need: the endpoint is
// the value's highest random weight (rendezvous hashing) among those that
// may take the call, so an endpoint that leaves or is ejected moves only
// its own values, to the next in their order, and every infergate of a
// fleet maps a value to the same replica. A call without the header is
// picked as any other.

// setAffinityHeader makes name (lower case; "" none) the pool's affinity
// header.
func (u *Pool) setAffinityHeader(name string) {
	if name == "" {
		if u.affinity.Load() != nil {
			u.affinity.Store(nil)
		}
		return
	}
	if cur := u.affinity.Load(); cur == nil || *cur != name {
		u.affinity.Store(&name)
	}
}

// affinityHeader is the pool's affinity header, "" when it has none or
// is no pool.
func (u *Pool) affinityHeader() string {
	if h := u.affinity.Load(); h != nil && len(u.eps.Load().list) > 1 {
		return *h
	}
	return ""
}

// pickKeyed is pick for a call whose affinity header carries key: the
// usable endpoint holding model with the key's highest weight (none
// usable: the picker's choice).
func (u *Pool) pickKeyed(now time.Time, model, key string) *Endpoint {
	t := now.UnixNano()
	list := u.eps.Load().list
	if model != "" && !u.modelHeld(model, t) {
		model = ""
	}
	kh := fnv64(fnvOffset, key)
	var best *Endpoint
	var bestW uint64
	for _, e := range list {
		if !e.UsableFor(model, t) {
			continue
		}
		if w := mix64(fnv64(kh, e.addr)); best == nil || w > bestW {
			best, bestW = e, w
		}
	}
	if best == nil {
		return u.pick(t, model)
	}
	return best
}

const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

// fnv64 continues FNV-1a's hash h over s (no allocation).
func fnv64(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= fnvPrime
	}
	return h
}

// mix64 is splitmix64's finaliser: FNV's low bits are poorly spread.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}
