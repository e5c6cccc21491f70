package files

import (
	"bufio"
	"compress/gzip"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/paddock-dev/paddock/internal/errdefs"
)

// gzip on /files, as envd does it: an upload may be sent with
// Content-Encoding: gzip, and a download is gzipped when Accept-Encoding
// prefers it. Decompression streams straight into the file being written,
// so a small body that inflates enormously costs no more memory than a
// plain upload (gzip keeps a 32 KiB window) and meets the same disk cap:
// the write fails with "no space" at the same byte either way.

const maxEncodingHeader = 1024

// uploadBody returns the decoded upload body. The returned closer releases
// the decoder; the request body stays the server's to close. Errors while
// decoding surface through writeFile's bodyReader as the client's fault.
func uploadBody(r *http.Request) (io.Reader, func(), error) {
	vals := r.Header.Values("Content-Encoding")
	if len(vals) == 0 {
		return r.Body, func() {}, nil
	}
	raw := strings.Join(vals, ",")
	if len(raw) > maxEncodingHeader {
		return nil, nil, errdefs.Invalid("Content-Encoding header is too long")
	}
	var codings []string
	for _, c := range strings.Split(raw, ",") {
		c = strings.ToLower(strings.TrimSpace(c))
		if c != "" && c != "identity" {
			codings = append(codings, c)
		}
	}
	switch {
	case len(codings) == 0:
		return r.Body, func() {}, nil
	case len(codings) > 1:
		return nil, nil, errdefs.Invalid("only one Content-Encoding is supported, got %q", truncateForMessage(raw))
	case codings[0] != "gzip" && codings[0] != "x-gzip":
		return nil, nil, errdefs.Invalid("unsupported Content-Encoding %q; supported: gzip, identity", truncateForMessage(codings[0]))
	}
	zr, err := gzip.NewReader(r.Body)
	if err != nil {
		return nil, nil, errdefs.Invalid("upload body is not valid gzip: %v", err)
	}
	return zr, func() { _ = zr.Close() }, nil
}

// negotiateEncoding picks the download's coding from Accept-Encoding:
// "gzip" or "" (identity). Identity is acceptable unless refused with q=0
// (RFC 9110, 12.5.3), and it is what a client gets unless it asked for
// gzip in particular: gzip is the only other coding it accepts, at least
// as much as identity. A generic "gzip, deflate" (what Node's fetch sends
// on every request) gets identity, because fetch's streaming inflate costs
// far more than the transfer saves: 100 MiB took 20 s instead of 0.3 s
// through a local daemon. If identity is refused, gzip is served when it is
// acceptable at all; if nothing is acceptable, ok is false.
func negotiateEncoding(header string) (coding string, ok bool) {
	if header == "" {
		return "", true
	}
	if len(header) > maxEncodingHeader {
		return "", true // advisory: ignore rather than refuse
	}
	qGzip, qIdentity, qAny := -1.0, -1.0, -1.0
	others := false // another coding accepted: not a request for gzip in particular
	for _, item := range strings.Split(header, ",") {
		name, params, _ := strings.Cut(item, ";")
		name = strings.ToLower(strings.TrimSpace(name))
		if name == "" {
			continue
		}
		q := 1.0
		for _, p := range strings.Split(params, ";") {
			k, v, found := strings.Cut(strings.TrimSpace(p), "=")
			if found && strings.EqualFold(strings.TrimSpace(k), "q") {
				f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
				if err != nil || f < 0 || f > 1 {
					f = 0
				}
				q = f
			}
		}
		switch name {
		case "gzip", "x-gzip":
			qGzip = max(qGzip, q)
		case "identity":
			qIdentity = max(qIdentity, q)
		case "*":
			qAny = max(qAny, q)
			others = others || q > 0
		default:
			others = others || q > 0
		}
	}
	if qGzip < 0 {
		qGzip = qAny
	}
	if qIdentity < 0 {
		qIdentity = 1
		if qAny == 0 {
			qIdentity = 0
		}
	}
	switch {
	case qIdentity == 0 && qGzip > 0:
		return "gzip", true
	case qIdentity == 0:
		return "", false
	case qGzip > 0 && qGzip >= qIdentity && !others:
		return "gzip", true
	}
	return "", true
}

// rangeOrConditional requests are served as identity: a range of a gzip
// stream is meaningless to the client, and ServeContent answers both.
func rangeOrConditional(r *http.Request) bool {
	for _, h := range []string{"Range", "If-Range", "If-Modified-Since", "If-None-Match", "If-Match", "If-Unmodified-Since"} {
		if r.Header.Get(h) != "" {
			return true
		}
	}
	return false
}

// serveGzip streams f gzipped. The length is unknown up front, so a failure
// after the first byte can only cut the stream short, which the client's
// gzip reader reports as a truncated stream rather than silently accepting.
func serveGzip(w http.ResponseWriter, r *http.Request, f io.Reader) {
	w.Header().Set("Content-Encoding", "gzip")
	w.Header().Del("Content-Length")
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return
	}
	// Fastest level: most transfers are over loopback or a LAN, where the
	// sandbox's CPU, not the bytes, is the cost.
	// deflate emits a few hundred bytes at a time; batching them keeps a
	// relay that flushes every write from sending a frame per fragment.
	bw := bufio.NewWriterSize(w, 64<<10)
	zw, _ := gzip.NewWriterLevel(bw, gzip.BestSpeed)
	if _, err := io.Copy(zw, f); err != nil {
		return // no Close: leave the stream without its trailer
	}
	if zw.Close() == nil {
		_ = bw.Flush()
	}
}
