package cli

import (
	"fmt"
	"io"
	"io/fs"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/sdk/go/paddock"
)

// maxRunStdin bounds what paddock run --stdin sends: the request carries
// it whole.
const maxRunStdin = 4 << 20

func newWorkspaceCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "workspace",
		Aliases: []string{"ws"},
		Short:   "Manage workspaces: named filesystems the daemon keeps, with every change recorded (run commands in one with paddock run)",
		Args:    cobra.NoArgs,
	}
	var q quotaFlags
	var importName string
	create := &cobra.Command{
		Use:   "create NAME",
		Short: "Create an empty workspace",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return q.made(cmd, g, args[0], func(req api.CreateWorkspaceRequest) (*api.Workspace, error) {
				return g.client().CreateWorkspace(cmd.Context(), req)
			})
		},
	}
	q.flags(create)
	ls := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List workspaces",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			list, err := g.client().ListWorkspaces(cmd.Context())
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd.OutOrStdout(), api.WorkspaceList{Workspaces: nonNil(list)})
			}
			now := time.Now()
			t := newTable(cmd.OutOrStdout(), "ID", "NAME", "VERSION", "FILES", "SIZE", "UPDATED")
			for _, w := range list {
				t.row(w.ID, w.Name, strconv.FormatInt(w.Version, 10), strconv.FormatInt(w.Files, 10), humanBytes(w.Bytes), ago(w.UpdatedAt, now))
			}
			return t.flush()
		},
	}
	inspect := &cobra.Command{
		Use:   "inspect WORKSPACE",
		Short: "Show a workspace as JSON",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ws, err := g.client().GetWorkspace(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return printJSON(cmd.OutOrStdout(), ws)
		},
	}
	rm := &cobra.Command{
		Use:     "rm WORKSPACE...",
		Aliases: []string{"delete"},
		Short:   "Delete workspaces with their history",
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			for _, ref := range args {
				if err := g.client().DeleteWorkspace(cmd.Context(), ref); err != nil {
					return err
				}
				fmt.Fprintln(cmd.OutOrStdout(), ref)
			}
			return nil
		},
	}
	var limit int
	log := &cobra.Command{
		Use:     "log WORKSPACE",
		Aliases: []string{"history"},
		Short:   "List a workspace's versions, newest first, with the command that made each",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			list, err := g.client().WorkspaceHistory(cmd.Context(), args[0], limit)
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd.OutOrStdout(), api.WorkspaceHistory{Versions: nonNil(list)})
			}
			now := time.Now()
			t := newTable(cmd.OutOrStdout(), "VERSION", "WHEN", "EXECUTOR", "EXIT", "+/~/-", "COMMAND")
			for _, v := range list {
				t.row(strconv.FormatInt(v.Version, 10), ago(v.CreatedAt, now), v.Executor, strconv.Itoa(v.ExitCode),
					fmt.Sprintf("%d/%d/%d", v.Added, v.Modified, v.Removed), oneLine(v.Command, 60))
			}
			return t.flush()
		},
	}
	log.Flags().IntVar(&limit, "limit", 0, "show at most this many versions (default 1000)")
	diff := &cobra.Command{
		Use:   "diff WORKSPACE [FROM [TO]]",
		Short: "List the paths that differ between two versions (default: what the last version changed)",
		Args:  cobra.RangeArgs(1, 3),
		RunE: func(cmd *cobra.Command, args []string) error {
			from, to := int64(-1), int64(-1)
			for i, p := range []*int64{&from, &to} {
				if len(args) > i+1 {
					v, err := strconv.ParseInt(args[i+1], 10, 64)
					if err != nil || v < 0 {
						return fmt.Errorf("version %q: give a version number, 0 or more", args[i+1])
					}
					*p = v
				}
			}
			d, err := g.client().WorkspaceDiff(cmd.Context(), args[0], from, to)
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd.OutOrStdout(), d)
			}
			printChanges(cmd.OutOrStdout(), d.Changes)
			return nil
		},
	}
	rollback := &cobra.Command{
		Use:   "rollback WORKSPACE VERSION",
		Short: "Make a new version whose files are those of an earlier version (history is kept)",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			v, err := strconv.ParseInt(args[1], 10, 64)
			if err != nil || v < 0 {
				return fmt.Errorf("version %q: give a version number, 0 or more", args[1])
			}
			res, err := g.client().RollbackWorkspace(cmd.Context(), args[0], v)
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd.OutOrStdout(), res)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "version %d\n", res.Version)
			return nil
		},
	}
	var out string
	export := &cobra.Command{
		Use:   "export WORKSPACE -o FILE",
		Short: "Write a workspace with its whole history to one file ('-' for stdout)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return writeOutput(cmd, out, func(w io.Writer) error {
				return g.client().ExportWorkspace(cmd.Context(), args[0], w)
			})
		},
	}
	export.Flags().StringVarP(&out, "output", "o", "", "file to write ('-' for stdout)")
	_ = export.MarkFlagRequired("output")
	imp := &cobra.Command{
		Use:   "import FILE --name NAME",
		Short: "Make a workspace from an exported file ('-' for stdin), with its history",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			in, closeIn, err := openInput(cmd, args[0])
			if err != nil {
				return err
			}
			defer closeIn()
			return q.made(cmd, g, importName, func(req api.CreateWorkspaceRequest) (*api.Workspace, error) {
				return g.client().ImportWorkspace(cmd.Context(), req, in)
			})
		},
	}
	imp.Flags().StringVar(&importName, "name", "", "name of the new workspace")
	_ = imp.MarkFlagRequired("name")
	q.flags(imp)
	cmd.AddCommand(create, ls, inspect, rm, log, diff, rollback, export, imp, newWorkspaceGetCmd(g), newWorkspacePutCmd(g), newWorkspaceLedgerCmd(g), newWorkspacePruneCmd(g))
	return cmd
}

