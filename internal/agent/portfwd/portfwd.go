// Package portfwd is the agent's port forwarding: one TCP connection
// spliced to a port on the sandbox's loopback, through an HTTP/1.1
// upgrade on the agent's socket, so the daemon reaches a sandbox's ports
// (preview URLs, E2B's data plane) even when the sandbox has no network.
// It knows nothing of the agent's other services.
package portfwd

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/paddock-dev/paddock/internal/agent/reply"
	"github.com/paddock-dev/paddock/internal/agent/safefs"
	"github.com/paddock-dev/paddock/internal/agent/wire"
)

// portDialTimeout bounds the dial to a loopback port; a refusal is
// immediate, so only a port that swallows SYNs waits this long.
const portDialTimeout = 10 * time.Second

// ParsePort reads a TCP port number in 1..65535.
func ParsePort(s string) (int, error) {
	if len(s) == 0 || len(s) > 5 {
		return 0, errors.New("port must be a number from 1 to 65535")
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != s {
		return 0, errors.New("port must be a number from 1 to 65535")
	}
	return n, nil
}

// Serve answers one request to wire.PortForwardPath: an HTTP/1.1 request
// with "Upgrade: "+wire.PortForwardProtocol and ?port=N, answered with 101
// and then raw bytes both ways between the caller and that port on the
// sandbox's loopback.
func Serve(w http.ResponseWriter, r *http.Request) {
	if r.ProtoMajor != 1 || !headerHasToken(r.Header, "Connection", "upgrade") || r.Header.Get("Upgrade") != wire.PortForwardProtocol {
		reply.Status(w, http.StatusUpgradeRequired, "port forwarding needs an HTTP/1.1 upgrade to "+wire.PortForwardProtocol)
		return
	}
	port, err := ParsePort(r.URL.Query().Get("port"))
	if err != nil {
		reply.Status(w, http.StatusBadRequest, err.Error())
		return
	}
	// Only loopback: the sandbox's own services. Servers bound to "::1"
	// alone are reached by the second address.
	var upstream net.Conn
	var dialErr error
	d := net.Dialer{Timeout: portDialTimeout}
	for _, host := range []string{"127.0.0.1", "::1"} {
		upstream, dialErr = d.DialContext(r.Context(), "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if dialErr == nil {
			break
		}
	}
	if dialErr != nil {
		msg := "nothing is listening on port " + strconv.Itoa(port) + " inside the sandbox"
		if !errors.Is(dialErr, syscall.ECONNREFUSED) {
			msg = "cannot connect to port " + strconv.Itoa(port) + " inside the sandbox: " + safefs.Errno(dialErr)
		}
		reply.Status(w, http.StatusBadGateway, msg)
		return
	}
	rc := http.NewResponseController(w)
	w.Header().Set("Connection", "Upgrade")
	w.Header().Set("Upgrade", wire.PortForwardProtocol)
	w.WriteHeader(http.StatusSwitchingProtocols)
	if err := rc.Flush(); err != nil {
		_ = upstream.Close()
		return
	}
	conn, brw, err := rc.Hijack()
	if err != nil {
		_ = upstream.Close()
		return
	}
	// The server's read deadline for headers must not cut the tunnel.
	_ = conn.SetDeadline(time.Time{})
	var client io.Reader = conn
	if n := brw.Reader.Buffered(); n > 0 {
		buffered, _ := brw.Reader.Peek(n)
		client = io.MultiReader(bytes.NewReader(bytes.Clone(buffered)), conn)
	}
	Splice(conn, client, upstream)
}

// Splice copies both ways between down (read through downR) and up, and
// closes both ends once both directions are done; a half-close is passed
// on so request/response protocols that rely on it (an HTTP/1.0 client)
// still work.
func Splice(down net.Conn, downR io.Reader, up net.Conn) {
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		_, _ = io.Copy(up, downR)
		closeWrite(up)
	}()
	go func() {
		defer wg.Done()
		_, _ = io.Copy(down, up)
		closeWrite(down)
	}()
	wg.Wait()
	_ = up.Close()
	_ = down.Close()
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
		return
	}
	_ = c.Close()
}

func headerHasToken(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}
