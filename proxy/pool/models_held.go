package pool

import (
	"sync"
	"sync/atomic"
)

// modelsHeld is what an endpoint said of its models: those its index
// reported ready, and those it answered NOT_FOUND for lately.
type modelsHeld struct {
	// models is replaced whole under modelsMu, read without it.
	models   atomic.Pointer[modelSet]
	modelsMu sync.Mutex
}

// modelSet is what an endpoint said of its models.
type modelSet struct {
	// ready are the models it reported ready; nil: it cannot say.
	ready map[string]bool
	// absent are models it answered NOT_FOUND for, until when (unix
	// nanoseconds).
	absent map[string]int64
}

// holds says whether e may be sent a call of model at t.
func (e *modelsHeld) holds(model string, t int64) bool {
	if model == "" {
		return true
	}
	ms := e.models.Load()
	if ms == nil {
		return true
	}
	if until, ok := ms.absent[model]; ok && until > t {
		return false
	}
	return ms.ready == nil || ms.ready[model]
}

// setReady records the models e reported ready (nil: it cannot say).
func (e *modelsHeld) setReady(ready map[string]bool) {
	e.modelsMu.Lock()
	defer e.modelsMu.Unlock()
	next := &modelSet{ready: ready}
	if old := e.models.Load(); old != nil {
		next.absent = old.absent
	}
	e.models.Store(next)
}

// maxAbsent bounds the models an endpoint is remembered to lack, and
// maxAbsentName their names' length: the names are the clients', and
// NOT_FOUND for made-up ones must not grow what each answer copies.
const (
	maxAbsent     = 256
	maxAbsentName = 128
)

// markAbsent records that e answered NOT_FOUND for model at t.
func (e *modelsHeld) markAbsent(model string, t int64) {
	if model == "" || len(model) > maxAbsentName {
		return
	}
	e.modelsMu.Lock()
	defer e.modelsMu.Unlock()
	if old := e.models.Load(); old != nil && len(old.absent) >= maxAbsent {
		live := 0
		for _, until := range old.absent {
			if until > t {
				live++
			}
		}
		if _, known := old.absent[model]; !known && live >= maxAbsent {
			return // full of live entries: they expire first
		}
	}
	next := &modelSet{absent: map[string]int64{model: t + int64(absentFor)}}
	if old := e.models.Load(); old != nil {
		next.ready = old.ready
		for m, until := range old.absent {
			if until > t && m != model {
				next.absent[m] = until
			}
		}
		if next.ready != nil && next.ready[model] {
			// Its index said ready, the call said not found: the
			// call is the later word.
			ready := make(map[string]bool, len(next.ready))
			for m := range next.ready {
				ready[m] = m != model
			}
			next.ready = ready
		}
	}
	e.models.Store(next)
}
