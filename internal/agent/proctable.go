package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/paddock-dev/paddock/internal/agent/osproc"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/proto/gen/process"
)

// Output draining after the process exits: a background child may hold the
// pipes open forever, so the end event waits for EOF only while data keeps
// coming, and never longer than drainMax.
const (
	drainIdle = 200 * time.Millisecond
	drainMax  = 5 * time.Second
	chunkSize = 32 << 10
)

// proc is one process the agent started.
type proc struct {
	pid  int
	tag  string
	info *process.ProcessInfo

	ptmx *os.File  // terminal master, nil for pipes
	term *termKeep // kept output of a daemon terminal (terminals.go)

	stdinMu sync.Mutex
	stdin   *os.File // write end of the stdin pipe; nil when closed or never open

	subMu sync.Mutex
	subs  map[*subscriber]struct{}

	exited   atomic.Bool
	exitedAt atomic.Int64
	outputs  []*os.File // what the pumps read
	pumps    sync.WaitGroup

	done chan struct{} // closed once end is set
	end  *process.ProcessEvent_EndEvent
}

// subscriber is one stream (Start or Connect) following a process. Output
// is delivered blocking, so a slow reader slows the process down instead of
// the agent buffering without bound.
type subscriber struct {
	ch   chan *process.ProcessEvent
	gone chan struct{}
}

func (p *proc) subscribe() *subscriber {
	s := &subscriber{ch: make(chan *process.ProcessEvent, 4), gone: make(chan struct{})}
	p.subMu.Lock()
	p.subs[s] = struct{}{}
	p.subMu.Unlock()
	return s
}

func (p *proc) unsubscribe(s *subscriber) {
	p.subMu.Lock()
	delete(p.subs, s)
	p.subMu.Unlock()
	close(s.gone)
}

func (p *proc) publish(ev *process.ProcessEvent) {
	p.subMu.Lock()
	if p.term != nil {
		p.term.record(ev)
	}
	subs := make([]*subscriber, 0, len(p.subs))
	for s := range p.subs {
		subs = append(subs, s)
	}
	p.subMu.Unlock()
	for _, s := range subs {
		select {
		case s.ch <- ev:
		case <-s.gone:
		}
	}
}

// pump copies one output to the subscribers. Each chunk is copied out of
// the read buffer, sized to what was read: it is handed to other goroutines.
func (p *proc) pump(f *os.File, wrap func([]byte) *process.ProcessEvent_DataEvent) {
	defer p.pumps.Done()
	buf := make([]byte, chunkSize)
	for {
		if p.exited.Load() {
			if time.Since(time.Unix(0, p.exitedAt.Load())) > drainMax {
				return
			}
			_ = f.SetReadDeadline(time.Now().Add(drainIdle))
		}
		n, err := f.Read(buf)
		if n > 0 {
			chunk := make([]byte, n)
			copy(chunk, buf[:n])
			p.publish(&process.ProcessEvent{Event: &process.ProcessEvent_Data{Data: wrap(chunk)}})
		}
		if err != nil {
			return
		}
	}
}

// finish runs once the reaper reports the exit: it lets the pumps drain,
// then records the end event and releases everything.
func (p *proc) finish(ws syscall.WaitStatus, t *procTable) {
	p.exitedAt.Store(time.Now().UnixNano())
	p.exited.Store(true)
	for _, f := range p.outputs {
		// Wakes a pump blocked on an empty pipe or terminal so it re-arms
		// with the drain deadline: gVisor's terminal master never reports
		// EIO once the slave is gone, so the deadline is what ends it
		// there (see osproc.OpenPTY).
		_ = f.SetReadDeadline(time.Now().Add(drainIdle))
	}
	p.pumps.Wait()
	for _, f := range p.outputs {
		_ = f.Close()
	}
	p.closeStdin()
	p.end = endEvent(ws)
	t.remove(p)
	close(p.done)
}

func endEvent(ws syscall.WaitStatus) *process.ProcessEvent_EndEvent {
	ev := &process.ProcessEvent_EndEvent{}
	switch {
	case ws.Exited():
		ev.Exited = true
		ev.ExitCode = int32(ws.ExitStatus())
		ev.Status = "exit status " + strconv.Itoa(ws.ExitStatus())
	case ws.Signaled():
		ev.ExitCode = -1
		ev.Status = "signal: " + ws.Signal().String()
	default:
		ev.ExitCode = -1
		ev.Status = "unknown"
	}
	return ev
}

func (p *proc) closeStdin() {
	p.stdinMu.Lock()
	defer p.stdinMu.Unlock()
	if p.stdin != nil {
		_ = p.stdin.Close()
		p.stdin = nil
	}
}

