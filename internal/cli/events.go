package cli

import (
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/paddock-dev/paddock/api"
)

func newEventsCmd(g *globals) *cobra.Command {
	var usage bool
	cmd := &cobra.Command{
		Use:   "events [--usage]",
		Short: "Print the sandboxes' changes as they happen",
		Long: `Follow the sandboxes this caller may see: first each of them as it is, then
every change (state changes with where they came from and why, pool claims),
until interrupted. With --usage, also each running sandbox's CPU and memory
every 10 s. --json prints the daemon's events as NDJSON lines.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := g.client().Events(cmd.Context(), usage)
			if err != nil {
				return err
			}
			defer s.Close()
			out := cmd.OutOrStdout()
			if g.json {
				if err := printJSONLine(out, api.Event{Type: api.StreamSync, Sandboxes: s.Sandboxes}); err != nil {
					return err
				}
			} else {
				for _, sb := range s.Sandboxes {
					fmt.Fprintf(out, "%-20s %-12s %s\n", sb.ID, sb.State, cell(sb.Name))
				}
			}
			for {
				ev, err := s.Next()
				if err != nil {
					if cmd.Context().Err() != nil {
						return nil // interrupted: the normal way to stop
					}
					return err
				}
				if g.json {
					if err := printJSONLine(out, ev); err != nil {
						return err
					}
				} else {
					printEvent(cmd, ev)
				}
				if ev.Type == api.StreamLagged {
					return fmt.Errorf("this client fell too far behind the daemon's events; run it again")
				}
			}
		},
	}
	cmd.Flags().BoolVar(&usage, "usage", false, "also print each running sandbox's CPU and memory every 10 s")
	return cmd
}

func printEvent(cmd *cobra.Command, ev api.Event) {
	out := cmd.OutOrStdout()
	at := ev.At.Local().Format("15:04:05")
	switch ev.Type {
	case api.StreamSandbox:
		if ev.Sandbox == nil {
			return
		}
		change := ev.Sandbox.State
		if ev.To != "" && ev.From != "" {
			change = ev.From + " -> " + ev.To
		}
		fmt.Fprintf(out, "%s %-20s %-24s %s\n", at, ev.Sandbox.ID, change, cell(ev.Reason))
	case api.StreamUsage:
		for _, u := range ev.Usage {
			cpu := "-"
			if u.CPUPercent != nil {
				cpu = strconv.FormatFloat(*u.CPUPercent, 'f', 1, 64) + "%"
			}
			fmt.Fprintf(out, "%s %-20s cpu %-7s mem %d MiB\n", at, u.ID, cpu, u.MemoryBytes>>20)
		}
	}
}
