package egress

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"
)

// Rules that refuse a CONNECT tunnel by what the client sends in it.
const (
	ruleUnknownProtocol  = "unknown-protocol"
	ruleHandshakeTimeout = "handshake-timeout"
	ruleHostMismatch     = "host-mismatch"
	ruleSNIMismatch      = "sni-mismatch"
)

// webPort reports whether clients of port speak first and speak TLS or
// HTTP there: on these ports a tunnel must show the host it was granted.
func webPort(port int) bool { return port == 80 || port == 443 }

// handleConnect serves CONNECT host:port. The tunnel is checked on what
// the client sends first, because an allowed destination address can
// serve other names (a CDN, a shared host): a TLS ClientHello must carry
// SNI host, an HTTP/1.x request a Host of host (every request on the
// connection), and on ports 80 and 443 nothing else is let through, not
// even silence. On another port the rules list explicitly, a stream that
// is neither TLS nor HTTP, or a client that waits for the server to speak
// first (SSH, SMTP, databases), is spliced: the destination is the allowed
// name's own address, and such protocols name no host to check.
func (s *Server) handleConnect(b *box, w http.ResponseWriter, r *http.Request) {
	host, port, ok := splitHostPort(r.Host, 0)
	if !ok || port == 0 {
		http.Error(w, "paddock egress: CONNECT needs host:port", http.StatusBadRequest)
		return
	}
	if n, err := NormalizeHost(host); err == nil {
		host = n
	}
	if rule := s.check(b, host, port); rule != "" {
		s.refuse(b, host, port, rule, "connect")
		writeRefusal(w, host, port, rule)
		return
	}
	up, err := s.dialChecked(r.Context(), host, port)
	if err != nil {
		var ref *errRefused
		if errors.As(err, &ref) {
			s.refuse(b, host, port, ref.rule, "connect")
			writeRefusal(w, host, port, ref.rule)
			return
		}
		http.Error(w, "paddock egress: upstream: "+err.Error(), http.StatusBadGateway)
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		up.Close()
		http.Error(w, "paddock egress: cannot tunnel", http.StatusInternalServerError)
		return
	}
	conn, brw, err := hj.Hijack()
	if err != nil {
		up.Close()
		return
	}
	defer conn.Close()
	defer up.Close()
	if !b.track(conn) {
		return
	}
	defer b.untrack(conn)
	if !b.track(up) {
		return
	}
	defer b.untrack(up)
	// From here a rule change closes the tunnel (track.go).
	if _, rule := s.admit(b, host, port, conn, up); rule != "" {
		s.refuse(b, host, port, rule, "connect")
		writeRefusalConn(conn, host, port, rule)
		return
	}
	if _, err := io.WriteString(conn, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	br := brw.Reader
	upR := bufio.NewReader(up)
	if _, err := netip.ParseAddr(host); err == nil {
		// An address an address rule allows: the rule grants the address
		// whole, any port and protocol, as the firewall does for a direct
		// connection, and there is no name to check.
		splice(conn, br, up, upR)
		return
	}
	kind, spoke, err := s.sniffTunnel(conn, br, up, upR, port)
	switch {
	case kind == kindTLS:
		sni, hello, err := readClientHello(br)
		if err != nil || sni != host {
			s.refuse(b, host, port, ruleSNIMismatch, "connect")
			return
		}
		if s.intercepts(b, host) {
			s.intercept(b, conn, hello, br, &prefixConn{Conn: up, r: upR}, host, port, "connect")
			return
		}
		if _, err := up.Write(hello); err != nil {
			return
		}
	case kind == kindHTTP:
		// Plain HTTP goes through the same per-request checks as the
		// transparent proxy's port 80; the tunnel's own upstream
		// connection is not needed. The first request's headers are
		// read under the sniffing deadline.
		up.Close()
		s.serveRequests(b, conn, br, requestScope{host: host, port: port, via: "connect"})
		return
	case spoke:
		// The server spoke first (on a port the rules list; on 80 and
		// 443 nobody listens for it): not a protocol that names a host.
	case kind == kindOther:
		if webPort(port) {
			s.refuse(b, host, port, ruleUnknownProtocol, "connect")
			return
		}
	case !isTimeout(err):
		return // the client went away
	case br.Buffered() > 0:
		// The start of a request line that stopped: spliced, it could go
		// on with any Host.
		s.refuse(b, host, port, ruleUnknownProtocol, "connect")
		return
	case webPort(port):
		s.refuse(b, host, port, ruleHandshakeTimeout, "connect")
		return
	}
	// Spliced: TLS to the right name, or a protocol on a port the rules
	// list that names no host (it speaks first, or the server does).
	_ = conn.SetReadDeadline(time.Time{})
	splice(conn, br, up, upR)
}

// sniffTunnel classifies a tunnel's client stream (sniff). On a port other
// than 80 and 443 it also watches the upstream: a server that speaks
// first (SSH, SMTP, FTP, MySQL) ends the wait at once, and spoke says so;
// its bytes stay in upR. On return nothing reads either side.
func (s *Server) sniffTunnel(conn net.Conn, br *bufio.Reader, up net.Conn, upR *bufio.Reader, port int) (kind streamKind, spoke bool, err error) {
	if webPort(port) {
		kind, err = sniff(conn, br, s.opts.HandshakeTimeout)
		return kind, false, err
	}
	spokec, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		if _, err := upR.Peek(1); err == nil {
			close(spokec)
			_ = conn.SetReadDeadline(time.Now()) // wakes the client's sniff
		}
	}()
	kind, err = sniff(conn, br, s.opts.HandshakeTimeout)
	_ = up.SetReadDeadline(time.Now()) // stops the watch if the server is silent
	<-done
	_ = up.SetReadDeadline(time.Time{})
	select {
	case <-spokec:
		spoke = true
		// The watch may have cut the client's deadline short.
		_ = conn.SetReadDeadline(time.Now().Add(s.opts.HandshakeTimeout))
	default:
	}
	return kind, spoke, err
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// streamKind is what a client's first bytes show it speaks.
type streamKind int

const (
	kindUndecided streamKind = iota // could still be the start of an HTTP request line
	kindTLS                         // a TLS handshake record
	kindHTTP                        // an HTTP request line (any version)
	kindOther
)

// sniffKind classifies the first bytes of a client's stream. It leans
// towards HTTP: anything a lenient server could take for a request line
// (leading empty lines, tabs, lower-case versions, HTTP/2's preface, a
// method of any length) is HTTP here, so it is checked rather than
// spliced; the request reader then refuses what it cannot parse.
func sniffKind(b []byte) streamKind {
	i := 0
	for i < len(b) && (b[i] == '\r' || b[i] == '\n') {
		i++
	}
	if i == len(b) {
		return kindUndecided
	}
	if i == 0 && b[0] == recordTypeHandshake {
		return kindTLS
	}
	isSpace := func(c byte) bool { return c == ' ' || c == '\t' }
	// method
	j := i
	for j < len(b) && isTokenChar(b[j]) {
		j++
	}
	if j == len(b) {
		return kindUndecided
	}
	if j == i || !isSpace(b[j]) {
		return kindOther
	}
	for j < len(b) && isSpace(b[j]) {
		j++
	}
	// request-target
	k := j
	for k < len(b) && !isSpace(b[k]) && b[k] != '\r' && b[k] != '\n' {
		k++
	}
	if k == len(b) {
		return kindUndecided
	}
	if k == j || !isSpace(b[k]) {
		return kindOther // no target, or a version-less (HTTP/0.9) line: no headers, no Host
	}
	for k < len(b) && isSpace(b[k]) {
		k++
	}
	const version = "http/"
	rest := b[k:]
	n := min(len(rest), len(version))
	if !strings.EqualFold(string(rest[:n]), version[:n]) {
		return kindOther
	}
	if n < len(version) {
		return kindUndecided
	}
	return kindHTTP
}

// sniff waits up to timeout for the client's first bytes and classifies
// them, reading no more than it must (the bytes stay in br). A line that
// still looks like the start of a request when br is full is HTTP. The
// error is the read's (a timeout, or the client going away) when the kind
// is still undecided. The read deadline stays set, for the caller to read
// the handshake or first request under it.
func sniff(c net.Conn, br *bufio.Reader, timeout time.Duration) (streamKind, error) {
	_ = c.SetReadDeadline(time.Now().Add(timeout))
	n := 1
	for {
		b, err := br.Peek(n)
		if k := sniffKind(b); k != kindUndecided {
			return k, nil
		}
		if err != nil {
			return kindUndecided, err
		}
		if len(b) >= br.Size() {
			return kindHTTP, nil
		}
		n = br.Buffered() + 1
	}
}

type closeWriter interface{ CloseWrite() error }

// splice copies both ways until either side is done; clientR and upR
// read client and up (with what was read ahead of the splice).
func splice(client net.Conn, clientR io.Reader, up net.Conn, upR io.Reader) {
	done := make(chan struct{}, 2)
	go func() {
		_, _ = io.Copy(up, clientR)
		if cw, ok := up.(closeWriter); ok {
			_ = cw.CloseWrite()
		}
		done <- struct{}{}
	}()
	go func() {
		_, _ = io.Copy(client, upR)
		if cw, ok := client.(closeWriter); ok {
			_ = cw.CloseWrite()
		}
		done <- struct{}{}
	}()
	<-done
	<-done
	client.Close()
	up.Close()
}

// serveTransparent handles connections the firewall redirected from ports
// 80 and 443: the original port comes from conntrack, the host from the
// Host header or the TLS SNI.
func (s *Server) serveTransparent(b *box, ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			s.handleTransparent(b, c)
		}()
	}
}

