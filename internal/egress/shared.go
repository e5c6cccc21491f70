package egress

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"
)

// The shared proxy serves sandboxes the daemon does not plumb a network
// for (pods on a Kubernetes cluster): they reach one listener over their
// own network, so a client's address says nothing about which sandbox it
// is. Each request names its sandbox instead, with Proxy-Authorization
// (Basic, the sandbox id as user and a token of the sandbox's own as
// password), which HTTP_PROXY URLs carry for every common client. A
// connection belongs to the first sandbox that authenticates on it; a
// request on it naming another is refused. Only the explicit proxy is
// served: there is no transparent port nor DNS (the cluster's
// NetworkPolicy lets the pod reach nothing else), so a program that
// ignores HTTP_PROXY has no network.

// sharedRealm is the Basic realm the shared proxy asks credentials for.
const sharedRealm = "paddock egress"

// maxSharedConns bounds the shared listener's connections before they
// authenticate, whoever opens them (each sandbox's own limit applies once
// it is known).
const maxSharedConns = 4096

// AttachShared registers sandbox id on the shared listener (ServeShared)
// with its token and policy. Attaching an attached sandbox updates both.
func (s *Server) AttachShared(id, token string, p Policy) error {
	if len(token) < 16 {
		return fmt.Errorf("egress attach %s: the proxy token is too short", id)
	}
	p.Direct = s.DirectRoutes(p)
	s.mu.Lock()
	defer s.mu.Unlock()
	if b, ok := s.boxes[id]; ok {
		b.mu.Lock()
		b.policy, b.token = p, token
		b.mu.Unlock()
		go s.recheck(b) // s.mu is held
		return nil
	}
	b := s.newBox(id, netip.Addr{}, p)
	b.token = token
	s.boxes[id] = b
	return nil
}

// ServeShared serves the shared proxy on ln until ln is closed (it
// returns nil then) or Close.
func (s *Server) ServeShared(ln net.Listener) error {
	lim := &connLimit{max: maxSharedConns}
	hs := &http.Server{
		Handler: s.sharedHandler(),
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, connKey{}, c)
		},
		ConnState: func(c net.Conn, st http.ConnState) {
			if st == http.StateClosed {
				if sc, ok := c.(*sharedConn); ok {
					sc.unbind()
				}
			}
		},
		ReadHeaderTimeout: s.opts.HandshakeTimeout,
		IdleTimeout:       90 * time.Second,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	s.mu.Lock()
	s.sharedSrv = append(s.sharedSrv, hs)
	s.mu.Unlock()
	err := hs.Serve(&sharedListener{limitListener: limitListener{Listener: ln, limit: lim, over: func(c net.Conn) {
		writeConnError(c, http.StatusServiceUnavailable, "paddock egress: too many connections")
	}}})
	if errors.Is(err, http.ErrServerClosed) || errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// sharedListener wraps each accepted connection so it can be bound to the
// sandbox that authenticates on it.
type sharedListener struct{ limitListener }

func (l *sharedListener) Accept() (net.Conn, error) {
	c, err := l.limitListener.Accept()
	if err != nil {
		return nil, err
	}
	return &sharedConn{Conn: c}, nil
}

// sharedConn is a shared listener's connection and the sandbox it serves,
// once one authenticated on it.
type sharedConn struct {
	net.Conn
	mu     sync.Mutex
	box    *box
	closed bool
	once   sync.Once
}

// bind gives c to b for its life; it is false when c already serves
// another sandbox or b has as many connections as it may have (over
// says which).
func (c *sharedConn) bind(b *box) (ok, over bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.box != nil {
		return c.box == b, false
	}
	if c.closed || !b.connLim.acquire() {
		return false, !c.closed
	}
	if !b.track(c) {
		b.connLim.open.Add(-1)
		return false, false
	}
	c.box = b
	return true, false
}

// unbind gives c's place in its sandbox's limit back.
func (c *sharedConn) unbind() {
	c.once.Do(func() {
		c.mu.Lock()
		b := c.box
		c.closed = true
		c.mu.Unlock()
		if b != nil {
			b.connLim.open.Add(-1)
			// Not here: a rule change or a detach closes the sandbox's
			// connections while it holds the box's lock.
			go b.untrack(c)
		}
	})
}

func (c *sharedConn) Close() error {
	err := c.Conn.Close()
	c.unbind()
	return err
}

func (c *sharedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.New("no half-close")
}

// sharedHandler authenticates each request and hands it to its sandbox's
// proxy handler.
func (s *Server) sharedHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b := s.authenticate(r)
		if b == nil {
			w.Header().Set("Proxy-Authenticate", `Basic realm="`+sharedRealm+`"`)
			w.Header().Set("Connection", "close")
			http.Error(w, "paddock egress: this proxy needs the sandbox's credentials (its HTTP_PROXY variable carries them)", http.StatusProxyAuthRequired)
			return
		}
		sc, _ := connOf(r).(*sharedConn)
		if sc == nil {
			http.Error(w, "paddock egress: no connection", http.StatusInternalServerError)
			return
		}
		if ok, over := sc.bind(b); !ok {
			w.Header().Set("Connection", "close")
			if over {
				s.refuse(b, "", 0, ruleConnLimit, "proxy")
				http.Error(w, fmt.Sprintf("paddock egress: this sandbox already has %d open proxy connections, the most it may have; close some and retry", b.connLim.max), http.StatusServiceUnavailable)
				return
			}
			w.Header().Set("Proxy-Authenticate", `Basic realm="`+sharedRealm+`"`)
			http.Error(w, "paddock egress: this connection serves another sandbox", http.StatusProxyAuthRequired)
			return
		}
		s.proxyHandler(b).ServeHTTP(w, r)
	})
}

// authenticate returns the attached sandbox r's Proxy-Authorization
// names with its token, or nil.
func (s *Server) authenticate(r *http.Request) *box {
	id, token, ok := parseProxyBasic(r.Header.Get("Proxy-Authorization"))
	if !ok {
		return nil
	}
	s.mu.Lock()
	b := s.boxes[id]
	s.mu.Unlock()
	if b == nil {
		return nil
	}
	b.mu.RLock()
	want := b.token
	b.mu.RUnlock()
	if want == "" || subtle.ConstantTimeCompare([]byte(token), []byte(want)) != 1 {
		if s.logLim.allow("auth/" + id) {
			s.log.Warn("egress: a wrong proxy token for a sandbox", "sandbox", id, "from", r.RemoteAddr)
		}
		return nil
	}
	return b
}

// parseProxyBasic reads a Basic Proxy-Authorization value.
func parseProxyBasic(v string) (user, pass string, ok bool) {
	r := http.Request{Header: http.Header{"Authorization": {v}}}
	return r.BasicAuth()
}
