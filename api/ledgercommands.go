package api

// Ledger kinds of commands run other than by a plain exec. A session
// command is an "exec" entry with Data["session"]; these are the rest.
// Like every kind the daemon records, callers may not add them.
const (
	// LedgerProcessStart: a background process was started (through
	// /v1/sandboxes/{id}/processes, or envd's process.Process/Start
	// through the E2B data plane, with Data["via"] "e2b").
	LedgerProcessStart = "process_start"
	// LedgerProcessEnd: a background process ended, with its exit code,
	// signal and how long it ran, or a note saying its end is unknown.
	LedgerProcessEnd = "process_end"
	// LedgerCodeRun: code ran in a code context: language, code size, a
	// prefix of the code, the run's status and duration.
	LedgerCodeRun = "code_run"
	// LedgerTerminalOpen: a terminal was opened with a command.
	LedgerTerminalOpen = "terminal_open"
	// LedgerTerminalEnd: a terminal's process ended (exit code, signal,
	// duration), or its stream to the sandbox broke.
	LedgerTerminalEnd = "terminal_end"
	// LedgerKillAll: every process of the sandbox but the agent was
	// killed (POST .../procs/kill-all), with how many and what remained.
	LedgerKillAll = "kill_all"
)
