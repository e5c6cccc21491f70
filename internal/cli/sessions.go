package cli

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/sdk/go/paddock"
)

func newSessionCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "session",
		Short: "Manage shell sessions (persistent cwd, variables and functions); run in one with exec --session",
		Args:  cobra.NoArgs,
	}
	var name, cwd, user string
	var env []string
	create := &cobra.Command{
		Use:   "create ID --name NAME [--cwd DIR] [--env K=V]... [-u USER]",
		Short: "Start a shell session in a sandbox",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if name == "" {
				return fmt.Errorf("session create needs --name NAME")
			}
			envMap, err := parseEnv("env", env)
			if err != nil {
				return err
			}
			s, err := g.client().CreateSession(cmd.Context(), args[0], api.CreateSessionRequest{Name: name, Cwd: cwd, Env: envMap, User: user})
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd.OutOrStdout(), s)
			}
			fmt.Fprintln(cmd.OutOrStdout(), s.Name)
			return nil
		},
	}
	create.Flags().StringVar(&name, "name", "", "session name (1-64 letters, digits, '.', '_', '-')")
	create.Flags().StringVar(&cwd, "cwd", "", "starting directory (default the user's home)")
	create.Flags().StringArrayVarP(&env, "env", "e", nil, "variable K=V exported in the session (repeatable)")
	create.Flags().StringVarP(&user, "user", "u", "", `run the session as this user: a name or uid[:gid] (default: the image's User, else "user")`)
	ls := &cobra.Command{
		Use:     "ls ID",
		Aliases: []string{"list"},
		Short:   "List a sandbox's sessions",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			list, err := g.client().ListSessions(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd.OutOrStdout(), api.SessionList{Sessions: nonNil(list)})
			}
			now := time.Now()
			t := newTable(cmd.OutOrStdout(), "NAME", "USER", "CWD", "STATE", "COMMANDS", "CREATED")
			for _, s := range list {
				state := "idle"
				switch {
				case s.Busy:
					state = fmt.Sprintf("busy (%d queued)", s.Queued)
				case s.ShellEnded && s.ShellSignal != "":
					state = "shell ended (" + s.ShellSignal + ")"
				case s.ShellEnded:
					state = "shell ended"
				}
				t.row(s.Name, s.User, s.Cwd, state, strconv.FormatUint(s.Commands, 10), ago(s.CreatedAt, now))
			}
			return t.flush()
		},
	}
	rm := removeEachCmd(g, "rm ID NAME...", "End sessions: their shells and jobs; background processes are not touched", (*paddock.Client).DeleteSession)
	cmd.AddCommand(create, ls, rm)
	return cmd
}

func newProcCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "proc",
		Aliases: []string{"process"},
		Short:   "Run background processes: start, list, logs, kill and wait for readiness; ps and killall for every process of a sandbox",
		Args:    cobra.NoArgs,
	}
	cmd.AddCommand(newProcStartCmd(g), newProcLsCmd(g), newProcInspectCmd(g), newProcLogsCmd(g),
		newProcKillCmd(g), newProcWaitCmd(g), newProcWaitPortCmd(g), newProcWaitLogCmd(g),
		newProcPsCmd(g), newProcKillallCmd(g))
	return cmd
}

func newProcStartCmd(g *globals) *cobra.Command {
	var id, workdir, user string
	var env []string
	var logBuffer string
	cmd := &cobra.Command{
		Use:   "start ID [--id NAME] [-e K=V]... [-w DIR] [-u USER] [--log-buffer 1M] -- CMD...",
		Short: "Start a background process and print its id",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 2 {
				return fmt.Errorf("proc start needs a sandbox id and a command, as in: paddock proc start ID -- CMD ARGS")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			argv, err := flagsBeforeDash(cmd, args[1:])
			if err != nil {
				return err
			}
			if len(argv) == 0 {
				return fmt.Errorf("proc start: no command given")
			}
			envMap, err := parseEnv("env", env)
			if err != nil {
				return err
			}
			req := api.StartProcessRequest{ID: id, Cmd: argv, Env: envMap, Cwd: workdir, User: user}
			if logBuffer != "" {
				mib, err := parseSizeBytes("log-buffer", logBuffer)
				if err != nil {
					return err
				}
				req.LogBufferBytes = mib
			}
			p, err := g.client().StartProcess(cmd.Context(), args[0], req)
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd.OutOrStdout(), p)
			}
			fmt.Fprintln(cmd.OutOrStdout(), p.ID)
			return nil
		},
	}
	cmd.Flags().SetInterspersed(false)
	fs := cmd.Flags()
	fs.StringVar(&id, "id", "", "process id (default generated); an ended process's id may be reused")
	fs.StringArrayVarP(&env, "env", "e", nil, "environment variable K=V (repeatable)")
	fs.StringVarP(&workdir, "workdir", "w", "", "working directory inside the sandbox")
	fs.StringVarP(&user, "user", "u", "", `run as this user: a name or uid[:gid] (default: the image's User, else "user")`)
	fs.StringVar(&logBuffer, "log-buffer", "", "output kept per stream, e.g. 256K or 4M (default 1M, 4K to 16M)")
	return cmd
}

