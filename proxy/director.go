package proxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/experimental"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"

	"github.com/infergate/infergate/proxy/pool"
)

// Director holds the proxy's routing policy: it picks the upstream for each
// call. Direct runs once per call, before any message is read, with the
// call's context (incoming metadata, deadline) and its full method name
// ("/package.Service/Method"). It is called concurrently and must not block.
//
// An error that is a gRPC status (status.Error) is returned to the client
// as it is, so a director can refuse a call with, say, UNIMPLEMENTED or
// PERMISSION_DENIED; any other error becomes UNAVAILABLE.
//
// If the Director also implements io.Closer, Proxy.Close closes it.
type Director interface {
	Direct(ctx context.Context, fullMethod string) (*Upstream, error)
}

// DirectorFunc adapts a function to the Director interface.
type DirectorFunc func(ctx context.Context, fullMethod string) (*Upstream, error)

// Direct calls f.
func (f DirectorFunc) Direct(ctx context.Context, fullMethod string) (*Upstream, error) {
	return f(ctx, fullMethod)
}

// StaticDirector returns a Director that sends every call to up. Closing it
// (Proxy.Close does) closes up.
func StaticDirector(up *Upstream) Director { return staticDirector{up} }

type staticDirector struct{ up *Upstream }

func (d staticDirector) Direct(context.Context, string) (*Upstream, error) { return d.up, nil }

func (d staticDirector) Close() error { return d.up.Close() }

func (d staticDirector) fixed() *Upstream { return d.up }

// UpstreamDirector returns a Director that sends every call to up and
// leaves closing up to its owner. Unlike a DirectorFunc, the proxy can see
// that it reads nothing of the call, so calls may take the fast path
// (Proxy.Relay).
func UpstreamDirector(up *Upstream) Director { return upstreamDirector{up} }

type upstreamDirector struct{ up *Upstream }

func (d upstreamDirector) Direct(context.Context, string) (*Upstream, error) { return d.up, nil }

func (d upstreamDirector) fixed() *Upstream { return d.up }

// fixedDirector is a Director that reads nothing of a call.
type fixedDirector interface{ fixed() *Upstream }

// Upstream is one model server behind the proxy, as one or more replicas
// (endpoints): a name for metrics, and for each endpoint a small pool of
// connections. Each call goes to one endpoint the picker chooses
// (balance.go). One dialled with UpstreamOptions.Movable (one endpoint)
// can be pointed at another server while it serves (Move); what holds it
// (the Director, readiness, the router) keeps it.
type Upstream struct {
	// Pool is its endpoints and the pick of one per call.
	pool.Pool
	dest atomic.Pointer[upstreamDest]
	// gates are its flow-control gates by model (flow.go), made under
	// gatesMu.
	gates   atomic.Pointer[flowGates]
	gatesMu sync.Mutex
	// resolvers feed the one endpoint's conns their address, one each,
	// when the upstream can move; nil otherwise.
	resolvers []*manual.Resolver
	// dialer makes new endpoints (SetEndpoints); nil for an upstream
	// whose endpoints cannot change (connections handed in, a target
	// with a scheme).
	dialer *endpointDialer
	// dns is the dns:///name:port target of a pool whose endpoints are
	// the name's addresses (dnspool.go); stopResolve ends its resolving.
	dns         string
	stopResolve context.CancelFunc
	// relayable: the fast path may relay to it (plaintext, dialled
	// with nothing but this package's options), wherever it moves.
	// relayConns is the pool size there, per endpoint.
	relayable  bool
	relayConns int
	// setServerName makes the address the ServerName of the addresses
	// the resolvers hand out, so that :authority (and TLS's name) follow
	// a move; false when the credentials name the server themselves.
	setServerName bool
	// moveMu keeps two Moves from reaching the resolvers out of order.
	moveMu sync.Mutex
	// callLimit is the message size limit the connections' default call
	// options set (DialUpstream); 0 when unknown. A proxy whose limit is
	// the same leaves its own limit options off unary calls.
	callLimit int
}

