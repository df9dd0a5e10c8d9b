// Package streammeter measures the requests inside a ModelStreamInfer
// stream: it matches each response the proxy relays to its request and
// records, per request, the wait for its first response, the gaps
// between its responses and their number. It reads scans of the frames
// (proto/wire), never the frames, and holds a bounded memory whatever a
// client sends.
package streammeter

import (
	"encoding/binary"
	"hash/maphash"
	"sync"
	"time"

	"github.com/infergate/infergate/monitor"
	"github.com/infergate/infergate/proto/wire"
)

// Recorder measures the requests inside ModelStreamInfer streams;
// *monitor.Registry is one. The proxy meters a stream only when its
// Recorder implements it (proxy.StreamRecorder). Both methods are called
// from the stream pumps of every metered stream at once, so they must be
// safe for concurrent use and should not block.
type Recorder interface {
	// RecordStream takes one response, or one request's end.
	RecordStream(key monitor.SeriesKey, sm monitor.StreamSample)
	// StreamDropped counts a request or response left out.
	StreamDropped(reason monitor.StreamDrop)
}

var _ Recorder = (*monitor.Registry)(nil)

// New returns the meter of a stream of method to upstream by route ("":
// primary), recording into rec.
func New(rec Recorder, method, upstream, route string) *Meter {
	if route == "" {
		route = monitor.RoutePrimary
	}
	return &Meter{rec: rec, base: monitor.SeriesKey{Method: method, Upstream: upstream,
		CodeClass: monitor.CodeClassOK, Route: route}}
}

// Bounds of one stream's meter: what a client sends must not grow the
// proxy's memory without limit (DESIGN.md).
const (
	// maxOutstanding is the most requests a meter remembers while they
	// await their final response; a new one beyond it makes the meter
	// forget the oldest (counted as max_outstanding). 256 covers any
	// client that multiplexes generations on one stream; a request is
	// about 150 bytes, so a stream's meter holds under 64 KiB.
	maxOutstanding = 256
	// maxIDKey is the longest id kept as it is; a longer id is kept as
	// its first bytes and a hash of the whole, so that a client's
	// megabyte ids cost the meter no more than short ones.
	maxIDKey = 64
)

// idSeed keys the hash of long ids.
var idSeed = maphash.MakeSeed()

// Meter matches the responses of one ModelStreamInfer stream with
// its requests and records, per request, the wait for its first response,
// the gaps between its responses and their number. It reads
// frames with wire scans only. Requests are matched by id, as Triton's
// responses carry their request's id; requests without an id share the
// id "" and are matched first in, first out, which is the order Triton
// answers a stream's requests when its model is not decoupled (a
// decoupled model may interleave them: only ids tell them apart then).
//
// A request is complete at a response whose triton_final_response is
// true, or at any response without the parameter (a model that is not
// decoupled answers once); at a clean end of the stream, requests still
// waiting are complete with the responses they got (a decoupled model
// whose last response was not flagged). A response with an error_message
// ends its request unmeasured. Triton's empty final response is not a
// response the client reads: it ends its request without counting.
//
// The client-to-upstream pump calls Request, the other pump Response;
// the meter's mutex is held for a few map operations, never across I/O
// or recording.
type Meter struct {
	rec  Recorder
	base monitor.SeriesKey // Method, Upstream, CodeClass, Route: the stream's

	mu sync.Mutex
	// byID maps an id key to its requests, oldest first; oldest and
	// newest are the ends of the list of all requests by age.
	byID           map[string]idQueue
	oldest, newest *pending
	n              int
	free           *pending // spare pendings, chained by newer
	// model and version are the last request's, so that a stream of one
	// model allocates its label strings once.
	model, version string
}

// idQueue is the requests of one id key, in order.
type idQueue struct{ head, tail *pending }

// pending is a request awaiting its final response.
type pending struct {
	key            string
	model, version string
	at, last       time.Time // sent, and its last response
	responses      int
	older, newer   *pending // age list
	next           *pending // the next request of the same id key
}

// idKey returns the map key of id in buf's storage: id itself, or for a
// long one its head and a hash of the whole. The result aliases buf or id;
// copy it to keep it.
func idKey(id []byte, buf *[maxIDKey]byte) []byte {
	if len(id) <= maxIDKey {
		return id
	}
	n := copy(buf[:], id[:maxIDKey-8])
	binary.LittleEndian.PutUint64(buf[n:], maphash.Bytes(idSeed, id))
	return buf[:]
}

