package api

import "time"

// Bounds of GET /v1/sandboxes/{id}/procs and of a kill-all.
const (
	// MaxProcs is how many processes a listing holds; a sandbox with more
	// (its pids limit allows up to 32768) lists the first by pid, with
	// Truncated set.
	MaxProcs = 8192
	// MaxProcCmdBytes bounds the command line kept of one process.
	MaxProcCmdBytes = 1024
	// MaxKillAllGrace bounds KillAllRequest.Grace.
	MaxKillAllGrace = 30 * time.Second
)

// Proc is one process of a sandbox as the sandbox's own /proc shows it:
// every process, not only those Paddock started.
type Proc struct {
	Pid  int `json:"pid"`
	PPid int `json:"ppid"`
	// UID is the real user id; User its name in the sandbox's /etc/passwd
	// ("" when it has none).
	UID  uint32 `json:"uid"`
	User string `json:"user,omitempty"`
	// State is the one-letter state of /proc/PID/stat: R running, S
	// sleeping, D uninterruptible, Z zombie, T stopped, ...
	State string `json:"state"`
	// Comm is the kernel's name of the process (at most 15 bytes; the
	// process chooses it, so it is only a hint).
	Comm string `json:"comm"`
	// Cmd is the argument vector, empty for a zombie; CmdTruncated says
	// it was cut at MaxProcCmdBytes.
	Cmd          []string  `json:"cmd,omitempty"`
	CmdTruncated bool      `json:"cmd_truncated,omitempty"`
	StartedAt    time.Time `json:"started_at"`
	// RSSBytes is the resident memory.
	RSSBytes int64 `json:"rss_bytes"`
	Threads  int   `json:"threads"`
	// Agent marks Paddock's agent, the sandbox's PID 1, which kill-all
	// never ends.
	Agent bool `json:"agent,omitempty"`
}

// ProcList is the body of GET /v1/sandboxes/{id}/procs, ordered by pid.
type ProcList struct {
	Procs []Proc `json:"procs"`
	// Truncated is true when the sandbox had more than MaxProcs processes.
	Truncated bool `json:"truncated,omitempty"`
}

// KillAllRequest is the body of POST /v1/sandboxes/{id}/procs/kill-all.
type KillAllRequest struct {
	// Grace (Go duration) sends SIGTERM first and waits up to this long
	// for the processes to end before SIGKILL; default "0s", SIGKILL at
	// once; at most "30s".
	Grace string `json:"grace,omitempty"`
}

// KillAllResult is the answer of a kill-all.
type KillAllResult struct {
	// Killed counts the processes seen alive and then ended. Processes
	// born and killed between two looks (a fork bomb's) are not counted.
	Killed int `json:"killed"`
	// Rounds is how many times every process was sent SIGKILL.
	Rounds int `json:"rounds"`
	// Remaining lists what was still alive when the bounded kill gave up
	// (normally empty; a process stuck in the kernel, state D, dies when
	// it leaves it).
	Remaining []Proc `json:"remaining"`
}
