package cli

import (
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/sdk/go/paddock"
)

// maxCLICode mirrors the daemon's bound, so a too-large file fails before
// it is sent.
const maxCLICode = 1 << 20

func newRunCodeCmd(g *globals) *cobra.Command {
	var contextID, lang, file string
	var env []string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "run-code ID [--context C] [--lang python|javascript] [--timeout D] [-e K=V]... (CODE... | -f FILE)",
		Short: "Run code in a persistent interpreter context (created on first use); prints output and the last expression's value",
		Long: `Runs Python or JavaScript code in a code context of the sandbox. Variables,
imports and definitions persist from one run to the next. The context is
created on first use with --lang. Output streams as it is written; the value
of the last expression is printed at the end. An exception prints its
traceback on stderr and exits 1; a timeout interrupts the code and exits 124.
Code comes from the arguments, from -f FILE, or from stdin with -f -.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			code := strings.Join(args[1:], " ")
			switch {
			case file != "" && code != "":
				return fmt.Errorf("give the code as arguments or with -f, not both")
			case file != "":
				b, err := readCodeFile(cmd.InOrStdin(), file)
				if err != nil {
					return err
				}
				code = string(b)
			case code == "":
				return fmt.Errorf("no code given: pass it as an argument or with -f FILE (-f - reads stdin)")
			}
			envMap, err := parseEnv("env", env)
			if err != nil {
				return err
			}
			stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
			opts := paddock.RunCodeOptions{Create: true, Language: lang, Timeout: timeout, Env: envMap}
			if !g.json {
				opts.Stdout, opts.Stderr = stdout, stderr
				opts.OnResult = func(r paddock.CodeResult) {
					if !r.Main {
						fmt.Fprintln(stdout, describeResult(r))
					}
				}
			}
			res, err := g.client().RunCode(cmd.Context(), args[0], contextID, code, opts)
			if err != nil {
				return err
			}
			if g.json {
				if err := printJSON(stdout, res); err != nil {
					return err
				}
			} else {
				if m, ok := res.Main(); ok {
					fmt.Fprintln(stdout, m.Text())
				}
				if res.Error != nil {
					tb := strings.TrimRight(res.Error.Traceback, "\n")
					if tb == "" {
						tb = res.Error.Name + ": " + res.Error.Value
					}
					fmt.Fprintln(stderr, tb)
				}
				if res.Note != "" {
					fmt.Fprintln(stderr, "paddock: "+res.Note)
				}
			}
			switch {
			case res.TimedOut:
				return &exitError{code: 124}
			case res.Status != api.RunOK:
				return &exitError{code: 1}
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&contextID, "context", "c", "default", "code context id (created on first use)")
	cmd.Flags().StringVarP(&lang, "lang", "l", api.LanguagePython, "language of a context created by this run: python or javascript")
	cmd.Flags().StringVarP(&file, "file", "f", "", "read the code from FILE (- for stdin)")
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "interrupt the code after this long (default the daemon's exec timeout)")
	cmd.Flags().StringArrayVarP(&env, "env", "e", nil, "variable K=V for this run only (repeatable)")
	return cmd
}

func readCodeFile(stdin io.Reader, name string) ([]byte, error) {
	r := stdin
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	b, err := io.ReadAll(io.LimitReader(r, maxCLICode+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxCLICode {
		return nil, fmt.Errorf("the code is larger than %d bytes", maxCLICode)
	}
	return b, nil
}

// describeResult renders a displayed value (a figure, say) for a terminal,
// which cannot show images: its MIME types and text.
func describeResult(r paddock.CodeResult) string {
	types := make([]string, 0, len(r.Data))
	for k := range r.Data {
		types = append(types, k)
	}
	sort.Strings(types)
	return fmt.Sprintf("[result: %s] %s", strings.Join(types, ", "), r.Text())
}

func newContextCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "context",
		Aliases: []string{"contexts"},
		Short:   "Manage code contexts (persistent Python or JavaScript interpreters); run code with run-code",
		Args:    cobra.NoArgs,
	}
	var lang, cwd, user string
	var env []string
	create := &cobra.Command{
		Use:   "create ID CONTEXT [--lang python|javascript] [--cwd DIR] [--env K=V]... [-u USER]",
		Short: "Start a code context in a sandbox",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			envMap, err := parseEnv("env", env)
			if err != nil {
				return err
			}
			c, err := g.client().CreateContext(cmd.Context(), args[0], api.CreateContextRequest{ID: args[1], Language: lang, Cwd: cwd, Env: envMap, User: user})
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd.OutOrStdout(), c)
			}
			fmt.Fprintln(cmd.OutOrStdout(), c.ID)
			return nil
		},
	}
	create.Flags().StringVarP(&lang, "lang", "l", api.LanguagePython, "python or javascript")
	create.Flags().StringVar(&cwd, "cwd", "", "working directory (default the user's home)")
	create.Flags().StringArrayVarP(&env, "env", "e", nil, "variable K=V for the interpreter (repeatable)")
	create.Flags().StringVarP(&user, "user", "u", "", `run as this user: a name or uid[:gid] (default: the image's User, else "user")`)
	ls := &cobra.Command{
		Use:     "ls ID",
		Aliases: []string{"list"},
		Short:   "List a sandbox's code contexts",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			list, err := g.client().ListContexts(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd.OutOrStdout(), api.CodeContextList{Contexts: nonNil(list)})
			}
			now := time.Now()
			t := newTable(cmd.OutOrStdout(), "ID", "LANGUAGE", "STATE", "RUNS", "PID", "CREATED")
			for _, c := range list {
				state := c.State
				if c.Error != "" {
					state += " (" + c.Error + ")"
				}
				t.row(c.ID, c.Language, state, strconv.FormatUint(c.Runs, 10), strconv.FormatUint(uint64(c.Pid), 10), ago(c.CreatedAt, now))
			}
			return t.flush()
		},
	}
	rm := removeEachCmd(g, "rm ID CONTEXT...", "End code contexts and what their interpreters started", (*paddock.Client).DeleteContext)
	cmd.AddCommand(create, ls, rm)
	return cmd
}
