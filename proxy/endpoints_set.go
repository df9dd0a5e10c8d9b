package proxy

import (
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc"

	"github.com/infergate/infergate/proxy/pool"
)

// endpointDrain is how long a removed endpoint keeps its connections for
// the calls in flight on it before they are closed.
const endpointDrain = 30 * time.Second

// endpointDialer makes an upstream's new endpoints as DialUpstream made
// its first ones.
type endpointDialer struct {
	opts  []grpc.DialOption
	conns int
	relay bool
}

func (d *endpointDialer) dial(addr string) (*Endpoint, error) {
	relayAddr := ""
	if d.relay {
		relayAddr = addr
	}
	var conns []*grpc.ClientConn
	for range d.conns {
		cc, err := grpc.NewClient(addr, d.opts...)
		if err != nil {
			for _, c := range conns {
				_ = c.Close()
			}
			return nil, err
		}
		cc.Connect()
		conns = append(conns, cc)
	}
	e := pool.NewEndpoint(addr, relayAddr, conns)
	e.Watch()
	return e, nil
}

// SetEndpoints makes addrs (host:port each) the upstream's endpoints while
// it serves: an endpoint still listed keeps its connections and what the
// picker learned of it, a new one is dialled and takes calls at once
// (the picker's first answer from it sets its cost), and one no longer
// listed takes no new call; its connections close once its calls in
// flight ended, or after drain.
func (u *Upstream) SetEndpoints(addrs []string, drain time.Duration) error {
	if u.dialer == nil {
		return fmt.Errorf("proxy: upstream %q: dialled as %q, its endpoints cannot change without a restart", u.Name(), u.Address())
	}
	if len(addrs) == 0 {
		return fmt.Errorf("proxy: upstream %q: no endpoints", u.Name())
	}
	for _, a := range addrs {
		if !pool.PlainHostPort(a) {
			return fmt.Errorf("proxy: upstream %q: endpoint %q is not host:port", u.Name(), a)
		}
	}
	u.moveMu.Lock()
	defer u.moveMu.Unlock()
	old := map[string]*Endpoint{}
	for _, e := range u.Endpoints() {
		old[e.Address()] = e
	}
	var next, added []*Endpoint
	seen := map[string]bool{}
	for _, a := range addrs {
		if seen[a] {
			continue
		}
		seen[a] = true
		if e := old[a]; e != nil {
			next = append(next, e)
			delete(old, a)
			continue
		}
		e, err := u.dialer.dial(a)
		if err != nil {
			for _, x := range added {
				_ = x.Close()
			}
			return fmt.Errorf("proxy: upstream %q: dial endpoint %q: %w", u.Name(), a, err)
		}
		next, added = append(next, e), append(added, e)
	}
	u.Replace(next)
	// Its endpoints are the dialer's from now on: a later Move changes
	// them too, not the first endpoint's resolvers. (Written only when
	// set: a dns:/// pool, whose resolving goroutine gets here, has none,
	// and a reload may be reading it.)
	if u.resolvers != nil {
		u.resolvers = nil
	}
	d := *u.dest.Load()
	names := make([]string, len(next))
	for i, e := range next {
		names[i] = e.Address()
	}
	if u.dns == "" {
		d.address = strings.Join(names, ",")
	}
	if u.relayable {
		d.relayAddr = strings.Join(names, ",")
	}
	u.dest.Store(&d)
	for _, e := range old {
		go e.Retire(drain)
	}
	if len(added) > 0 {
		u.PokeModels() // the new endpoints' models, now
	}
	return nil
}