func (s *Server) handleTransparent(b *box, c net.Conn) {
	defer c.Close()
	if !b.track(c) {
		return
	}
	defer b.untrack(c)
	orig, err := originalDst(c)
	if err != nil {
		s.log.Warn("transparent: no original destination", "sandbox", b.id, "err", err)
		return
	}
	port := int(orig.Port())
	br := bufio.NewReaderSize(c, 4096)
	_ = c.SetReadDeadline(time.Now().Add(s.opts.HandshakeTimeout))
	first, err := br.Peek(1)
	if err != nil {
		return
	}
	if first[0] == recordTypeHandshake {
		sni, hello, err := readClientHello(br)
		if err != nil || sni == "" {
			s.refuse(b, orig.Addr().String(), port, "direct-ip", "transparent")
			return
		}
		if rule := s.check(b, sni, port); rule != "" {
			s.refuse(b, sni, port, rule, "transparent")
			return
		}
		up, err := s.dialChecked(context.Background(), sni, port)
		if err != nil {
			var ref *errRefused
			if errors.As(err, &ref) {
				s.refuse(b, sni, port, ref.rule, "transparent")
			}
			return
		}
		if !b.track(up) {
			return
		}
		defer b.untrack(up)
		if _, rule := s.admit(b, sni, port, c, up); rule != "" {
			s.refuse(b, sni, port, rule, "transparent")
			return
		}
		if s.intercepts(b, sni) {
			s.intercept(b, c, hello, br, up, sni, port, "transparent")
			return
		}
		if _, err := up.Write(hello); err != nil {
			up.Close()
			return
		}
		_ = c.SetReadDeadline(time.Time{})
		splice(c, br, up, up)
		return
	}
	s.serveRequests(b, c, br, requestScope{port: port, dst: orig.Addr().String(), via: "transparent"})
}

