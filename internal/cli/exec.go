package cli

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/paddock-dev/paddock/sdk/go/paddock"
	"github.com/spf13/cobra"
)

// execFlags are the per-command options shared by exec and do.
type execFlags struct {
	stdin   bool
	env     []string
	workdir string
	user    string
	timeout time.Duration
	// allowHosts: exec only (network.go), registered by newExecCmd.
	allowHosts []string
}

func (f *execFlags) register(cmd *cobra.Command, withEnv, withTimeout bool) {
	fs := cmd.Flags()
	fs.BoolVarP(&f.stdin, "interactive", "i", false, "send this process's stdin to the command (read fully first, at most 16 MiB)")
	if withEnv {
		fs.StringArrayVarP(&f.env, "env", "e", nil, "environment variable K=V for this command (repeatable)")
	}
	fs.StringVarP(&f.workdir, "workdir", "w", "", "working directory inside the sandbox")
	fs.StringVarP(&f.user, "user", "u", "", `run as this user: a name or uid[:gid] (default: the image's User, else "user")`)
	if withTimeout {
		fs.DurationVar(&f.timeout, "timeout", 0, "kill the command after this long (exit code 124)")
	}
}

func (f *execFlags) options(cmd *cobra.Command, argv []string) (paddock.ExecOptions, error) {
	env, err := parseEnv("env", f.env)
	if err != nil {
		return paddock.ExecOptions{}, err
	}
	opts := paddock.ExecOptions{
		Cmd: argv, Env: env, Cwd: f.workdir, User: f.user, Timeout: f.timeout,
		Stdout: cmd.OutOrStdout(), Stderr: cmd.ErrOrStderr(), AllowHosts: f.allowHosts,
	}
	if f.stdin {
		opts.Stdin = cmd.InOrStdin()
	}
	return opts, nil
}

// exitWith turns a command's end into this process's exit.
func exitWith(res *paddock.ExecResult) error {
	if code := exitCode(res); code != 0 {
		return &exitError{code: code}
	}
	return nil
}

func newExecCmd(g *globals) *cobra.Command {
	var f execFlags
	var session string
	cmd := &cobra.Command{
		Use:   "exec ID [-i] [-e K=V]... [-w DIR] [-u USER] [--timeout D] [--session NAME] -- CMD...",
		Short: "Run a command in a sandbox, streaming its output; exit with its exit code",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 2 {
				return fmt.Errorf("exec needs a sandbox id and a command, as in: paddock exec ID -- CMD ARGS")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			argv := args[1:]
			// Flags may also sit between the id and "--", as in
			// "exec dev --session s1 -- pwd"; without a "--" everything
			// after the id stays the command's.
			if i := slices.Index(argv, "--"); i > 0 && strings.HasPrefix(argv[0], "-") {
				if err := cmd.Flags().Parse(argv[:i]); err != nil {
					return err
				}
				if rest := cmd.Flags().Args(); len(rest) > 0 {
					return fmt.Errorf("exec: %q before \"--\" is not a flag; put the command after \"--\"", rest[0])
				}
				argv = argv[i:]
			}
			// With flag parsing stopped at the id, a "--" after it is
			// still in args; it only separates, it is not the command.
			if len(argv) > 0 && argv[0] == "--" {
				argv = argv[1:]
			}
			opts, err := f.options(cmd, argv)
			if err != nil {
				return err
			}
			opts.Session = session // sessions.go
			res, err := g.client().Exec(cmd.Context(), args[0], opts)
			if err != nil {
				return err
			}
			return exitWith(res)
		},
	}
	// Everything after the sandbox id belongs to the command, so its own
	// flags (ls -l) are not read as paddock's.
	cmd.Flags().SetInterspersed(false)
	f.register(cmd, true, true)
	registerExecGrant(cmd, &f) // network.go
	cmd.Flags().StringVar(&session, "session", "", `run the command as shell text in this session ("default" always exists); cwd, exports and functions persist`)
	return cmd
}
