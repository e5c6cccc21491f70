package cli

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/paddock-dev/paddock/internal/console"
	"github.com/paddock-dev/paddock/sdk/go/paddock"
)

func newConsoleCmd(g *globals) *cobra.Command {
	var listen string
	cmd := &cobra.Command{
		Use:   "console",
		Short: "Open the web console of the daemon on the local socket",
		Long: `Serve the daemon's web console on a local port and print its address.

Over the unix socket the console sees what the socket's operator sees:
everything. The address carries a token made for this run (after #, so it is
never sent over the network or logged); anyone without it is refused, so
other users of this machine cannot use the port. The console stops with this
command (Ctrl-C).

With --url (or $PADDOCK_URL) the daemon serves the console itself at / on its
TCP listener: this prints that address, to sign in with an API key.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if u := firstNonEmpty(g.url, os.Getenv(paddock.EnvURL)); u != "" {
				fmt.Fprintf(cmd.OutOrStdout(), "%s/  (sign in with an API key)\n", strings.TrimRight(u, "/"))
				return nil
			}
			socket := firstNonEmpty(g.socket, os.Getenv(paddock.EnvSocket), paddock.DefaultSocket)
			return serveConsole(cmd.Context(), cmd, listen, socket)
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:0", "loopback address to serve on (port 0 picks a free one)")
	return cmd
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

func serveConsole(ctx context.Context, cmd *cobra.Command, listen, socket string) error {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return fmt.Errorf("--listen %q: %w", listen, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("--listen %q: the console of the socket serves on a loopback address only (it acts as the daemon's operator)", listen)
	}
	if _, err := os.Stat(socket); err != nil {
		return fmt.Errorf("daemon socket %s: %w (is `paddock serve` running?)", socket, err)
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	defer ln.Close()
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return err
	}
	token := hex.EncodeToString(b)
	addr := ln.Addr().String()
	srv := &http.Server{Handler: consoleProxy(socket, token, addr), ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(cmd.OutOrStdout(), "paddock console: http://%s/#key=%s\n(Ctrl-C stops it)\n", addr, token)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		return nil
	case err := <-errc:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return err
	}
}

// consoleProxy passes the console's requests to the daemon's socket: its
// page and assets to anyone who asks for them on this address, the API
// only with the run's token (as a bearer key, or as the WebSocket
// subprotocol the page offers for a terminal).
func consoleProxy(socket, token, addr string) http.Handler {
	dial := &net.Dialer{Timeout: 10 * time.Second}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return dial.DialContext(ctx, "unix", socket)
		},
		MaxIdleConns: 16,
	}
	target := &url.URL{Scheme: "http", Host: "paddock"}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			// The daemon checks a WebSocket's Origin against its Host.
			pr.Out.Host = pr.In.Host
			pr.Out.Header.Del("Authorization")
		},
		Transport:     tr,
		FlushInterval: -1, // event streams and logs as they come
	}
	allowedHosts := map[string]bool{addr: true}
	if _, port, err := net.SplitHostPort(addr); err == nil {
		allowedHosts["localhost:"+port] = true
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A page elsewhere cannot reach this port under another name
		// (DNS rebinding): only the address printed is served.
		if !allowedHosts[r.Host] {
			http.Error(w, "unknown host", http.StatusMisdirectedRequest)
			return
		}
		p := r.URL.Path
		if p == "/v1" || strings.HasPrefix(p, "/v1/") || p == "/mcp" {
			if !consoleTokenOK(r, token) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusUnauthorized)
				fmt.Fprintln(w, `{"code":"unauthenticated","message":"this console's token is missing or wrong: open the address paddock console printed"}`)
				return
			}
		} else if p != "/" && p != "/index.html" && !strings.HasPrefix(p, "/console/") {
			http.NotFound(w, r)
			return
		}
		rp.ServeHTTP(w, r)
	})
}

func consoleTokenOK(r *http.Request, token string) bool {
	got := ""
	if a, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		got = strings.TrimSpace(a)
	} else {
		got = console.WebSocketBearer(r)
	}
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(token)) == 1
}