// flagsBeforeDash parses flags given between the sandbox id and "--" (as
// in "proc start dev --id web -- CMD") and returns the command after "--".
// Without "--", everything after the id is the command.
func flagsBeforeDash(cmd *cobra.Command, argv []string) ([]string, error) {
	if i := slices.Index(argv, "--"); i > 0 && strings.HasPrefix(argv[0], "-") {
		if err := cmd.Flags().Parse(argv[:i]); err != nil {
			return nil, err
		}
		if rest := cmd.Flags().Args(); len(rest) > 0 {
			return nil, fmt.Errorf("%q before \"--\" is not a flag; put the command after \"--\"", rest[0])
		}
		argv = argv[i:]
	}
	if len(argv) > 0 && argv[0] == "--" {
		argv = argv[1:]
	}
	return argv, nil
}

// parseSizeBytes reads 4096, 64K, 4M.
func parseSizeBytes(flag, s string) (int64, error) {
	mult := int64(1)
	num := strings.ToUpper(strings.TrimSpace(s))
	switch {
	case strings.HasSuffix(num, "K"):
		mult, num = 1<<10, strings.TrimSuffix(num, "K")
	case strings.HasSuffix(num, "M"):
		mult, num = 1<<20, strings.TrimSuffix(num, "M")
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n <= 0 || n > 1<<40/mult {
		return 0, fmt.Errorf("--%s %q: want a size such as 65536, 64K or 4M", flag, s)
	}
	return n * mult, nil
}

func newProcLsCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "ls ID",
		Aliases: []string{"list"},
		Short:   "List background processes, running and ended",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			list, err := g.client().ListProcesses(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd.OutOrStdout(), api.ProcessList{Processes: nonNil(list)})
			}
			now := time.Now()
			t := newTable(cmd.OutOrStdout(), "ID", "PID", "STATUS", "STARTED", "OUTPUT", "COMMAND")
			for _, p := range list {
				t.row(p.ID, strconv.FormatUint(uint64(p.Pid), 10), statusText(&p), ago(p.StartedAt, now),
					humanBytes(p.Stdout.End+p.Stderr.End), strings.Join(p.Cmd, " "))
			}
			return t.flush()
		},
	}
}

func statusText(p *api.Process) string {
	switch {
	case p.ExitCode != nil:
		return fmt.Sprintf("%s (%d)", p.Status, *p.ExitCode)
	case p.Signal != "":
		return fmt.Sprintf("%s (%s)", p.Status, p.Signal)
	}
	return p.Status
}

func newProcInspectCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "inspect ID PROC",
		Short: "Describe a background process (PROC is its id or pid) as JSON",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := g.client().GetProcess(cmd.Context(), args[0], args[1])
			if err != nil {
				return err
			}
			return printJSON(cmd.OutOrStdout(), p)
		},
	}
}

func newProcLogsCmd(g *globals) *cobra.Command {
	var follow, onlyStdout, onlyStderr bool
	var offset int64
	cmd := &cobra.Command{
		Use:   "logs ID PROC [--follow] [--stdout|--stderr] [--offset N]",
		Short: "Print a background process's kept output; --follow streams it until the process ends",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			o := paddock.LogsOptions{Follow: follow, Offset: offset, Stdout: cmd.OutOrStdout(), Stderr: cmd.ErrOrStderr()}
			switch {
			case onlyStdout && onlyStderr:
				return fmt.Errorf("--stdout and --stderr exclude each other (give neither for both)")
			case onlyStdout:
				o.Stream = api.LogStdout
			case onlyStderr:
				o.Stream, o.Stderr = api.LogStderr, cmd.OutOrStdout()
			}
			res, err := g.client().ProcessLogs(cmd.Context(), args[0], args[1], o)
			if err != nil {
				return err
			}
			if res.Dropped > 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "paddock: %d older bytes were no longer kept\n", res.Dropped)
			}
			if res.Process != nil {
				fmt.Fprintf(cmd.ErrOrStderr(), "paddock: process %s %s\n", res.Process.ID, statusText(res.Process))
			}
			return nil
		},
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing new output until the process ends")
	cmd.Flags().BoolVar(&onlyStdout, "stdout", false, "only stdout")
	cmd.Flags().BoolVar(&onlyStderr, "stderr", false, "only stderr (printed to stdout)")
	cmd.Flags().Int64Var(&offset, "offset", 0, "start at this byte offset of each stream")
	return cmd
}

