package egress

import (
	"errors"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// A sandbox decides how often it is refused and how many connections it
// opens. Neither may cost the daemon without bound: refusals are recorded
// (ledger and log) once per destination and window with a repeat count,
// and at most a budget of distinct destinations per window are recorded
// one by one; open connections and DNS queries in progress are capped per
// sandbox.

// Defaults of the limits (Options).
const (
	defaultRefusalWindow = 10 * time.Second
	defaultRefusalBudget = 64
	defaultMaxConns      = DefaultMaxConns
	defaultMaxDNS        = 64
)

// DefaultMaxConns is Options.MaxConns when unset: each sandbox's open
// proxy connections.
const DefaultMaxConns = 512

// Rules of refusals by limit.
const (
	ruleConnLimit = "connection-limit"
	ruleDNSLimit  = "dns-limit"
)

type refusalKey struct {
	host      string
	port      int
	rule, via string
}

// refusalLog coalesces one sandbox's refusals. The first refusal of a
// destination in a window is recorded at once; its repeats are counted and
// recorded as one entry when the window ends. Past the budget of distinct
// destinations, refusals are only counted, and recorded as one entry for
// all of them.
type refusalLog struct {
	window time.Duration
	budget int
	emit   func(Refusal)
	id     string

	mu     sync.Mutex
	seen   map[refusalKey]int // recorded this window, with repeats since
	others int                // beyond the budget
	timer  *time.Timer
	closed bool
}

func (l *refusalLog) add(r Refusal) {
	k := refusalKey{r.Host, r.Port, r.Rule, r.Via}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return
	}
	if l.seen == nil {
		l.seen = map[refusalKey]int{}
		l.timer = time.AfterFunc(l.window, l.flush)
	}
	if _, ok := l.seen[k]; ok {
		l.seen[k]++
		l.mu.Unlock()
		return
	}
	if len(l.seen) >= l.budget {
		l.others++
		l.mu.Unlock()
		return
	}
	l.seen[k] = 0
	l.mu.Unlock()
	l.emit(r)
}

// flush ends the window: repeats and the refusals beyond the budget are
// recorded now.
func (l *refusalLog) flush() {
	l.mu.Lock()
	seen, others := l.seen, l.others
	l.seen, l.others, l.timer = nil, 0, nil
	l.mu.Unlock()
	for k, n := range seen {
		if n > 0 {
			l.emit(Refusal{Sandbox: l.id, Host: k.host, Port: k.port, Rule: k.rule, Via: k.via, Repeats: n})
		}
	}
	if others > 0 {
		l.emit(Refusal{Sandbox: l.id, Repeats: others, Others: true})
	}
}

// close records what the window holds and stops recording.
func (l *refusalLog) close() {
	l.mu.Lock()
	if l.timer != nil {
		l.timer.Stop()
	}
	l.mu.Unlock()
	l.flush()
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
}

// connLimit counts a sandbox's open connections on all its TCP listeners.
type connLimit struct {
	max  int64
	open atomic.Int64
}

func (l *connLimit) acquire() bool {
	if l.open.Add(1) > l.max {
		l.open.Add(-1)
		return false
	}
	return true
}

// limitListener admits up to the limit's connections; past it, over is
// called with the connection (to answer it) and the connection is closed.
type limitListener struct {
	net.Listener
	limit *connLimit
	over  func(c net.Conn)
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.limit.acquire() {
			return &limitedConn{Conn: c, release: func() { l.limit.open.Add(-1) }}, nil
		}
		_ = c.SetWriteDeadline(time.Now().Add(time.Second))
		l.over(c)
		c.Close()
	}
}

// limitedConn gives its slot back when closed. It keeps the TCP
// connection's half-close and raw access (SO_ORIGINAL_DST).
type limitedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

func (c *limitedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.New("no half-close")
}

func (c *limitedConn) SyscallConn() (syscall.RawConn, error) {
	if sc, ok := c.Conn.(syscall.Conn); ok {
		return sc.SyscallConn()
	}
	return nil, errors.New("not a socket")
}

// writeConnLimit answers a proxy connection past the limit.
func writeConnLimit(w io.Writer, max int64) {
	writeConnError(w, 503, "paddock egress: this sandbox already has "+strconv.FormatInt(max, 10)+" open proxy connections, the most it may have; close some and retry")
}
