package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/sdk/go/paddock"
)

func parsePortArg(s string) (int, error) {
	p, err := strconv.Atoi(s)
	if err != nil || p < 1 || p > 65535 || strconv.Itoa(p) != s {
		return 0, fmt.Errorf("port %q: want a number from 1 to 65535", s)
	}
	return p, nil
}

func newExposeCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "expose ID PORT",
		Short: "Serve a sandbox port at a preview URL (prints the URL; exposing again replaces the token)",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			port, err := parsePortArg(args[1])
			if err != nil {
				return err
			}
			p, err := g.client().Expose(cmd.Context(), args[0], port)
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd.OutOrStdout(), p)
			}
			fmt.Fprintln(cmd.OutOrStdout(), p.URL)
			return nil
		},
	}
}

func newUnexposeCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "unexpose ID PORT",
		Short: "Revoke a port's preview URL",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			port, err := parsePortArg(args[1])
			if err != nil {
				return err
			}
			return g.client().Unexpose(cmd.Context(), args[0], port)
		},
	}
}

func newPreviewsCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "previews ID",
		Short: "List a sandbox's exposed ports",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ps, err := g.client().Previews(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd.OutOrStdout(), api.PreviewList{Previews: ps})
			}
			t := newTable(cmd.OutOrStdout(), "PORT", "EXPOSED")
			now := time.Now()
			for _, p := range ps {
				t.row(strconv.Itoa(p.Port), ago(p.CreatedAt, now))
			}
			return t.flush()
		},
	}
}

func newWatchCmd(g *globals) *cobra.Command {
	var o paddock.WatchOptions
	cmd := &cobra.Command{
		Use:   "watch ID PATH [--recursive] [--include GLOB]... [--exclude GLOB]...",
		Short: "Print changes under a directory of a sandbox as they happen",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Path = args[1]
			w, err := g.client().Watch(cmd.Context(), args[0], o)
			if err != nil {
				return err
			}
			defer w.Close()
			out := cmd.OutOrStdout()
			for {
				ev, err := w.Next()
				if errors.Is(err, io.EOF) {
					return nil
				}
				if err != nil {
					if cmd.Context().Err() != nil {
						return nil // interrupted: a normal way to stop watching
					}
					return err
				}
				if g.json {
					if err := printJSONLine(out, ev); err != nil {
						return err
					}
					continue
				}
				if ev.Type == api.WatchEnd {
					fmt.Fprintf(cmd.ErrOrStderr(), "paddock: watch ended: %s\n", cell(ev.Reason))
					continue
				}
				fmt.Fprintf(out, "%-6s %s\n", ev.Type, cell(ev.Path))
			}
		},
	}
	fs := cmd.Flags()
	fs.BoolVarP(&o.Recursive, "recursive", "r", false, "watch subdirectories too")
	fs.StringArrayVar(&o.Include, "include", nil, "report only paths matching this glob (repeatable); a glob without / matches any path element")
	fs.StringArrayVar(&o.Exclude, "exclude", nil, "leave out paths matching this glob (repeatable), e.g. '*.pyc' or node_modules")
	fs.StringVarP(&o.User, "user", "u", "", `watch as this user: a name or uid[:gid] (default: the image's User, else "user")`)
	return cmd
}

// printJSONLine writes one compact JSON document per line (NDJSON).
func printJSONLine(w io.Writer, v any) error {
	return json.NewEncoder(w).Encode(v)
}

func newTerminalsCmd(g *globals) *cobra.Command {
	var kill string
	cmd := &cobra.Command{
		Use:   "terminals ID [--kill TERMINAL]",
		Short: "List a sandbox's terminals, or kill one",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c := g.client()
			if kill != "" {
				return c.KillTerminal(cmd.Context(), args[0], kill)
			}
			ts, err := c.Terminals(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd.OutOrStdout(), api.TerminalList{Terminals: ts})
			}
			t := newTable(cmd.OutOrStdout(), "ID", "PID", "SIZE", "ATTACHED", "STATUS", "CREATED", "COMMAND")
			now := time.Now()
			for _, x := range ts {
				status := "running"
				if x.Exited && x.ExitCode != nil {
					status = fmt.Sprintf("exited (%d)", *x.ExitCode)
				}
				t.row(x.ID, strconv.Itoa(int(x.Pid)), fmt.Sprintf("%dx%d", x.Cols, x.Rows), strconv.Itoa(x.Attached),
					status, ago(x.CreatedAt, now), strings.Join(x.Cmd, " "))
			}
			return t.flush()
		},
	}
	cmd.Flags().StringVar(&kill, "kill", "", "kill this terminal's process")
	return cmd
}