func newWorkspacePruneCmd(g *globals) *cobra.Command {
	var before, keep int64
	prune := &cobra.Command{
		Use:   "prune WORKSPACE (--before VERSION | --keep N)",
		Short: "Drop a workspace's oldest versions, freeing the contents only they held",
		Long: `prune drops the versions before --before VERSION, or all but the last --keep N
versions. They can no longer be diffed, read or rolled back to; the current
version is always kept. The history is also pruned by itself, oldest first,
once its contents pass four times the workspace's quota.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if (before > 0) == (keep > 0) {
				return fmt.Errorf("give one of --before VERSION and --keep N")
			}
			c := g.client()
			if keep > 0 {
				ws, err := c.GetWorkspace(cmd.Context(), args[0])
				if err != nil {
					return err
				}
				before = max(ws.Version-keep+1, 0)
			}
			res, err := c.PruneWorkspace(cmd.Context(), args[0], before)
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd.OutOrStdout(), res)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "dropped %d versions, freed %d bytes; oldest version now %d\n", res.Versions, res.FreedBytes, res.Oldest)
			return nil
		},
	}
	prune.Flags().Int64Var(&before, "before", 0, "drop the versions before this one")
	prune.Flags().Int64Var(&keep, "keep", 0, "keep only the last N versions")
	return prune
}

func newWorkspaceLedgerCmd(g *globals) *cobra.Command {
	var after int64
	ledger := &cobra.Command{
		Use:   "ledger WORKSPACE [--after SEQ]",
		Short: "List every command run in a workspace, oldest first, whether it changed files or not",
		Long: `ledger lists a workspace's ledger: every command run in it (with its executor,
exit code, duration, the version it saw and the one its changes made), every
file written with "workspace put", and rollbacks. A command stopped by a bound,
or whose changes were refused (a concurrent change, the quota), says so. The
last 10,000 entries of a workspace are kept.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			all := api.WorkspaceLedger{Entries: []api.WorkspaceCommand{}}
			for {
				page, err := g.client().WorkspaceLedger(cmd.Context(), args[0], after, 0)
				if err != nil {
					return err
				}
				all.Entries = append(all.Entries, page.Entries...)
				if page.Next == 0 {
					break
				}
				after = page.Next
			}
			if g.json {
				return printJSON(cmd.OutOrStdout(), all)
			}
			t := newTable(cmd.OutOrStdout(), "SEQ", "TIME", "EXECUTOR", "EXIT", "MS", "VERSION", "COMMAND")
			for _, e := range all.Entries {
				version := strconv.FormatInt(e.Version, 10)
				switch {
				case e.Stopped != "":
					version = "stopped: " + e.Stopped
				case e.Error != "":
					version = "not kept"
				case e.Version == e.BaseVersion:
					version = "-"
				}
				t.row(strconv.FormatInt(e.Seq, 10), e.At.Local().Format(time.DateTime), e.Executor, strconv.Itoa(e.ExitCode),
					strconv.FormatFloat(e.DurationMs, 'f', 1, 64), version, oneLine(e.Command, 60))
			}
			return t.flush()
		},
	}
	ledger.Flags().Int64Var(&after, "after", 0, "list the entries after this seq")
	return ledger
}