// writeInput writes to the process's stdin pipe or terminal, giving up when
// ctx ends (a process that never reads would otherwise hold the request).
func (p *proc) writeInput(ctx context.Context, data []byte, toPTY bool) error {
	var f *os.File
	if toPTY {
		if p.ptmx == nil {
			return errdefs.Invalid("process %d has no terminal", p.pid)
		}
		f = p.ptmx
	} else {
		p.stdinMu.Lock()
		defer p.stdinMu.Unlock()
		if p.ptmx != nil && p.stdin == nil {
			f = p.ptmx
		} else {
			f = p.stdin
		}
		if f == nil {
			return fmt.Errorf("stdin of the process is closed or was not requested"+": %w", errdefs.ErrFailedPrecondition)
		}
	}
	_ = f.SetWriteDeadline(time.Time{})
	stop := context.AfterFunc(ctx, func() { _ = f.SetWriteDeadline(time.Unix(1, 0)) })
	defer stop()
	_, err := f.Write(data)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("process input is closed"+": %w", errdefs.ErrFailedPrecondition)
	}
	return nil
}

func (p *proc) resize(size *process.PTY_Size) error {
	if p.ptmx == nil {
		return errdefs.Invalid("process %d has no terminal", p.pid)
	}
	if size == nil || size.GetCols() == 0 || size.GetRows() == 0 || size.GetCols() > 10000 || size.GetRows() > 10000 {
		return errdefs.Invalid("terminal size must be between 1 and 10000 columns and rows")
	}
	if err := osproc.SetWinsize(p.ptmx, uint16(size.GetCols()), uint16(size.GetRows())); err != nil {
		return fmt.Errorf("resize terminal"+": %w", errdefs.ErrFailedPrecondition)
	}
	if p.term != nil {
		p.term.setSize(int(size.GetCols()), int(size.GetRows()))
	}
	return nil
}

// signal reaches the whole process group: the process leads its own.
func (p *proc) signal(sig syscall.Signal) error {
	err := syscall.Kill(-p.pid, sig)
	if errors.Is(err, syscall.ESRCH) {
		err = syscall.Kill(p.pid, sig)
	}
	if err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("signal process"+": %w", errdefs.ErrPermissionDenied)
	}
	return nil
}

// procTable indexes the running processes by pid and tag.
type procTable struct {
	mu    sync.Mutex
	byPid map[int]*proc
	byTag map[string]*proc
	ended endedTerms    // daemon terminals that ended (terminals.go)
	empty chan struct{} // closed and replaced as the table empties
}

func newProcTable() *procTable {
	return &procTable{byPid: make(map[int]*proc), byTag: make(map[string]*proc), empty: make(chan struct{})}
}

func (t *procTable) add(p *proc) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.byPid[p.pid] = p
	if p.tag != "" {
		t.byTag[p.tag] = p
	}
}

func (t *procTable) tagInUse(tag string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.byTag[tag]
	return ok
}

func (t *procTable) remove(p *proc) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.byPid[p.pid] == p {
		delete(t.byPid, p.pid)
	}
	if p.tag != "" && t.byTag[p.tag] == p {
		delete(t.byTag, p.tag)
		if p.term != nil {
			t.ended.add(p)
		}
	}
	if len(t.byPid) == 0 {
		close(t.empty)
		t.empty = make(chan struct{})
	}
}

func (t *procTable) get(sel *process.ProcessSelector) (*proc, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch s := sel.GetSelector().(type) {
	case *process.ProcessSelector_Pid:
		if p, ok := t.byPid[int(s.Pid)]; ok {
			return p, nil
		}
		return nil, errdefs.NotFound("process with pid %d", s.Pid)
	case *process.ProcessSelector_Tag:
		if p, ok := t.byTag[s.Tag]; ok {
			return p, nil
		}
		if p := t.ended.get(s.Tag); p != nil {
			return p, nil
		}
		return nil, errdefs.NotFound("process with tag %q", s.Tag)
	default:
		return nil, errdefs.Invalid("a process selector (pid or tag) is required")
	}
}

func (t *procTable) list() []*process.ProcessInfo {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]*process.ProcessInfo, 0, len(t.byPid))
	for _, p := range t.byPid {
		out = append(out, p.info)
	}
	return out
}

func (t *procTable) count() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.byPid)
}

func (t *procTable) signalAll(sig syscall.Signal) {
	t.mu.Lock()
	procs := make([]*proc, 0, len(t.byPid))
	for _, p := range t.byPid {
		procs = append(procs, p)
	}
	t.mu.Unlock()
	for _, p := range procs {
		_ = p.signal(sig)
	}
}

// waitEmpty reports whether the table emptied before ctx ended.
func (t *procTable) waitEmpty(ctx context.Context) bool {
	for {
		t.mu.Lock()
		n, ch := len(t.byPid), t.empty
		t.mu.Unlock()
		if n == 0 {
			return true
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		}
	}
}
