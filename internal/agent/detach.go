package agent

import (
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"

	"github.com/paddock-dev/paddock/internal/agent/wire"
)

// The signals that detach the agent from its unix socket and attach it
// again (wire.SignalDetach, wire.SignalAttach).
const (
	SignalDetach = wire.SignalDetach
	SignalAttach = wire.SignalAttach
)

// UnixDetach is the Detach of an agent on a local runtime's unix socket:
// SignalDetach takes it off socket (the file is removed), SignalAttach
// makes it listen there again. stop ends the signal handling.
func UnixDetach(socket string) (d Detach, stop func()) {
	off, on := make(chan os.Signal, 1), make(chan os.Signal, 1)
	signal.Notify(off, SignalDetach)
	signal.Notify(on, SignalAttach)
	return Detach{Off: off, On: on,
			Listen:   func() (net.Listener, error) { return ListenUnix(socket) },
			Detached: func() { _ = os.Remove(socket) },
		}, func() {
			signal.Stop(off)
			signal.Stop(on)
		}
}

// connSet tracks a server's connections, hijacked ones included, which
// http.Server.Close leaves open (terminals, port forwards): a detach must
// close every one, since any connection on a host socket stops a gVisor
// checkpoint.
type connSet struct {
	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

func newConnSet() *connSet { return &connSet{conns: map[net.Conn]struct{}{}} }

func (s *connSet) track(c net.Conn, st http.ConnState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch st {
	case http.StateNew:
		s.conns[c] = struct{}{}
	case http.StateClosed:
		delete(s.conns, c)
	}
}

func (s *connSet) closeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		_ = c.Close()
		delete(s.conns, c)
	}
}