func newWorkspaceGetCmd(g *globals) *cobra.Command {
	var out string
	var version int64
	get := &cobra.Command{
		Use:   "get WORKSPACE PATH [-o FILE]",
		Short: "Write a file of a workspace to stdout or a local file",
		Long: `get writes the file at PATH (relative to the workspace's root, like src/app.py)
of the current version, or of --version N, to stdout or to -o FILE.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				out = "-"
			}
			return writeOutput(cmd, out, func(w io.Writer) error {
				_, err := g.client().ReadWorkspaceFile(cmd.Context(), args[0], args[1], version, w)
				return err
			})
		},
	}
	get.Flags().StringVarP(&out, "output", "o", "", "file to write (default stdout)")
	get.Flags().Int64Var(&version, "version", -1, "version to read (default the current one)")
	return get
}

func newWorkspacePutCmd(g *globals) *cobra.Command {
	var mode string
	var base int64
	put := &cobra.Command{
		Use:   "put WORKSPACE PATH [FILE|-]",
		Short: "Write a local file (or stdin) as a file of a workspace, as one new version",
		Long: `put writes FILE (stdin when it is '-' or absent) as the file at PATH, relative to
the workspace's root, making missing parent directories. It lands as one new
version, shown in the workspace's log as "write PATH".

  --mode 0755   sets the file's permission bits (default: kept, 0644 for a new file)
  --base N      writes only if no version after N changed the file (else a conflict)`,
		Args: cobra.RangeArgs(2, 3),
		RunE: func(cmd *cobra.Command, args []string) error {
			var opts paddock.WriteWorkspaceFileOptions
			if mode != "" {
				m, err := strconv.ParseUint(mode, 8, 32)
				if err != nil || m > 0o777 || m == 0 {
					return fmt.Errorf("--mode %q: give octal permission bits such as 0644 or 0755", mode)
				}
				opts.Mode = fs.FileMode(m)
			}
			if base < 0 {
				return fmt.Errorf("--base %d: give a version number", base)
			}
			opts.Base = base
			src := "-"
			if len(args) == 3 {
				src = args[2]
			}
			in, closeIn, err := openInput(cmd, src)
			if err != nil {
				return err
			}
			defer closeIn()
			res, err := g.client().WriteWorkspaceFile(cmd.Context(), args[0], args[1], in, opts)
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd.OutOrStdout(), res)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "version %d\n", res.Version)
			printChanges(cmd.OutOrStdout(), res.Changes)
			return nil
		},
	}
	put.Flags().StringVar(&mode, "mode", "", "permission bits in octal, like 0644")
	put.Flags().Int64Var(&base, "base", 0, "the version the file was read at: refuse if a later one changed it")
	return put
}

// quotaFlags are a new workspace's quota flags.
type quotaFlags struct {
	maxBytes string
	maxFiles int64
}

func (q *quotaFlags) flags(cmd *cobra.Command) {
	cmd.Flags().StringVar(&q.maxBytes, "max-bytes", "", "quota of file contents, like 512M or 2G (default 1G)")
	cmd.Flags().Int64Var(&q.maxFiles, "max-files", 0, "quota of files and directories (default 100000)")
}

// made makes a workspace named name with the quota through create, and
// prints it.
func (q *quotaFlags) made(cmd *cobra.Command, g *globals, name string, create func(api.CreateWorkspaceRequest) (*api.Workspace, error)) error {
	req := api.CreateWorkspaceRequest{Name: name, MaxFiles: q.maxFiles}
	if q.maxBytes != "" {
		mib, err := parseSizeMiB("max-bytes", q.maxBytes)
		if err != nil {
			return err
		}
		req.MaxBytes = mib << 20
	}
	ws, err := create(req)
	if err != nil {
		return err
	}
	if g.json {
		return printJSON(cmd.OutOrStdout(), ws)
	}
	fmt.Fprintln(cmd.OutOrStdout(), ws.ID)
	return nil
}

// printChanges writes one line a path: +, ~ or - and the path (a
// directory with a trailing slash).
func printChanges(w io.Writer, changes []api.WorkspaceChange) {
	mark := map[string]string{api.ChangeAdded: "+", api.ChangeModified: "~", api.ChangeRemoved: "-"}
	for _, c := range changes {
		p := c.Path
		if c.Dir {
			p += "/"
		}
		fmt.Fprintf(w, "%s %s\n", mark[c.Kind], p)
	}
}

func newRunCmd(g *globals) *cobra.Command {
	var req api.WorkspaceRunRequest
	var env []string
	var timeout time.Duration
	var stdin, script bool
	cmd := &cobra.Command{
		Use:   "run WORKSPACE [flags] -- COMMAND [ARG...]",
		Short: "Run a command in a workspace; what it changes lands as one new version",
		Long: `Run a command in a workspace. With one argument and --script, or with
--script, the argument is shell text (pipes, redirections, loops); otherwise
the arguments are one command's words. The shell executor interprets the
command inside the daemon, with the common tools (cat, ls, grep, sed, find,
...) built in: no container starts. The container executor runs it in a
sandbox holding a copy of the workspace. auto (the default) picks shell when
every command is built in, else container. The js executor runs
JavaScript (Node's fs and path over the workspace, in a child process of
the daemon): with --script the argument is the program's source, else the
first word names a program file of the workspace and the rest are its
arguments (process.argv). The command's stdout and stderr are printed and
its exit code is paddock's.`,
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if script {
				if len(args) != 2 {
					return fmt.Errorf("--script takes the shell text as one argument (quote it)")
				}
				req.Script = args[1]
			} else {
				req.Command = args[1:]
			}
			var err error
			if req.Env, err = parseEnv("env", env); err != nil {
				return err
			}
			req.TimeoutMs = timeout.Milliseconds()
			if stdin {
				b, err := io.ReadAll(io.LimitReader(cmd.InOrStdin(), maxRunStdin+1))
				if err != nil {
					return err
				}
				if len(b) > maxRunStdin {
					return fmt.Errorf("stdin is over %d bytes: write large inputs to the workspace in pieces", maxRunStdin)
				}
				req.Stdin = string(b)
			}
			res, err := g.client().RunInWorkspace(cmd.Context(), args[0], req)
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd.OutOrStdout(), res)
			}
			io.WriteString(cmd.OutOrStdout(), res.Stdout)
			io.WriteString(cmd.ErrOrStderr(), res.Stderr)
			if res.Stopped != "" {
				fmt.Fprintf(cmd.ErrOrStderr(), "paddock: the %s executor stopped the command (%s); nothing it changed was kept\n", res.Executor, res.Stopped)
			}
			if res.ExitCode != 0 {
				return &exitError{code: res.ExitCode}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&req.Executor, "executor", api.ExecutorAuto, "where to run it: shell (in the daemon, no container), js (JavaScript in the daemon's child process), container (a sandbox holding a copy), or auto (the cheapest of shell and container that can)")
	f.BoolVar(&script, "script", false, "the one argument after -- is shell text (JavaScript source with --executor js)")
	f.StringArrayVarP(&env, "env", "e", nil, "set an environment variable KEY=VALUE (repeatable)")
	f.StringVarP(&req.Cwd, "workdir", "w", "", "directory of the workspace to run in, relative to its root")
	f.DurationVar(&timeout, "timeout", 0, "stop the command after this long (default 30s, at most 10m)")
	f.BoolVarP(&stdin, "interactive", "i", false, "send this process's stdin to the command (up to 4 MiB)")
	return cmd
}

// oneLine shows s on one line of at most n runes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