// requestScope is what the requests on one connection may ask for.
type requestScope struct {
	// host, when set (a CONNECT tunnel), is the only host every request
	// may name; otherwise (the transparent proxy) each request's Host is
	// decided by the rules on its own.
	host string
	port int
	// dst is the connection's destination address, named when a
	// transparent request has no Host.
	dst string
	via string
}

// readRequest reads one request with its start line and headers bounded
// by the header budget; bodies are read afterwards, unbounded.
func readRequest(hb *headerBudget, br *bufio.Reader) (*http.Request, error) {
	// The bufio reader may already hold part of the next request, so the
	// budget leaves room for one buffer beyond the header bound.
	hb.arm(maxHeaderBytes + int64(br.Size()))
	defer hb.disarm()
	return http.ReadRequest(br)
}

// serveRequests reads plain HTTP/1.x requests from a sandbox's connection
// and checks each one before forwarding it, so a kept-alive connection
// cannot switch to a host the rules refuse (or, in a tunnel, to any host
// but the tunnel's).
func (s *Server) serveRequests(b *box, c net.Conn, br *bufio.Reader, sc requestScope) {
	hb := &headerBudget{r: br}
	hbr := bufio.NewReader(hb)
	for {
		req, err := readRequest(hb, hbr)
		if err != nil {
			return
		}
		_ = c.SetReadDeadline(time.Time{})
		// The destination port is the connection's; a tunnel's requests
		// must also name it if they name one.
		host, port, ok := splitHostPort(req.Host, sc.port)
		rw := newConnResponseWriter(c)
		refuse := func(host, rule string) {
			s.refuse(b, host, sc.port, rule, sc.via)
			writeRefusal(rw, host, sc.port, rule)
			rw.finish(req)
		}
		if n, err := NormalizeHost(host); err == nil {
			host = n
		}
		switch {
		case sc.host != "" && (!ok || host != sc.host || port != sc.port):
			refuse(sc.host, ruleHostMismatch)
			return
		case !ok || req.Host == "":
			refuse(sc.dst, "direct-ip")
			return
		}
		release, rule := s.admit(b, host, sc.port, c)
		if rule != "" {
			refuse(host, rule)
			return
		}
		req.RequestURI = ""
		upgraded := false
		s.forward(b, rw, req, host, sc.port, sc.via, func(resp *http.Response, up io.ReadWriteCloser) {
			// A WebSocket: the switch is relayed and both sides spliced;
			// its frames carry no Host to check.
			upgraded = true
			bw := bufio.NewWriter(c)
			fmt.Fprintf(bw, "HTTP/1.1 %s\r\n", resp.Status)
			_ = resp.Header.Write(bw)
			_, _ = io.WriteString(bw, "\r\n")
			if bw.Flush() != nil {
				up.Close()
				return
			}
			done := make(chan struct{})
			go func() { _, _ = io.Copy(up, hbr); up.Close(); close(done) }()
			_, _ = io.Copy(c, up)
			c.Close()
			<-done
		})
		release()
		if upgraded || !rw.finish(req) {
			return
		}
		_ = c.SetReadDeadline(time.Now().Add(2 * time.Minute))
	}
}
