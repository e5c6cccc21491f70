package egress

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"strconv"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

const (
	recordTypeHandshake = 0x16
	maxRecordLen        = 16384 + 2048
	soOriginalDst       = 80 // linux/netfilter_ipv4.h
)

// readClientHello reads the first TLS record from br (without consuming
// more) and returns the SNI host name and the record's bytes, to be replayed
// to the upstream: Paddock never terminates the sandbox's TLS.
func readClientHello(br *bufio.Reader) (string, []byte, error) {
	hdr, err := br.Peek(5)
	if err != nil {
		return "", nil, err
	}
	n := int(binary.BigEndian.Uint16(hdr[3:5]))
	if hdr[0] != recordTypeHandshake || n == 0 || n > maxRecordLen {
		return "", nil, errors.New("not a TLS handshake record")
	}
	rec := make([]byte, 5+n)
	if _, err := io.ReadFull(br, rec); err != nil {
		return "", nil, err
	}
	sni, err := parseClientHelloSNI(rec[5:])
	return sni, rec, err
}

// parseClientHelloSNI extracts the server_name (type host_name) of a
// ClientHello handshake message. Input is untrusted: every length is
// checked against what remains.
func parseClientHelloSNI(b []byte) (string, error) {
	bad := errors.New("malformed ClientHello")
	r := reader(b)
	typ, ok := r.u8()
	if !ok || typ != 1 {
		return "", bad
	}
	body, ok := r.vec(3)
	if !ok {
		return "", errors.New("ClientHello split across records")
	}
	r = reader(body)
	if _, ok := r.bytes(2 + 32); !ok { // version, random
		return "", bad
	}
	if _, ok := r.vec(1); !ok { // session id
		return "", bad
	}
	if _, ok := r.vec(2); !ok { // cipher suites
		return "", bad
	}
	if _, ok := r.vec(1); !ok { // compression methods
		return "", bad
	}
	if len(r) == 0 {
		return "", nil
	}
	exts, ok := r.vec(2)
	if !ok {
		return "", bad
	}
	for len(exts) > 0 {
		et, ok1 := exts.u16()
		data, ok2 := exts.vec(2)
		if !ok1 || !ok2 {
			return "", bad
		}
		if et != 0 {
			continue
		}
		list, ok := data.vec(2)
		if !ok {
			return "", bad
		}
		for len(list) > 0 {
			nt, ok1 := list.u8()
			name, ok2 := list.vec(2)
			if !ok1 || !ok2 {
				return "", bad
			}
			if nt == 0 {
				h, err := NormalizeHost(string(name))
				if err != nil {
					return "", err
				}
				return h, nil
			}
		}
		return "", nil
	}
	return "", nil
}

type reader []byte

func (r *reader) bytes(n int) ([]byte, bool) {
	if n < 0 || len(*r) < n {
		return nil, false
	}
	out := (*r)[:n]
	*r = (*r)[n:]
	return out, true
}

func (r *reader) u8() (byte, bool) {
	b, ok := r.bytes(1)
	if !ok {
		return 0, false
	}
	return b[0], true
}

func (r *reader) u16() (int, bool) {
	b, ok := r.bytes(2)
	if !ok {
		return 0, false
	}
	return int(b[0])<<8 | int(b[1]), true
}

// vec reads a vector with an lenBytes-byte length prefix.
func (r *reader) vec(lenBytes int) (reader, bool) {
	lb, ok := r.bytes(lenBytes)
	if !ok {
		return nil, false
	}
	n := 0
	for _, x := range lb {
		n = n<<8 | int(x)
	}
	b, ok := r.bytes(n)
	return reader(b), ok
}

// originalDst asks conntrack where a redirected connection was going.
func originalDst(c net.Conn) (netip.AddrPort, error) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return netip.AddrPort{}, errors.New("not a TCP connection")
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return netip.AddrPort{}, err
	}
	var sa unix.RawSockaddrInet4
	var serr error
	err = raw.Control(func(fd uintptr) {
		size := uint32(unsafe.Sizeof(sa))
		_, _, errno := unix.Syscall6(unix.SYS_GETSOCKOPT, fd, unix.SOL_IP, soOriginalDst,
			uintptr(unsafe.Pointer(&sa)), uintptr(unsafe.Pointer(&size)), 0)
		if errno != 0 {
			serr = errno
		}
	})
	if err == nil {
		err = serr
	}
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("SO_ORIGINAL_DST: %w", err)
	}
	port := binary.BigEndian.Uint16((*[2]byte)(unsafe.Pointer(&sa.Port))[:])
	return netip.AddrPortFrom(netip.AddrFrom4(sa.Addr), port), nil
}

// connResponseWriter writes one HTTP/1.1 response straight to a
// connection (the transparent proxy has no http.Server around it).
type connResponseWriter struct {
	c       net.Conn
	w       *bufio.Writer
	h       http.Header
	wrote   bool
	chunked io.WriteCloser
	broken  bool
}

func newConnResponseWriter(c net.Conn) *connResponseWriter {
	return &connResponseWriter{c: c, w: bufio.NewWriter(c), h: http.Header{}}
}

func (w *connResponseWriter) Header() http.Header { return w.h }

func (w *connResponseWriter) WriteHeader(code int) {
	if w.wrote {
		return
	}
	w.wrote = true
	if w.h.Get("Content-Length") == "" {
		w.h.Set("Transfer-Encoding", "chunked")
	}
	fmt.Fprintf(w.w, "HTTP/1.1 %d %s\r\n", code, http.StatusText(code))
	if err := w.h.Write(w.w); err != nil {
		w.broken = true
	}
	io.WriteString(w.w, "\r\n")
	if w.h.Get("Transfer-Encoding") == "chunked" {
		w.chunked = httputil.NewChunkedWriter(w.w)
	}
}

func (w *connResponseWriter) Write(p []byte) (int, error) {
	if !w.wrote {
		w.h.Set("Content-Length", strconv.Itoa(len(p)))
		w.WriteHeader(http.StatusOK)
	}
	if w.chunked != nil {
		return w.chunked.Write(p)
	}
	return w.w.Write(p)
}

// Flush sends what is buffered (a chunk, when chunked).
func (w *connResponseWriter) Flush() {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	_ = w.w.Flush()
}

// finish completes the response; it reports whether the connection may
// carry another request.
func (w *connResponseWriter) finish(req *http.Request) bool {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	if w.chunked != nil {
		w.chunked.Close()
		io.WriteString(w.w, "\r\n")
	}
	if err := w.w.Flush(); err != nil {
		return false
	}
	return !w.broken && !req.Close
}
