// Package osproc is the operating system's side of a sandbox's processes,
// beneath the agent's services: the one loop that reaps every child of the
// agent (PID 1 of its sandbox) and the out-of-memory score its children
// get (reaper.go), pseudo-terminals whose master works with deadlines
// (ptymaster.go), bounded and distrustful reads of /proc (procfs.go), the
// bounded ring an output stream is kept in (ring.go), and the search of a
// process's PATH (path.go). It knows nothing
// of the agent's services or of the daemon.
package osproc
