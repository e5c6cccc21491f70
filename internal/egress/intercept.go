package egress

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// idleRequestTimeout bounds how long an intercepted connection waits for
// the sandbox's next request.
const idleRequestTimeout = 2 * time.Minute

// intercepts reports whether host's HTTPS is to be terminated: only hosts
// with injection rules are, and only when the server can mint certificates.
func (s *Server) intercepts(b *box, host string) bool {
	return s.opts.CA != nil && len(b.current().injectionsFor(host)) > 0
}

// prefixConn replays bytes already read (the ClientHello) before the
// rest of the connection.
type prefixConn struct {
	net.Conn
	r io.Reader
}

func (c *prefixConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// intercept terminates the sandbox's TLS to host with a leaf of the
// daemon's CA, opens its own verified TLS to the upstream over up, and
// relays HTTP/1.1 requests one at a time, setting the injected headers.
// The proxy never follows redirects: a redirect to another host comes back
// to the sandbox, whose next request is checked and injected on its own.
func (s *Server) intercept(b *box, client net.Conn, hello []byte, br *bufio.Reader, up net.Conn, host string, port int, via string) {
	defer client.Close()
	defer up.Close()
	if n, err := NormalizeHost(host); err == nil {
		host = n // requests' Host headers are compared in this form
	}
	log := s.log.With("sandbox", b.id, "host", host, "via", via)
	leaf, err := s.opts.CA.Leaf(host)
	if err != nil {
		log.Error("egress: mint certificate", "err", err)
		return
	}
	tc := tls.Server(&prefixConn{Conn: client, r: io.MultiReader(bytes.NewReader(hello), br)}, &tls.Config{
		Certificates: []tls.Certificate{*leaf},
		NextProtos:   []string{"http/1.1"},
		MinVersion:   tls.VersionTLS12,
	})
	hctx, cancel := context.WithTimeout(context.Background(), s.opts.HandshakeTimeout)
	defer cancel()
	if err := tc.HandshakeContext(hctx); err != nil {
		log.Info("egress: sandbox TLS handshake", "err", err)
		return
	}
	_ = client.SetDeadline(time.Time{})
	uc := tls.Client(up, &tls.Config{
		ServerName: host,
		RootCAs:    s.opts.UpstreamRoots,
		NextProtos: []string{"http/1.1"},
		MinVersion: tls.VersionTLS12,
	})
	chb := &headerBudget{r: tc}
	cbr := bufio.NewReader(chb)
	if err := uc.HandshakeContext(hctx); err != nil {
		log.Warn("egress: upstream TLS handshake", "err", err)
		// The refusal answers the sandbox's first request, not its
		// handshake: a response that comes before its request is one an
		// HTTP client may take for a stray and drop.
		_ = client.SetReadDeadline(time.Now().Add(idleRequestTimeout))
		chb.arm(maxHeaderBytes + int64(cbr.Size()))
		if _, err := http.ReadRequest(cbr); err != nil {
			return
		}
		writeConnError(tc, http.StatusBadGateway, "paddock egress: upstream TLS to "+host+" failed verification or handshake")
		return
	}
	uhb := &headerBudget{r: uc}
	ubr := bufio.NewReader(uhb)
	for {
		_ = client.SetReadDeadline(time.Now().Add(idleRequestTimeout))
		chb.arm(maxHeaderBytes + int64(cbr.Size()))
		req, err := http.ReadRequest(cbr)
		chb.disarm()
		if err != nil {
			return
		}
		_ = client.SetReadDeadline(time.Time{})
		if !s.relayInjected(b, tc, cbr, uc, ubr, uhb, req, host, port, via) {
			return
		}
	}
}

// secretsOf is the secret lookup for the sandbox id's injection rules:
// its owner's secrets only (Options.Secret), nil without a store.
func (s *Server) secretsOf(id string) func(name string) (string, error) {
	if s.opts.Secret == nil {
		return nil
	}
	return func(name string) (string, error) { return s.opts.Secret(id, name) }
}

// relayInjected checks, injects and forwards one request and relays its
// response; it reports whether the connection may carry another.
func (s *Server) relayInjected(b *box, tc *tls.Conn, cbr *bufio.Reader, uc *tls.Conn, ubr *bufio.Reader, uhb *headerBudget, req *http.Request, host string, port int, via string) bool {
	rh, rp, ok := splitHostPort(req.Host, port)
	if n, err := NormalizeHost(rh); !ok || err != nil || n != host || rp != port {
		s.refuse(b, host, port, "host-mismatch", via)
		writeRefusalConn(tc, host, port, "host-mismatch")
		return false
	}
	// Rules may have changed since the connection was opened.
	if rule := s.check(b, host, port); rule != "" {
		s.refuse(b, host, port, rule, via)
		writeRefusalConn(tc, host, port, rule)
		return false
	}
	// TRACE echoes the request, injected headers and all, back to the
	// sandbox: never forwarded to a host whose requests carry secrets.
	if req.Method == "TRACE" || req.Method == "TRACK" {
		s.refuse(b, host, port, "method:"+req.Method, via)
		writeConnError(tc, http.StatusMethodNotAllowed, "paddock egress: "+req.Method+" is refused on "+host+": the proxy adds credentials to its requests, and "+req.Method+" would echo them back")
		return false
	}
	for _, h := range []string{"Proxy-Connection", "Proxy-Authorization", "Keep-Alive"} {
		req.Header.Del(h)
	}
	var secrets []string
	for _, in := range b.current().injectionsFor(host) {
		t, err := ParseTemplate(in.Value)
		var v string
		var used []string
		if err == nil {
			v, used, err = t.render(s.secretsOf(b.id))
		}
		if err != nil {
			// The error names the secret, never its value.
			s.log.Error("egress: injection", "sandbox", b.id, "host", host, "header", in.Header, "err", err)
			writeConnError(tc, http.StatusBadGateway, "paddock egress: cannot inject header "+in.Header+" for "+host)
			return false
		}
		req.Header.Set(in.Header, v)
		secrets = append(secrets, used...)
	}
	// What comes back is scrubbed of the secrets (scrub.go); asking for an
	// uncompressed body keeps it scrubbable.
	pats := scrubPatterns(secrets)
	if len(pats) > 0 {
		req.Header.Set("Accept-Encoding", "identity")
	}
	// The proxy reads the whole body before the upstream answers, so it
	// lets the client send it at once rather than wait for a 100.
	if strings.EqualFold(req.Header.Get("Expect"), "100-continue") {
		req.Header.Del("Expect")
		if _, err := io.WriteString(tc, "HTTP/1.1 100 Continue\r\n\r\n"); err != nil {
			return false
		}
	}
	if err := req.Write(uc); err != nil {
		writeConnError(tc, http.StatusBadGateway, "paddock egress: upstream write failed")
		return false
	}
	bw := bufio.NewWriterSize(tc, 32<<10)
	var resp *http.Response
	for {
		var err error
		uhb.arm(maxResponseHeaderBytes + int64(ubr.Size()))
		resp, err = http.ReadResponse(ubr, req)
		uhb.disarm()
		if err != nil {
			writeConnError(tc, http.StatusBadGateway, "paddock egress: upstream response unreadable")
			return false
		}
		resp.Status = scrubString(resp.Status, pats)
		scrubHeader(resp.Header, pats)
		// Informational answers (103 Early Hints) pass on; the final one follows.
		if resp.StatusCode >= 200 || resp.StatusCode == http.StatusSwitchingProtocols {
			break
		}
		fmt.Fprintf(bw, "HTTP/1.1 %s\r\n", resp.Status)
		if err := resp.Header.Write(bw); err != nil {
			return false
		}
		if _, err := io.WriteString(bw, "\r\n"); err != nil || bw.Flush() != nil {
			return false
		}
	}
	defer resp.Body.Close()
	// Flushing before each upstream read keeps streamed responses
	// (server-sent events) flowing instead of waiting for a full buffer.
	body := resp.Body
	if enc := resp.Header.Get("Content-Encoding"); len(pats) > 0 && enc != "" && !strings.EqualFold(enc, "identity") {
		if s.logLim.allow("encoded/" + b.id + "/" + host) {
			s.log.Warn("egress: an intercepted response is encoded despite Accept-Encoding: identity; its body cannot be scrubbed of the injected secrets", "sandbox", b.id, "host", host, "encoding", enc)
		}
	}
	trailer := resp
	resp.Body = struct {
		io.Reader
		io.Closer
	}{flushBeforeRead{r: newScrubber(body, pats, func() { scrubHeader(trailer.Trailer, pats) }), w: bw}, body}
	// Hidden behind a plain Writer: bufio's ReadFrom would read into the
	// buffer that flushBeforeRead is flushing.
	if err := resp.Write(struct{ io.Writer }{bw}); err != nil {
		return false
	}
	if err := bw.Flush(); err != nil {
		return false
	}
	if resp.StatusCode == http.StatusSwitchingProtocols {
		// An upgraded connection (WebSocket) is spliced from here on:
		// its later frames carry no headers to inject.
		done := make(chan struct{})
		go func() { _, _ = io.Copy(uc, cbr); uc.Close(); close(done) }()
		_, _ = io.Copy(tc, newScrubber(ubr, pats, nil))
		tc.Close()
		<-done
		return false
	}
	return !req.Close && !resp.Close
}

type flushBeforeRead struct {
	r io.Reader
	w *bufio.Writer
}

func (f flushBeforeRead) Read(p []byte) (int, error) {
	if err := f.w.Flush(); err != nil {
		return 0, err
	}
	return f.r.Read(p)
}

// writeRefusalConn answers a refused request on a raw connection.
func writeRefusalConn(w io.Writer, host string, port int, rule string) {
	body := fmt.Sprintf("paddock egress: %s refused by rule %s\n", net.JoinHostPort(host, strconv.Itoa(port)), rule)
	fmt.Fprintf(w, "HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain; charset=utf-8\r\nX-Paddock-Egress-Rule: %s\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", rule, len(body), body)
}

func writeConnError(w io.Writer, code int, msg string) {
	msg = strings.TrimSpace(msg) + "\n"
	fmt.Fprintf(w, "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", code, http.StatusText(code), len(msg), msg)
}
