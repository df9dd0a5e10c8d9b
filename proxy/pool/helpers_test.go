package pool

import "time"

// The pool's unit tests drive its pick and release directly, a call at a
// time, with these stand-ins for a handle's pick.

// acquire is a handle's pick of an endpoint for a call of model, begun.
func (u *Pool) acquire(now time.Time, model string) *Endpoint {
	e := u.pick(now.UnixNano(), model)
	u.begin(e, model)
	return e
}

// acquireCall is pickEndpoint for a call of method to the pool.
func (u *Pool) acquireCall(now time.Time, method, model string, msg []byte, key string) (*Endpoint, bool, error) {
	e, pinned, err := u.pickCall(now, method, model, msg, key)
	if err == nil {
		u.begin(e, model)
	}
	return e, pinned, err
}

// acquireKeyed is pickEndpoint for a call whose affinity header carries
// key.
func (u *Pool) acquireKeyed(now time.Time, model, key string) *Endpoint {
	e := u.pickKeyed(now, model, key)
	u.begin(e, model)
	return e
}