// NewUpstream returns an Upstream named name (the value of the upstream
// metric label) with one endpoint that uses conns in turn. It takes
// ownership of conns: Close closes them. At least one connection is
// required.
func NewUpstream(name string, conns ...*grpc.ClientConn) (*Upstream, error) {
	if len(conns) == 0 {
		return nil, fmt.Errorf("proxy: upstream %q: no connections", name)
	}
	u := &Upstream{}
	u.dest.Store(&upstreamDest{name: name})
	e := pool.NewEndpoint("", "", conns)
	e.AssumeUp() // connections handed in: their owner knows them
	u.Replace([]*Endpoint{e})
	return u, nil
}

// upstreamDest is where an Upstream sends its calls: replaced whole by
// Move, so that a call reads its name and address from one place.
type upstreamDest struct {
	// name is the upstream metric label.
	name string
	// address is the dial target (endpoints joined by commas); "" when
	// NewUpstream got connections.
	address string
	// relayAddr is "" when every call stays on the gRPC path (the fast
	// path (fastpath.go) relays to each endpoint's address otherwise).
	relayAddr string
}

// Name returns the upstream's name, used as its metric label.
func (u *Upstream) Name() string { return u.dest.Load().name }

// Server is what the upstream sends to now and its name then: the
// router's breakers judge one server, so one that moved gets new ones.
func (u *Upstream) Server() (id any, name string) {
	d := u.dest.Load()
	return d, d.name
}

// Address returns the address the upstream's connections go to, the dial
// target (its endpoints joined by commas); "" for one made by NewUpstream.
func (u *Upstream) Address() string { return u.dest.Load().address }

// Movable says whether Move can point the upstream elsewhere.
func (u *Upstream) Movable() bool { return u.resolvers != nil || u.dialer != nil }

// Move points the upstream at address (host:port), named name from now
// on. Its connections stay the same grpc.ClientConns: gRPC connects to the
// new address and closes the old transports gracefully, so calls in flight
// there finish while new ones wait for the new connection (and fail only
// if it cannot be made, as on a cold start). Calls started from then on
// are recorded under name. The fast path's pool follows at its next call
// (Proxy.relayPool). Only an upstream dialled with UpstreamOptions.Movable
// moves.
func (u *Upstream) Move(address, name string) error {
	if !u.Movable() {
		return fmt.Errorf("proxy: upstream %q: dialled as %q, it cannot move without a restart", u.Name(), u.Address())
	}
	if name == "" {
		name = address
	}
	if u.resolvers == nil || strings.Contains(address, ",") || len(u.Endpoints()) > 1 {
		// A pool: its endpoints change (SetEndpoints).
		addrs := strings.Split(address, ",")
		if err := u.SetEndpoints(addrs, endpointDrain); err != nil {
			return err
		}
		d := *u.dest.Load()
		d.name = name
		u.dest.Store(&d)
		return nil
	}
	if !pool.PlainHostPort(address) {
		return fmt.Errorf("proxy: upstream %q: %q is not host:port", u.Name(), address)
	}
	u.moveMu.Lock()
	defer u.moveMu.Unlock()
	old := u.dest.Load()
	if old.address == address && old.name == name {
		return nil
	}
	d := &upstreamDest{name: name, address: address}
	if u.relayable {
		d.relayAddr = address
	}
	if old.address != address {
		// The endpoint is the same connections at a new address: a
		// new Endpoint (its address and measurements are the old
		// server's), the old one's watchers stopped.
		prev := u.Endpoints()[0]
		relayAddr := ""
		if u.relayable {
			relayAddr = address
		}
		e := pool.NewEndpoint(address, relayAddr, prev.Conns())
		prev.StopWatch()
		e.Watch()
		u.Replace([]*Endpoint{e})
	}
	u.dest.Store(d)
	for _, r := range u.resolvers {
		r.UpdateState(resolverState(address, u.setServerName))
	}
	return nil
}

