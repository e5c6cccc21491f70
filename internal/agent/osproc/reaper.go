package osproc

import (
	"errors"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Reaper owns every wait in the agent's process. As PID 1 (or a child
// subreaper) the agent inherits orphans, and one wait4(-1) loop is the only
// way to reap them; a second waiter (os/exec's cmd.Wait) would race it for
// exit statuses. So children are started but never waited on directly: the
// reaper hands each exit status to whoever registered for that pid.
type Reaper struct {
	log *slog.Logger

	// startMu is held for reading while a child is forked and registered,
	// and for writing while an exit is dispatched, so an exit can never be
	// looked up between fork and registration.
	startMu sync.RWMutex

	mu      sync.Mutex
	waiters map[int]chan<- syscall.WaitStatus

	sigc chan os.Signal
}

// The reaper is per OS process, not per Agent: two wait4(-1) loops in one
// process would steal each other's children.
var (
	reaperOnce sync.Once
	theReaper  *Reaper
)

// StartReaper returns the process's one Reaper, starting its loop (and
// making the process a child subreaper when it is not PID 1) the first
// time.
func StartReaper(log *slog.Logger) *Reaper {
	reaperOnce.Do(func() {
		theReaper = &Reaper{
			log:     log,
			waiters: make(map[int]chan<- syscall.WaitStatus),
			sigc:    make(chan os.Signal, 1),
		}
		theReaper.run()
	})
	return theReaper
}

func (r *Reaper) run() {
	// Orphans must come to the agent even when it is not PID 1.
	if os.Getpid() != 1 {
		if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
			r.log.Warn("cannot become a child subreaper; orphans will not be reaped", "err", err)
		}
	}
	signal.Notify(r.sigc, syscall.SIGCHLD)
	go func() {
		// SIGCHLDs coalesce; a slow tick covers any lost to the channel's
		// one-slot buffer.
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			r.reapAll()
			select {
			case <-r.sigc:
			case <-tick.C:
			}
		}
	}()
}

func (r *Reaper) reapAll() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil || pid <= 0 {
			return
		}
		r.dispatch(pid, ws)
	}
}

func (r *Reaper) dispatch(pid int, ws syscall.WaitStatus) {
	r.startMu.Lock()
	r.mu.Lock()
	ch, ok := r.waiters[pid]
	delete(r.waiters, pid)
	r.mu.Unlock()
	r.startMu.Unlock()
	if ok {
		ch <- ws // buffered, never blocks
	}
}

// Start forks a child through fork (which must not wait on it) and
// registers for its exit status atomically with respect to the reaper.
func (r *Reaper) Start(fork func() (int, error)) (int, <-chan syscall.WaitStatus, error) {
	r.startMu.RLock()
	defer r.startMu.RUnlock()
	pid, err := fork()
	if err != nil {
		return 0, nil, err
	}
	resetOOMScore(pid)
	ch := make(chan syscall.WaitStatus, 1)
	r.mu.Lock()
	r.waiters[pid] = ch
	r.mu.Unlock()
	return pid, ch, nil
}

// ownOOMScoreAdj is the agent's own oom_score_adj, read once. Children
// inherit it and must not keep it.
var ownOOMScoreAdj = sync.OnceValue(func() int {
	b, err := os.ReadFile("/proc/self/oom_score_adj")
	if err != nil {
		return 0
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0
	}
	return n
})

// childOOMBoost is how far above the agent a child's score is put when
// the agent runs at the ordinary score (a host that cannot lower it).
const childOOMBoost = 500

// ChildOOMScore is the score the agent gives what it starts: 0 when the
// runtime lowered the agent's own, else above the agent's (at most 1000).
// Raising a score needs no privilege.
func ChildOOMScore(own int) int {
	if own < 0 {
		return 0
	}
	return min(own+childOOMBoost, 1000)
}

// resetOOMScore gives a child the agent just started the score above the
// agent's, so a sandbox out of memory loses its processes before its
// agent. It runs right after the fork returns, when the child has exec'd
// but (a freshly loaded program needs far longer to reach its first fork)
// has not yet started anything of its own. A child may lower its score
// again, down to the floor it inherited: then the OOM killer chooses
// between it and the agent by memory used, and a death of the agent is
// still noticed by the daemon and reported.
func resetOOMScore(pid int) {
	f, err := os.OpenFile("/proc/"+strconv.Itoa(pid)+"/oom_score_adj", os.O_WRONLY, 0)
	if err != nil {
		return // the child is gone already
	}
	_, _ = f.WriteString(strconv.Itoa(ChildOOMScore(ownOOMScoreAdj())))
	_ = f.Close()
}

// StartProcess starts path as os.StartProcess does and returns its pid,
// letting go of the os.Process at once: the reaper owns waiting for it,
// so the child is never waited on through os.Process. It is the fork a
// Reaper's Start runs.
func StartProcess(path string, argv []string, attr *os.ProcAttr) (int, error) {
	op, err := os.StartProcess(path, argv, attr)
	if err != nil {
		return 0, err
	}
	pid := op.Pid
	_ = op.Release()
	return pid, nil
}

// SignalFromStatus turns a process end status as envd words it ("signal:
// killed") back into the signal's name ("SIGKILL"); "" for any other
// status.
func SignalFromStatus(status string) string {
	name, ok := strings.CutPrefix(status, "signal: ")
	if !ok {
		return ""
	}
	for s := syscall.Signal(1); s < 65; s++ {
		if s.String() == name {
			if n := unix.SignalName(s); n != "" {
				return n
			}
		}
	}
	return strings.ToUpper(name)
}
