package cli

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/spf13/cobra"

	"github.com/paddock-dev/paddock/api"
)

func newProcPsCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "ps ID",
		Short: "List every process of a sandbox, not only background processes (the agent is PID 1)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			list, err := g.client().Procs(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if g.json {
				list.Procs = nonNil(list.Procs)
				return printJSON(cmd.OutOrStdout(), list)
			}
			now := time.Now()
			t := newTable(cmd.OutOrStdout(), "PID", "PPID", "USER", "STAT", "STARTED", "RSS", "COMMAND")
			for _, p := range list.Procs {
				t.row(strconv.Itoa(p.Pid), strconv.Itoa(p.PPid), procUser(p), p.State,
					ago(p.StartedAt, now), humanBytes(p.RSSBytes), procCommand(p))
			}
			if err := t.flush(); err != nil {
				return err
			}
			if list.Truncated {
				fmt.Fprintf(cmd.ErrOrStderr(), "paddock: more than %d processes; the first by pid are listed\n", api.MaxProcs)
			}
			return nil
		},
	}
}

func newProcKillallCmd(g *globals) *cobra.Command {
	var grace time.Duration
	cmd := &cobra.Command{
		Use:   "killall ID [--grace 0s]",
		Short: "End every process of a sandbox but its agent, without a restart",
		Long: "End every process of a sandbox except Paddock's agent (PID 1): what commands left running, " +
			"background processes, sessions' shells, terminals, interpreters. The sandbox keeps running and " +
			"takes new commands at once. --grace sends SIGTERM first and waits up to that long before SIGKILL.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var req api.KillAllRequest
			if grace != 0 {
				req.Grace = grace.String()
			}
			res, err := g.client().KillAll(cmd.Context(), args[0], req)
			if err != nil {
				return err
			}
			if g.json {
				res.Remaining = nonNil(res.Remaining)
				return printJSON(cmd.OutOrStdout(), res)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "killed %d processes\n", res.Killed)
			if len(res.Remaining) > 0 {
				for _, p := range res.Remaining {
					fmt.Fprintf(cmd.ErrOrStderr(), "paddock: still alive: pid %d (%s) %s\n", p.Pid, p.State, procCommand(p))
				}
				return fmt.Errorf("%d processes remain", len(res.Remaining))
			}
			return nil
		},
	}
	cmd.Flags().DurationVar(&grace, "grace", 0, "SIGTERM first, and this long (at most 30s) before SIGKILL")
	return cmd
}

func procUser(p api.Proc) string {
	if p.User != "" {
		return printable(p.User)
	}
	return strconv.FormatUint(uint64(p.UID), 10)
}

// procCommand is the command line, or the kernel's name in brackets when
// there is none (a zombie), as ps prints them.
func procCommand(p api.Proc) string {
	s := "[" + p.Comm + "]"
	if len(p.Cmd) > 0 {
		s = strings.Join(p.Cmd, " ")
		if p.CmdTruncated {
			s += "..."
		}
	}
	if p.Agent {
		s += " (paddock agent)"
	}
	return printable(s)
}

// printable replaces control characters, which a process may put in its
// name and arguments, so they cannot drive the user's terminal.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || !unicode.IsPrint(r) && r != ' ' {
			return '?'
		}
		return r
	}, s)
}