func newProcKillCmd(g *globals) *cobra.Command {
	var signal string
	var grace time.Duration
	cmd := &cobra.Command{
		Use:   "kill ID PROC [--signal SIGTERM] [--grace 10s]",
		Short: "Signal a background process's group, then SIGKILL it after the grace period",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			req := api.KillProcessRequest{Signal: signal}
			if cmd.Flags().Changed("grace") {
				req.Grace = grace.String()
			}
			p, err := g.client().KillProcess(cmd.Context(), args[0], args[1], req)
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd.OutOrStdout(), p)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s %s\n", p.ID, statusText(p))
			return nil
		},
	}
	cmd.Flags().StringVarP(&signal, "signal", "s", "", "signal name or number (default SIGTERM)")
	cmd.Flags().DurationVar(&grace, "grace", 10*time.Second, "time before SIGKILL; 0 sends the signal only")
	return cmd
}

// waitFlags are shared by the proc wait commands.
type waitFlags struct{ timeout time.Duration }

func (f *waitFlags) register(cmd *cobra.Command) {
	cmd.Flags().DurationVar(&f.timeout, "timeout", 30*time.Second, "give up after this long (at most 1h)")
}

func (g *globals) wait(cmd *cobra.Command, id, proc string, req api.WaitProcessRequest) error {
	res, err := g.client().WaitProcess(cmd.Context(), id, proc, req)
	if err != nil {
		return err
	}
	if g.json {
		return printJSON(cmd.OutOrStdout(), res)
	}
	switch {
	case req.For == api.WaitLog:
		fmt.Fprintln(cmd.OutOrStdout(), res.Matched)
	case req.For == api.WaitExit:
		fmt.Fprintf(cmd.OutOrStdout(), "%s %s\n", res.Process.ID, statusText(&res.Process))
		if res.Process.ExitCode != nil && *res.Process.ExitCode != 0 {
			return &exitError{code: *res.Process.ExitCode}
		}
		if res.Process.Signal != "" {
			return &exitError{code: 128 + signalOrZero(res.Process.Signal)}
		}
	default:
		fmt.Fprintf(cmd.OutOrStdout(), "%s ready\n", res.Process.ID)
	}
	return nil
}

func signalOrZero(name string) int {
	n, _ := signalNumber(name)
	return n
}

func newProcWaitCmd(g *globals) *cobra.Command {
	var f waitFlags
	cmd := &cobra.Command{
		Use:   "wait ID PROC [--timeout D]",
		Short: "Wait for a background process to end; exit with its exit code",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.wait(cmd, args[0], args[1], api.WaitProcessRequest{For: api.WaitExit, Timeout: f.timeout.String()})
		},
	}
	f.register(cmd)
	return cmd
}

func newProcWaitPortCmd(g *globals) *cobra.Command {
	var f waitFlags
	var path string
	var status int
	cmd := &cobra.Command{
		Use:   "wait-port ID PROC PORT [--http PATH [--status 200]] [--timeout D]",
		Short: "Wait until PORT accepts connections (or answers HTTP) inside the sandbox; fails at once if the process dies",
		Args:  cobra.ExactArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			port, err := strconv.Atoi(args[2])
			if err != nil || port < 1 || port > 65535 {
				return fmt.Errorf("port %q: want 1 to 65535", args[2])
			}
			req := api.WaitProcessRequest{For: api.WaitPort, Port: port, Timeout: f.timeout.String()}
			if path != "" || cmd.Flags().Changed("status") {
				req.For, req.Path, req.Status = api.WaitHTTP, path, status
			}
			return g.wait(cmd, args[0], args[1], req)
		},
	}
	f.register(cmd)
	cmd.Flags().StringVar(&path, "http", "", "wait for GET PATH to answer --status instead of a bare TCP connect")
	cmd.Flags().IntVar(&status, "status", 200, "the HTTP status to wait for")
	return cmd
}

func newProcWaitLogCmd(g *globals) *cobra.Command {
	var f waitFlags
	var stream string
	cmd := &cobra.Command{
		Use:   "wait-log ID PROC REGEXP [--stream stdout|stderr] [--timeout D]",
		Short: "Wait for a line of output matching REGEXP (RE2) and print it; fails at once if the process dies",
		Args:  cobra.ExactArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.wait(cmd, args[0], args[1], api.WaitProcessRequest{For: api.WaitLog, Pattern: args[2], Stream: stream, Timeout: f.timeout.String()})
		},
	}
	f.register(cmd)
	cmd.Flags().StringVar(&stream, "stream", "", "stdout or stderr (default both)")
	return cmd
}
