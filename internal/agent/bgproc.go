package agent

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/paddock-dev/paddock/internal/agent/osproc"
	"github.com/paddock-dev/paddock/internal/agent/reply"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/lazyre"
	agentv1 "github.com/paddock-dev/paddock/proto/gen/paddock/agent/v1"
	"github.com/paddock-dev/paddock/proto/gen/process"
)

// Background process statuses, as the API names them.
const (
	bgStarting = "starting"
	bgRunning  = "running"
	bgExited   = "exited"
	bgKilled   = "killed"
	bgFailed   = "failed"
)

// Bounds on background processes. The agent's memory counts against the
// sandbox's own limit, so these protect the sandbox from its caller's
// mistakes more than the host.
const (
	DefaultLogBuffer = 1 << 20
	MinLogBuffer     = 4 << 10
	MaxLogBuffer     = 16 << 20
	// maxTrackedProcs bounds running plus remembered (ended) processes;
	// the oldest ended ones are forgotten first.
	maxTrackedProcs = 256
	// maxTrackedLogBytes bounds the sum of all ring capacities.
	maxTrackedLogBytes = 512 << 20
	// tailBytes is how much recent output an error about a process quotes.
	tailBytes = 2 << 10
)

var bgIDRE = lazyre.New(`^[a-zA-Z][a-zA-Z0-9_.-]{0,63}$`)

// bgProc is one background process and its kept output.
type bgProc struct {
	id      string
	cmd     []string
	cwd     string
	user    string
	started time.Time
	stdout  *osproc.Ring
	stderr  *osproc.Ring

	mu       sync.Mutex
	status   string
	pid      int
	p        *proc // nil once failed to start
	exitCode *int32
	signal   string
	errMsg   string
	ended    time.Time

	done chan struct{} // closed when the process has ended (or failed to start)
}

func (b *bgProc) info() *agentv1.BackgroundProcess {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := &agentv1.BackgroundProcess{
		Id: b.id, Pid: uint32(b.pid), Cmd: b.cmd, Cwd: b.cwd, User: b.user, Status: b.status,
		Signal: b.signal, Error: b.errMsg, StartedAtUnixNano: b.started.UnixNano(),
		Stdout: b.stdout.Info(), Stderr: b.stderr.Info(),
	}
	if b.exitCode != nil {
		out.HasExitCode, out.ExitCode = true, *b.exitCode
	}
	if !b.ended.IsZero() {
		out.EndedAtUnixNano = b.ended.UnixNano()
	}
	return out
}

func (b *bgProc) isDone() bool {
	select {
	case <-b.done:
		return true
	default:
		return false
	}
}

// lastOutput quotes the end of both streams for an error message.
func (b *bgProc) lastOutput() string {
	var parts []string
	for _, s := range []struct {
		name string
		r    *osproc.Ring
	}{{"stdout", b.stdout}, {"stderr", b.stderr}} {
		if t := strings.TrimSpace(strings.ToValidUTF8(string(s.r.Tail(tailBytes)), "?")); t != "" {
			parts = append(parts, "--- last "+s.name+" ---\n"+t)
		}
	}
	if len(parts) == 0 {
		return "it printed nothing"
	}
	return "its last output:\n" + strings.Join(parts, "\n")
}

// endText says how a process ended, for messages.
func (b *bgProc) endText() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.status == bgFailed:
		return "failed to start (" + b.errMsg + ")"
	case b.signal != "":
		return "was killed by " + b.signal
	case b.exitCode != nil:
		return fmt.Sprintf("exited with code %d", *b.exitCode)
	}
	return b.status
}

// bgTable holds the background processes by id, in start order.
type bgTable struct {
	mu    sync.Mutex
	byID  map[string]*bgProc
	order []*bgProc
	seq   int
}

func newBgTable() *bgTable { return &bgTable{byID: make(map[string]*bgProc)} }