// Request remembers a request the client sent at at (info from
// wire.ScanInferRequest, or err when it did not parse). A request that
// does not parse is not remembered: the upstream judges it.
func (m *Meter) Request(info wire.InferRequestInfo, err error, at time.Time) {
	if err != nil {
		return
	}
	var kb [maxIDKey]byte
	key := idKey(info.ID, &kb)
	m.mu.Lock()
	p := m.free
	if p != nil {
		m.free = p.newer
		*p = pending{}
	} else {
		p = new(pending)
	}
	if string(info.Model) != m.model {
		m.model = string(info.Model)
	}
	if string(info.Version) != m.version {
		m.version = string(info.Version)
	}
	p.model, p.version, p.at = m.model, m.version, at
	dropped := false
	if m.n == maxOutstanding {
		m.remove(m.oldest)
		dropped = true
	}
	if m.byID == nil {
		m.byID = make(map[string]idQueue)
	}
	q, ok := m.byID[string(key)]
	if ok {
		p.key = q.head.key
		q.tail.next = p
		q.tail = p
	} else {
		p.key = string(key)
		q = idQueue{head: p, tail: p}
	}
	m.byID[p.key] = q
	p.older = m.newest
	if m.newest != nil {
		m.newest.newer = p
	} else {
		m.oldest = p
	}
	m.newest = p
	m.n++
	m.mu.Unlock()
	if dropped {
		m.rec.StreamDropped(monitor.StreamDropOutstanding)
	}
}

// remove forgets p, the head of its id's queue, and keeps it for reuse.
// Called with mu held.
func (m *Meter) remove(p *pending) {
	if q := m.byID[p.key]; p.next == nil {
		delete(m.byID, p.key)
	} else {
		q.head = p.next
		m.byID[p.key] = q
	}
	if p.older != nil {
		p.older.newer = p.newer
	} else {
		m.oldest = p.newer
	}
	if p.newer != nil {
		p.newer.older = p.older
	} else {
		m.newest = p.older
	}
	m.n--
	*p = pending{newer: m.free}
	m.free = p
}

// Response matches a response the proxy sent to the client, at at (info
// from wire.ScanStreamResponse, or err when it did not parse), and records
// what it says.
func (m *Meter) Response(info wire.StreamResponseInfo, err error, at time.Time) {
	if err != nil {
		m.rec.StreamDropped(monitor.StreamDropUnmatched)
		return
	}
	var kb [maxIDKey]byte
	key := idKey(info.ID, &kb)
	m.mu.Lock()
	q, ok := m.byID[string(key)]
	if !ok {
		m.mu.Unlock()
		m.rec.StreamDropped(monitor.StreamDropUnmatched)
		return
	}
	p := q.head
	k := m.base
	k.Model, k.Version = p.model, p.version
	var sm monitor.StreamSample
	// Triton's empty final response only says that the request is done.
	emptyFinal := info.Empty && info.HasFinal && info.Final
	if !info.Error && !emptyFinal {
		sm.Response, sm.First = true, p.responses == 0
		if sm.First {
			sm.Wait = at.Sub(p.at)
		} else {
			sm.Wait = at.Sub(p.last)
		}
		p.responses++
		p.last = at
	}
	if info.Error || info.Final || !info.HasFinal {
		sm.Done, sm.Responses = !info.Error, p.responses
		m.remove(p)
	}
	m.mu.Unlock()
	if sm.Response || sm.Done {
		m.rec.RecordStream(k, sm)
	}
}

// End closes the meter when its stream ended: cleanly (ok), every request
// still waiting got all the responses it will get, so it is complete;
// otherwise they were cut short and are not recorded.
func (m *Meter) End(ok bool) {
	m.mu.Lock()
	var done []monitor.StreamSample
	var keys []monitor.SeriesKey
	for p := m.oldest; p != nil; p = p.newer {
		if ok {
			k := m.base
			k.Model, k.Version = p.model, p.version
			keys = append(keys, k)
			done = append(done, monitor.StreamSample{Done: true, Responses: p.responses})
		}
	}
	m.byID, m.oldest, m.newest, m.free, m.n = nil, nil, nil, nil, 0
	m.mu.Unlock()
	for i, sm := range done {
		m.rec.RecordStream(keys[i], sm)
	}
}
