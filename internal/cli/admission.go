package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/paddock-dev/paddock/api"
	"github.com/spf13/cobra"
)

func newInfoCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "info",
		Short: "Show the runtimes that work here (and why others do not), sizes, limits and defaults",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			in, err := g.client().Info(cmd.Context())
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd.OutOrStdout(), in)
			}
			if err := printInfo(cmd.OutOrStdout(), in); err != nil {
				return err
			}
			return printPoolsInfo(cmd, g) // templates.go
		},
	}
}

func printInfo(w io.Writer, in *api.Info) error {
	fmt.Fprintf(w, "Daemon %s, cgroup layout %s, admission policy %s\n\n", in.Version, in.CgroupLayout, map[bool]string{true: "active", false: "open"}[in.PolicyActive])
	t := newTable(w, "RUNTIME", "AVAILABLE", "VERSION", "PATH", "NOTE")
	for _, r := range in.Runtimes {
		var notes []string
		if r.Default {
			notes = append(notes, "default")
		}
		for _, n := range []string{r.Note, r.Reason} {
			if n != "" {
				notes = append(notes, n)
			}
		}
		if r.UserNamespaces != "" {
			notes = append(notes, "user namespaces "+r.UserNamespaces)
		}
		t.row(r.Name, fmt.Sprint(r.Available), r.Version, r.Path, strings.Join(notes, "; "))
	}
	if err := t.flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	t = newTable(w, "SIZE", "CPU", "MEMORY", "DISK", "PIDS", "FITS HERE")
	for _, s := range in.Sizes {
		fits := "yes"
		if !s.Fits {
			fits = "no: " + s.Reason
		}
		r := s.Resources
		t.row(s.Name, fmt.Sprintf("%g", r.CPU), fmt.Sprintf("%dMiB", r.MemoryMB), fmt.Sprintf("%dMiB", r.DiskMB), fmt.Sprint(r.Pids), fits)
	}
	if err := t.flush(); err != nil {
		return err
	}
	l, d := in.Limits, in.Defaults
	fmt.Fprintf(w, "\nHost limits: cpu=%g memory=%dMiB disk=%dMiB pids=%d\n", l.CPU, l.MemoryMB, l.DiskMB, l.Pids)
	fmt.Fprintf(w, "Defaults:    image=%s runtime=%s cpu=%g memory=%dMiB disk=%dMiB pids=%d sleep_after=%s\n",
		d.Image, d.Runtime, d.Resources.CPU, d.Resources.MemoryMB, d.Resources.DiskMB, d.Resources.Pids, d.SleepAfter)
	printStorageInfo(w, in) // storage.go
	return nil
}

// maxPolicyFile bounds what `policy set` reads; the daemon bounds it too.
const maxPolicyFile = 1 << 20

func newPolicyCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "policy",
		Short: "Show or replace the admission policy (docs/admission.md)",
		Args:  cobra.NoArgs,
	}
	get := &cobra.Command{
		Use:   "get",
		Short: "Print the admission policy in force (JSON)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := g.client().Policy(cmd.Context())
			if err != nil {
				return err
			}
			return printJSON(cmd.OutOrStdout(), p)
		},
	}
	set := &cobra.Command{
		Use:   "set FILE",
		Short: "Replace the admission policy with a JSON file ('-' reads stdin); unix socket only",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var r io.Reader = cmd.InOrStdin()
			if args[0] != "-" {
				f, err := os.Open(args[0])
				if err != nil {
					return err
				}
				defer f.Close()
				r = f
			}
			data, err := io.ReadAll(io.LimitReader(r, maxPolicyFile+1))
			if err != nil {
				return err
			}
			if len(data) > maxPolicyFile {
				return fmt.Errorf("%s is larger than %d bytes", args[0], maxPolicyFile)
			}
			// Unknown fields are refused here, so a typo is reported
			// before anything is sent; the daemon validates the rest.
			var p api.Policy
			dec := json.NewDecoder(bytes.NewReader(data))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&p); err != nil {
				return fmt.Errorf("%s: not a policy document: %w", args[0], err)
			}
			out, err := g.client().SetPolicy(cmd.Context(), p)
			if err != nil {
				return err
			}
			return printJSON(cmd.OutOrStdout(), out)
		},
	}
	cmd.AddCommand(get, set)
	return cmd
}