// reserve claims id for a new process, forgetting the oldest ended
// processes when the table is full.
func (t *bgTable) reserve(b *bgProc) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if b.id == "" {
		for {
			t.seq++
			b.id = "proc-" + strconv.Itoa(t.seq)
			if _, ok := t.byID[b.id]; !ok {
				break
			}
		}
	}
	if old, ok := t.byID[b.id]; ok {
		if !old.isDone() {
			return fmt.Errorf("a process with id %q is still running: %w", b.id, errdefs.ErrConflict)
		}
		t.dropLocked(old)
	}
	var logBytes int64
	for _, o := range t.order {
		logBytes += o.stdout.Cap() + o.stderr.Cap()
	}
	for len(t.order) >= maxTrackedProcs || logBytes+b.stdout.Cap()+b.stderr.Cap() > maxTrackedLogBytes {
		victim := t.oldestEndedLocked()
		if victim == nil {
			return fmt.Errorf("too many background processes (at most %d running, %d MiB of logs): %w",
				maxTrackedProcs, maxTrackedLogBytes>>20, errdefs.ErrResourceExhausted)
		}
		logBytes -= victim.stdout.Cap() + victim.stderr.Cap()
		t.dropLocked(victim)
	}
	t.byID[b.id] = b
	t.order = append(t.order, b)
	return nil
}

func (t *bgTable) oldestEndedLocked() *bgProc {
	for _, o := range t.order {
		if o.isDone() {
			return o
		}
	}
	return nil
}

func (t *bgTable) dropLocked(b *bgProc) {
	delete(t.byID, b.id)
	for i, o := range t.order {
		if o == b {
			t.order = append(t.order[:i], t.order[i+1:]...)
			break
		}
	}
}

// get finds a process by id, or by pid when ref is a decimal number.
func (t *bgTable) get(ref string) (*bgProc, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if b, ok := t.byID[ref]; ok {
		return b, nil
	}
	if pid, err := strconv.Atoi(ref); err == nil && pid > 0 {
		// The newest first: a pid may have been reused.
		for i := len(t.order) - 1; i >= 0; i-- {
			b := t.order[i]
			b.mu.Lock()
			match := b.pid == pid
			b.mu.Unlock()
			if match {
				return b, nil
			}
		}
	}
	if len(ref) > 64 {
		ref = ref[:64] + "..."
	}
	return nil, errdefs.NotFound("background process %q", ref)
}

func (t *bgTable) list() []*bgProc {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]*bgProc(nil), t.order...)
}

func validateBgStart(req *agentv1.StartProcessRequest) (int64, error) {
	if req.GetId() != "" && !bgIDRE.MatchString(req.GetId()) {
		return 0, errdefs.Invalid("process id %q: use 1 to 64 letters, digits, '.', '_' or '-', starting with a letter", req.GetId())
	}
	if len(req.GetCmd()) == 0 || req.GetCmd()[0] == "" {
		return 0, errdefs.Invalid("a command is required")
	}
	size := req.GetLogBufferBytes()
	switch {
	case size == 0:
		size = DefaultLogBuffer
	case size < MinLogBuffer || size > MaxLogBuffer:
		return 0, errdefs.Invalid("log buffer of %d bytes: must be between %d and %d", size, MinLogBuffer, MaxLogBuffer)
	}
	return size, nil
}

// startBackground starts a process whose output goes to ring buffers and
// which outlives the request that started it.
func (a *Agent) startBackground(ctx context.Context, req *agentv1.StartProcessRequest) (*bgProc, error) {
	size, err := validateBgStart(req)
	if err != nil {
		return nil, err
	}
	b := &bgProc{
		id: req.GetId(), cmd: req.GetCmd(), cwd: req.GetCwd(), user: req.GetUser(),
		started: time.Now(), stdout: osproc.NewRing(size), stderr: osproc.NewRing(size),
		status: bgStarting, done: make(chan struct{}),
	}
	if err := a.bg.reserve(b); err != nil {
		return nil, err
	}
	cfg := &process.ProcessConfig{Cmd: req.GetCmd()[0], Args: req.GetCmd()[1:], Envs: req.GetEnv()}
	if req.GetCwd() != "" {
		cwd := req.GetCwd()
		cfg.Cwd = &cwd
	}
	noStdin := false
	tag := "bg:" + b.id
	// The request's context only carries the user: the process must
	// outlive the request.
	uctx := context.WithValue(context.WithoutCancel(ctx), userKey{}, userSelection{name: req.GetUser()})
	if b.user == "" {
		if u, err := a.userFor(uctx, ""); err == nil {
			b.user = u.Name
		}
	}
	p, sub, err := a.startProcess(uctx, &process.StartRequest{Process: cfg, Stdin: &noStdin, Tag: &tag})
	if err != nil {
		b.mu.Lock()
		b.status, b.errMsg, b.ended = bgFailed, reply.Public(err), time.Now()
		b.mu.Unlock()
		b.stdout.Close()
		b.stderr.Close()
		close(b.done)
		return b, err
	}
	b.mu.Lock()
	b.p, b.pid, b.status = p, p.pid, bgRunning
	b.mu.Unlock()
	go a.collect(b, p, sub)
	a.log.Info("background process started", "id", b.id, "pid", p.pid)
	return b, nil
}