// resolverState is what a movable upstream's resolvers hand its
// connections.
func resolverState(address string, setServerName bool) resolver.State {
	a := resolver.Address{Addr: address}
	if setServerName {
		a.ServerName = address
	}
	return resolver.State{Addresses: []resolver.Address{a}}
}

// movableScheme is the scheme of a movable upstream's dial target, local
// to its connections (grpc.WithResolvers).
const movableScheme = "infergate-upstream"

// Conn returns a connection to the endpoint the picker chooses now.
func (u *Upstream) Conn() *grpc.ClientConn {
	return u.Pick(time.Now().UnixNano(), "", nil).Conn()
}

// Invoke makes a unary call to the endpoint the picker chooses for it:
// an Upstream is a grpc.ClientConnInterface, so that a probe or a
// metadata call made through it reaches a replica that is up, not one
// fixed when the prober was built.
//
// The call counts as in flight on its endpoint, so an endpoint removed
// meanwhile (SetEndpoints) keeps its connections until it ends.
func (u *Upstream) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	h := u.holdEndpoint(time.Now(), "")
	defer func() { h.done(noVerdict(time.Now()), 0, false) }()
	return h.ep.Conn().Invoke(ctx, method, args, reply, opts...)
}

// NewStream opens a stream to the endpoint the picker chooses for it.
// Only its opening counts as in flight there.
func (u *Upstream) NewStream(ctx context.Context, desc *grpc.StreamDesc, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	h := u.holdEndpoint(time.Now(), "")
	defer func() { h.done(noVerdict(time.Now()), 0, false) }()
	return h.ep.Conn().NewStream(ctx, desc, method, opts...)
}

// Close closes every endpoint's connections.
func (u *Upstream) Close() error {
	if u.stopResolve != nil {
		u.stopResolve()
	}
	u.StopPolling()
	var errs []error
	for _, e := range u.Endpoints() {
		if err := e.Close(); err != nil {
			errs = append(errs, fmt.Errorf("proxy: upstream %q: close: %w", u.Name(), err))
		}
	}
	return errors.Join(errs...)
}

// DefaultKeepaliveTime is the default interval of pings to an upstream
// while calls are in flight and no data flows: a little over the 5 minutes
// a default gRPC server enforces (its MinTime), so that the ping timer and
// the server's clock, which start at slightly different instants, never
// make a ping look early. grpc-go's server counts a strike for a ping that
// arrives less than MinTime after the previous one unless it sent data or
// headers in between (internal/transport/http2_server.go, handlePing).
const DefaultKeepaliveTime = 5*time.Minute + 30*time.Second

