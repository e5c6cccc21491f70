// Package console serves Paddock's web console: a single page (assets/)
// that drives the /v1 API from a browser with an API key it keeps in the
// tab's session storage. Every asset is embedded in the binary; xterm.js
// comes from npm at build time (thirdparty.go, scripts/build.sh) into
// assets/third_party, which a plain `go build` may lack: the page then says
// its terminal is not bundled.
package console

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
)

//go:embed assets
var assets embed.FS

// CSP is the console's Content-Security-Policy: scripts only from the
// daemon itself (no inline script, no eval), requests only to it. Inline
// styles are allowed because xterm.js sets its theme in a style element;
// a style cannot run code.
const CSP = "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; " +
	"img-src 'self' blob: data:; connect-src 'self'; font-src 'self'; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// Prefix is where every asset but the page itself is served.
const Prefix = "/console/"

// Handles says whether path is the console's: the page at / and its assets.
func Handles(p string) bool {
	return p == "/" || p == "/index.html" || strings.HasPrefix(p, Prefix)
}

type file struct {
	body []byte
	etag string
	typ  string
}

// Handler serves the console. Assets are read once, at construction.
type Handler struct {
	files map[string]file // by URL path
}

// New builds the handler from the embedded assets.
func New() *Handler {
	h := &Handler{files: map[string]file{}}
	_ = fs.WalkDir(assets, "assets", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := assets.ReadFile(p)
		if err != nil {
			return err
		}
		rel := strings.TrimPrefix(p, "assets/")
		url := Prefix + rel
		if strings.HasPrefix(rel, thirdPartyDir+"/") {
			url = Prefix + "vendor/" + strings.TrimPrefix(rel, thirdPartyDir+"/")
		}
		if rel == "index.html" {
			url = "/"
		}
		sum := sha256.Sum256(b)
		typ := mime.TypeByExtension(path.Ext(p))
		if typ == "" {
			typ = "application/octet-stream"
		}
		h.files[url] = file{body: b, etag: `"` + hex.EncodeToString(sum[:8]) + `"`, typ: typ}
		return nil
	})
	return h
}

// TerminalBundled says whether this build carries xterm.js.
func (h *Handler) TerminalBundled() bool {
	_, ok := h.files[Prefix+"vendor/xterm.js"]
	return ok
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hdr := w.Header()
	hdr.Set("Content-Security-Policy", CSP)
	hdr.Set("X-Content-Type-Options", "nosniff")
	hdr.Set("X-Frame-Options", "DENY")
	hdr.Set("Referrer-Policy", "no-referrer")
	hdr.Set("Cross-Origin-Opener-Policy", "same-origin")
	hdr.Set("Cross-Origin-Resource-Policy", "same-origin")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		hdr.Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	p := r.URL.Path
	if p == "/index.html" {
		p = "/"
	}
	f, ok := h.files[p]
	if !ok {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	hdr.Set("Content-Type", f.typ)
	hdr.Set("ETag", f.etag)
	// Revalidate every time: a new binary must never run an old script.
	hdr.Set("Cache-Control", "no-cache")
	if match := r.Header.Get("If-None-Match"); match != "" && match == f.etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	if r.Method == http.MethodHead {
		return
	}
	_, _ = w.Write(f.body)
}

// WebSocketBearerPrefix marks the WebSocket subprotocol that carries an
// API key: a browser cannot set headers on a WebSocket, so the page offers
// ["paddock", WebSocketBearerPrefix+key] and the server answers with
// "paddock", never echoing the key.
const WebSocketBearerPrefix = "paddock.bearer."

// WebSocketBearer is the API key offered as a subprotocol of a WebSocket
// upgrade, or "".
func WebSocketBearer(r *http.Request) string {
	if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		return ""
	}
	for _, h := range r.Header.Values("Sec-WebSocket-Protocol") {
		for _, p := range strings.Split(h, ",") {
			if k, ok := strings.CutPrefix(strings.TrimSpace(p), WebSocketBearerPrefix); ok {
				return k
			}
		}
	}
	return ""
}