// collect copies a process's output into its rings until it ends. It
// reads without pause, so the process never blocks on a full pipe and the
// rings, not the pipes, decide what is kept.
func (a *Agent) collect(b *bgProc, p *proc, sub *subscriber) {
	defer p.unsubscribe(sub)
	store := func(ev *process.ProcessEvent) {
		d := ev.GetData()
		if d == nil {
			return
		}
		if out := d.GetStdout(); out != nil {
			b.stdout.Write(out)
		} else if errOut := d.GetStderr(); errOut != nil {
			b.stderr.Write(errOut)
		}
	}
	for {
		select {
		case ev := <-sub.ch:
			store(ev)
			continue
		case <-p.done:
		}
		break
	}
	for {
		select {
		case ev := <-sub.ch:
			store(ev)
			continue
		default:
		}
		break
	}
	b.mu.Lock()
	b.ended = time.Now()
	end := p.end
	if end.GetExited() {
		code := end.GetExitCode()
		b.exitCode, b.status = &code, bgExited
	} else {
		b.status, b.signal = bgKilled, osproc.SignalFromStatus(end.GetStatus())
	}
	b.mu.Unlock()
	b.stdout.Close()
	b.stderr.Close()
	close(b.done)
	a.log.Info("background process ended", "id", b.id, "pid", p.pid, "status", end.GetStatus())
}

// parseSignal accepts "SIGTERM", "TERM" or "15".
func parseSignal(s string) (syscall.Signal, error) {
	if s == "" {
		return syscall.SIGTERM, nil
	}
	if n, err := strconv.Atoi(s); err == nil {
		if n < 1 || n > 64 {
			return 0, errdefs.Invalid("signal %d is out of range", n)
		}
		return syscall.Signal(n), nil
	}
	name := strings.ToUpper(s)
	if !strings.HasPrefix(name, "SIG") {
		name = "SIG" + name
	}
	if sig := unix.SignalNum(name); sig != 0 {
		return sig, nil
	}
	return 0, errdefs.Invalid("unknown signal %q", s)
}

// kill signals the process group, then SIGKILLs it when grace passes.
func (a *Agent) killBackground(ctx context.Context, b *bgProc, sig syscall.Signal, grace time.Duration) error {
	b.mu.Lock()
	p := b.p
	b.mu.Unlock()
	if p == nil || b.isDone() {
		return nil
	}
	if err := p.signal(sig); err != nil {
		return err
	}
	if sig == syscall.SIGKILL || grace <= 0 {
		if sig != syscall.SIGKILL {
			return nil // only a signal was asked for
		}
		grace = 0
	}
	if grace > 0 {
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case <-b.done:
			return nil
		case <-t.C:
		case <-ctx.Done():
			return ctx.Err()
		}
		if err := p.signal(syscall.SIGKILL); err != nil {
			return err
		}
	}
	// A SIGKILLed group ends promptly; bound the wait anyway.
	t := time.NewTimer(10 * time.Second)
	defer t.Stop()
	select {
	case <-b.done:
		return nil
	case <-t.C:
		return fmt.Errorf("process %s did not end after SIGKILL: %w", b.id, errdefs.ErrUnavailable)
	case <-ctx.Done():
		return ctx.Err()
	}
}
