package osproc

import (
	"sync"

	agentv1 "github.com/paddock-dev/paddock/proto/gen/paddock/agent/v1"
)

// Ring keeps the last cap bytes of one output stream, addressed by
// absolute offsets (bytes written since the start), so a reader can resume
// where it stopped and learn exactly how much it missed. Memory grows with
// what was written, never past cap, whatever the process prints.
type Ring struct {
	mu     sync.Mutex
	buf    []byte
	cap    int64
	end    int64
	notify chan struct{} // closed and replaced on each write and on close
	closed bool
}

// NewRing returns a Ring keeping at most capacity bytes.
func NewRing(capacity int64) *Ring {
	return &Ring{cap: capacity, notify: make(chan struct{})}
}

// Write appends p, dropping the oldest bytes past the capacity, and
// wakes waiting readers.
func (r *Ring) Write(p []byte) {
	if len(p) == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if n := int64(len(p)); n > r.cap {
		r.end += n - r.cap
		p = p[n-r.cap:]
	}
	need := min(r.cap, r.end+int64(len(p)))
	if int64(len(r.buf)) < need {
		// Grow geometrically but never past cap, so a quiet process
		// costs little and a loud one costs at most cap.
		size := min(r.cap, max(need, 2*int64(len(r.buf)), 4096))
		nb := make([]byte, size)
		copy(nb, r.buf)
		r.buf = nb
	}
	pos := r.end % r.cap
	n := copy(r.buf[pos:], p)
	copy(r.buf, p[n:])
	r.end += int64(len(p))
	close(r.notify)
	r.notify = make(chan struct{})
}

// Close wakes waiting readers for good: no more bytes will come.
func (r *Ring) Close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.closed {
		r.closed = true
		close(r.notify)
	}
}

func (r *Ring) startLocked() int64 { return max(0, r.end-r.cap) }

// ReadAt copies up to max bytes from offset off. When off is older than
// what is kept, reading starts at the oldest kept byte and dropped says
// how many bytes were lost. wait is closed when more may be read.
func (r *Ring) ReadAt(off int64, maxBytes int) (data []byte, at, dropped int64, wait <-chan struct{}, closed bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	start := r.startLocked()
	if off < start {
		dropped = start - off
		off = start
	}
	if off > r.end {
		off = r.end
	}
	n := min(r.end-off, int64(maxBytes))
	if n > 0 {
		data = make([]byte, n)
		pos := off % r.cap
		c := copy(data, r.buf[pos:min(int64(len(r.buf)), pos+n)])
		copy(data[c:], r.buf)
	}
	return data, off, dropped, r.notify, r.closed
}

// Tail returns the last n bytes kept.
func (r *Ring) Tail(n int64) []byte {
	r.mu.Lock()
	end := r.end
	r.mu.Unlock()
	data, _, _, _, _ := r.ReadAt(max(0, end-n), int(n))
	return data
}

// Info says which offsets are kept and whether any were dropped.
func (r *Ring) Info() *agentv1.LogInfo {
	r.mu.Lock()
	defer r.mu.Unlock()
	start := r.startLocked()
	return &agentv1.LogInfo{Start: start, End: r.end, Truncated: start > 0, Capacity: r.cap}
}

// Cap is how many bytes the ring keeps at most.
func (r *Ring) Cap() int64 { return r.cap }
