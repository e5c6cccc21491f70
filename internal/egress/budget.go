package egress

import (
	"errors"
	"io"
)

// maxResponseHeaderBytes bounds an upstream response's status line and
// headers, as maxHeaderBytes bounds a sandbox's request.
const maxResponseHeaderBytes = 1 << 20

var errHeadersTooLarge = errors.New("egress: message headers too large")

// headerBudget bounds how much may be read while a message's start line
// and headers are parsed: http.ReadRequest and http.ReadResponse read
// lines of any length, and a sandbox must not make the daemon buffer an
// endless header. Bodies are read after disarm, unbounded here (they are
// streamed, never held whole).
type headerBudget struct {
	r     io.Reader
	left  int64
	armed bool
}

func (h *headerBudget) arm(n int64) { h.left, h.armed = n, true }
func (h *headerBudget) disarm()     { h.armed = false }

func (h *headerBudget) Read(p []byte) (int, error) {
	if h.armed {
		if h.left <= 0 {
			return 0, errHeadersTooLarge
		}
		if int64(len(p)) > h.left {
			p = p[:h.left]
		}
	}
	n, err := h.r.Read(p)
	if h.armed {
		h.left -= int64(n)
	}
	return n, err
}