// UpstreamOptions configures DialUpstream. The zero value dials without TLS
// with the defaults given on each field.
type UpstreamOptions struct {
	// Name is the upstream metric label. Empty means the dial target.
	Name string
	// Credentials secure the connections (TLS). Nil means plaintext (h2c),
	// what Triton and TF-Serving serve by default.
	Credentials credentials.TransportCredentials
	// MaxMsgSize is the default message size limit of the connections, in
	// bytes. Zero or negative means DefaultMaxMsgSize. The proxy sets its own
	// limit (WithMaxMsgSize) on every call, which takes precedence.
	MaxMsgSize int
	// Conns is the number of connections in the pool. Zero or negative
	// means DefaultUpstreamConns. More than one spreads load over several HTTP/2 connections
	// (and server threads) and keeps working while one reconnects.
	Conns int
	// Keepalive sets HTTP/2 pings. The zero value means
	// DefaultKeepaliveTime, Timeout 20s, PermitWithoutStream false; a Time
	// without a Timeout gets 20s. gRPC servers by default (grpc-go, and
	// gRPC core under Triton and TF-Serving) accept a ping only every 5
	// minutes while no data flows (2 hours without calls) and answer the
	// third early one with GOAWAY "too_many_pings", which fails every call
	// on the connection: a long call through a proxy pinging every 30s died
	// at 121s. Lower Time only for servers configured to allow it.
	Keepalive keepalive.ClientParameters
	// ConnectTimeout bounds one connection attempt. Zero or negative means
	// 5s. A fail-fast call waits at most this long for a first connection,
	// and fails at once with UNAVAILABLE while the upstream is down.
	ConnectTimeout time.Duration
	// BackoffMax caps the wait between reconnection attempts. Zero or
	// negative means 5s, so a restarted model server is found again
	// quickly (gRPC's default is 120s).
	BackoffMax time.Duration
	// Movable dials a host:port target so that Upstream.Move can point it
	// elsewhere: each connection gets its address from a resolver of its
	// own instead of gRPC's DNS resolver (the name is still resolved at
	// each connection attempt, by the dialer). Other targets ignore it.
	Movable bool
	// Balance is how a call's endpoint is picked when the target names
	// several (host:port,host:port).
	Balance Balance
	// SlowStart is how long a new or returning endpoint of a pool (added,
	// connected again, back from an ejection) takes to reach its full
	// share of calls, from a tenth of it; zero means
	// DefaultEndpointSlowStart, negative none.
	SlowStart time.Duration
	// Resolver resolves the name of a dns:///name:port target, each of
	// its addresses an endpoint, every ResolveEvery (zero:
	// DefaultResolveEvery). Nil means net.DefaultResolver.
	Resolver     *net.Resolver
	ResolveEvery time.Duration
	// DialOptions are added last, after the options built from the fields
	// above, so they can override any of them.
	DialOptions []grpc.DialOption
}

// withDefaults returns o with its zero fields filled.
func (o UpstreamOptions) withDefaults(target string) UpstreamOptions {
	if o.Name == "" {
		o.Name = target
	}
	if o.MaxMsgSize <= 0 {
		o.MaxMsgSize = DefaultMaxMsgSize
	}
	if o.Conns <= 0 {
		o.Conns = DefaultUpstreamConns
	}
	if o.Keepalive.Time <= 0 {
		o.Keepalive.Time = DefaultKeepaliveTime
	}
	if o.Keepalive.Timeout <= 0 {
		o.Keepalive.Timeout = 20 * time.Second
	}
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = 5 * time.Second
	}
	if o.BackoffMax <= 0 {
		o.BackoffMax = 5 * time.Second
	}
	return o
}

