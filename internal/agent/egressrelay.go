package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"sync"
	"time"

	"github.com/paddock-dev/paddock/internal/agent/portfwd"
	"github.com/paddock-dev/paddock/internal/agent/reply"
	"github.com/paddock-dev/paddock/internal/agent/wire"
	"github.com/paddock-dev/paddock/internal/errdefs"
)

// On a cluster, a sandbox with network egress reaches the daemon's egress
// proxy, and the daemon may run in a pod of its own whose address changes
// each time it starts again. The sandbox's proxy variables cannot follow
// (a running process keeps its environment), so they name a fixed address
// on the pod's loopback (wire.EgressRelayAddr) where the agent relays
// each connection, byte for byte, to the proxy's current address: given
// at start (wire.EnvEgressUpstream) and changed by the daemon when it
// moves (wire.EgressUpstreamPath). The relay decides nothing: the proxy
// authenticates and checks every request, and the pod's NetworkPolicy
// says what it reaches.

const (
	// maxRelayConns bounds the relay's connections at once; a client
	// past it is closed at once (the proxy's own per-sandbox bound is
	// lower).
	maxRelayConns = 1024
	// relayDialTimeout bounds a connection to the proxy.
	relayDialTimeout = 10 * time.Second
)

// egressRelay forwards connections to the proxy's current address.
type egressRelay struct {
	log *slog.Logger
	ln  net.Listener

	mu       sync.Mutex
	upstream netip.AddrPort

	slots chan struct{}
}

// parseUpstream checks a proxy address: an IP and a port, both set.
func parseUpstream(s string) (netip.AddrPort, error) {
	ap, err := netip.ParseAddrPort(s)
	if err != nil || ap.Addr().IsUnspecified() || ap.Port() == 0 {
		return netip.AddrPort{}, errdefs.Invalid("egress proxy address %q: want IP:PORT", s)
	}
	return ap, nil
}

// startEgressRelay listens on listen and relays to upstream until ctx
// ends.
func startEgressRelay(ctx context.Context, log *slog.Logger, listen, upstream string) (*egressRelay, error) {
	up, err := parseUpstream(upstream)
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, err
	}
	r := &egressRelay{log: log, ln: ln, upstream: up, slots: make(chan struct{}, maxRelayConns)}
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	go r.serve()
	return r, nil
}

// egressRelayFromEnv starts the relay the environment asks for, if any.
// A relay that cannot start is logged: the sandbox runs on without its
// proxy, as it would with a proxy that is away.
func (a *Agent) egressRelayFromEnv(ctx context.Context) {
	listen, upstream := os.Getenv(wire.EnvEgressRelay), os.Getenv(wire.EnvEgressUpstream)
	if listen == "" {
		return
	}
	r, err := startEgressRelay(ctx, a.log, listen, upstream)
	if err != nil {
		a.log.Error("egress relay", "listen", listen, "err", err)
		return
	}
	a.relay.Store(r)
	a.log.Info("egress relay", "listen", r.ln.Addr().String(), "upstream", upstream)
}

// Upstream is where new connections go.
func (r *egressRelay) Upstream() netip.AddrPort {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.upstream
}

// SetUpstream changes where new connections go; open ones stay.
func (r *egressRelay) SetUpstream(ap netip.AddrPort) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.upstream = ap
}

func (r *egressRelay) serve() {
	for {
		c, err := r.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			r.log.Warn("egress relay accept", "err", err)
			time.Sleep(50 * time.Millisecond)
			continue
		}
		select {
		case r.slots <- struct{}{}:
			go func() {
				defer func() { <-r.slots }()
				r.relay(c)
			}()
		default:
			c.Close()
		}
	}
}

// relay copies c to and from a new connection to the proxy, each way
// until its end, then closes both.
func (r *egressRelay) relay(c net.Conn) {
	up, err := net.DialTimeout("tcp", r.Upstream().String(), relayDialTimeout)
	if err != nil {
		c.Close()
		r.log.Warn("egress relay: the proxy does not answer", "upstream", r.Upstream().String(), "err", err)
		return
	}
	portfwd.Splice(c, c, up)
}

// maxUpstreamBody bounds a PUT to wire.EgressUpstreamPath.
const maxUpstreamBody = 1 << 10

// handleEgressUpstream changes where the relay sends new connections.
func (a *Agent) handleEgressUpstream(w http.ResponseWriter, r *http.Request) {
	relay := a.relay.Load()
	if relay == nil {
		reply.Error(w, fmt.Errorf("this sandbox's agent runs no egress relay: %w", errdefs.ErrConflict))
		return
	}
	var req wire.EgressUpstream
	if err := json.NewDecoder(io.LimitReader(r.Body, maxUpstreamBody)).Decode(&req); err != nil {
		reply.Error(w, errdefs.Invalid("egress upstream: %v", err))
		return
	}
	ap, err := parseUpstream(req.Upstream)
	if err != nil {
		reply.Error(w, err)
		return
	}
	relay.SetUpstream(ap)
	a.log.Info("egress relay upstream changed", "upstream", ap.String())
	w.WriteHeader(http.StatusNoContent)
}