// DialUpstream creates the connection pool to target ("host:port", or any
// gRPC target) and starts connecting at once, so the first call does not
// pay for the handshake. It fails only on invalid options: an unreachable
// upstream makes calls fail with UNAVAILABLE, it does not fail the dial.
func DialUpstream(target string, opts UpstreamOptions) (*Upstream, error) {
	o := opts.withDefaults(target)
	creds := o.Credentials
	if creds == nil {
		creds = insecure.NewCredentials()
	}
	bo := backoff.DefaultConfig
	bo.BaseDelay = min(250*time.Millisecond, o.BackoffMax)
	bo.MaxDelay = o.BackoffMax
	dialOpts := append([]grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		grpc.WithKeepaliveParams(o.Keepalive),
		experimental.WithBufferPool(bufferPool),
		grpc.WithInitialWindowSize(transportWindow),
		grpc.WithInitialConnWindowSize(transportConnWindow),
		grpc.WithReadBufferSize(transportBuffer),
		grpc.WithWriteBufferSize(transportBuffer),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: bo, MinConnectTimeout: o.ConnectTimeout}),
		grpc.WithDefaultCallOptions(
			grpc.MaxCallRecvMsgSize(o.MaxMsgSize),
			grpc.MaxCallSendMsgSize(o.MaxMsgSize),
		),
	}, o.DialOptions...)

	addrs := strings.Split(target, ",")
	dnsHost, dnsPort, isDNS := pool.DNSTarget(target)
	resolver := o.Resolver
	if resolver == nil {
		resolver = net.DefaultResolver
	}
	if isDNS && len(o.DialOptions) == 0 {
		// A pool of the name's addresses, when it resolves now; else
		// one endpoint through gRPC's resolver until it does. Each
		// endpoint is dialled at its address under the name's
		// authority, so TLS checks the name.
		if found, err := pool.ResolveAddrs(context.Background(), resolver, dnsHost, dnsPort); err == nil && len(found) > 0 {
			addrs = found
		}
		dialOpts = append(dialOpts, grpc.WithAuthority(net.JoinHostPort(dnsHost, dnsPort)))
	} else {
		isDNS = false
	}
	movable := o.Movable && len(addrs) == 1 && pool.PlainHostPort(target)
	setServerName := o.Credentials == nil || o.Credentials.Info().ServerName == ""
	up := &Upstream{}
	slowStart := o.SlowStart
	if slowStart == 0 {
		slowStart = DefaultEndpointSlowStart
	}
	up.Init(o.Balance, slowStart)
	var conns [][]*grpc.ClientConn // each address's
	fail := func(err error) (*Upstream, error) {
		for _, cs := range conns {
			for _, cc := range cs {
				_ = cc.Close()
			}
		}
		return nil, fmt.Errorf("proxy: dial upstream %q: %w", target, err)
	}
	plain := !slices.ContainsFunc(addrs, func(a string) bool { return !pool.PlainHostPort(a) })
	for _, addr := range addrs {
		if len(addrs) > 1 && !pool.PlainHostPort(addr) {
			return fail(fmt.Errorf("endpoint %q is not host:port", addr))
		}
		conns = append(conns, nil)
		for range o.Conns {
			dialTarget, opts := addr, dialOpts
			if movable {
				r := manual.NewBuilderWithScheme(movableScheme)
				r.InitialState(resolverState(addr, setServerName))
				up.resolvers = append(up.resolvers, r)
				dialTarget = movableScheme + ":///" + addr
				opts = append(slices.Clip(dialOpts), grpc.WithResolvers(r))
			}
			cc, err := grpc.NewClient(dialTarget, opts...)
			if err != nil {
				return fail(err)
			}
			cc.Connect()
			conns[len(conns)-1] = append(conns[len(conns)-1], cc)
		}
	}
	d := &upstreamDest{name: o.Name, address: target}
	if movable {
		up.setServerName = setServerName
	}
	if isDNS {
		plain = true // its endpoints are the name's addresses from now on
		up.dns = target
	}
	if len(o.DialOptions) == 0 {
		// Known only without DialOptions, which may set other defaults.
		up.callLimit = o.MaxMsgSize
		if opts.Credentials == nil && plain {
			up.relayable, up.relayConns = true, o.Conns
			d.relayAddr = target
		}
	}
	list := make([]*Endpoint, len(addrs))
	for i, addr := range addrs {
		relayAddr := ""
		if up.relayable {
			if pool.PlainHostPort(addr) {
				relayAddr = addr
			} else {
				d.relayAddr = "" // a name not resolved yet: the gRPC path
			}
		}
		list[i] = pool.NewEndpoint(addr, relayAddr, conns[i])
		list[i].Watch()
	}
	if plain {
		up.dialer = &endpointDialer{opts: dialOpts, conns: o.Conns, relay: up.relayable}
	}
	up.Replace(list)
	up.dest.Store(d)
	if plain {
		// After the endpoints are stored: the poll reads them.
		up.PollModels()
	}
	if isDNS {
		ctx, cancel := context.WithCancel(context.Background())
		up.stopResolve = cancel
		every := o.ResolveEvery
		if every <= 0 {
			every = DefaultResolveEvery
		}
		go pool.ResolveLoop(ctx, resolver, dnsHost, dnsPort, every, func(addrs []string) error {
			return up.SetEndpoints(addrs, endpointDrain)
		})
	}
	return up, nil
}
