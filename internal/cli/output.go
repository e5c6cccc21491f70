package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/spf13/cobra"

	"github.com/paddock-dev/paddock/sdk/go/paddock"
)

func (g *globals) client() *paddock.Client {
	return &paddock.Client{Socket: g.socket, URL: g.url, APIKey: g.apiKey}
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// table writes aligned columns; cells are cleaned so that text that came
// from the daemon cannot break the alignment or the terminal.
type table struct{ tw *tabwriter.Writer }

func newTable(w io.Writer, header ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)}
	t.row(header...)
	return t
}

func (t *table) row(cells ...string) {
	for i, c := range cells {
		cells[i] = cell(c)
	}
	fmt.Fprintln(t.tw, strings.Join(cells, "\t"))
}

func (t *table) flush() error { return t.tw.Flush() }

func cell(s string) string {
	if s == "" {
		return "-"
	}
	return strings.Map(func(r rune) rune {
		if r == '\t' || r == '\n' || !unicode.IsPrint(r) {
			return ' '
		}
		return r
	}, s)
}

// ago says how long ago t was, coarsely, for people.
func ago(t time.Time, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := now.Sub(t)
	switch {
	case d < 0:
		return t.Local().Format(time.DateTime)
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d.Hours()))
	}
	return fmt.Sprintf("%dd ago", int(d.Hours()/24))
}

// humanBytes prints a byte count in binary units.
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%dB", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f%ciB", float64(n)/float64(div), "KMGTP"[exp])
}

// shortDigest keeps enough of a digest to tell images apart on screen.
func shortDigest(d string) string {
	algo, hex, ok := strings.Cut(d, ":")
	if !ok || len(hex) <= 12 {
		return d
	}
	return algo + ":" + hex[:12]
}

// removeEachCmd is `<noun> rm ID NAME...`: it removes each named thing of
// one sandbox in turn, printing each name once it is gone, and stops at
// the first failure.
func removeEachCmd(g *globals, use, short string, del func(c *paddock.Client, ctx context.Context, id, name string) error) *cobra.Command {
	return &cobra.Command{
		Use:     use,
		Aliases: []string{"delete"},
		Short:   short,
		Args:    cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			for _, n := range args[1:] {
				if err := del(g.client(), cmd.Context(), args[0], n); err != nil {
					return err
				}
				fmt.Fprintln(cmd.OutOrStdout(), n)
			}
			return nil
		},
	}
}

// writeOutput writes a download to the file out, or to stdout for "-".
// A file is written beside its target and renamed, so a failed download
// never leaves a file that looks complete.
func writeOutput(cmd *cobra.Command, out string, download func(io.Writer) error) error {
	if out == "" {
		return fmt.Errorf("give the file to write with -o FILE (- for stdout)")
	}
	if out == "-" {
		return download(cmd.OutOrStdout())
	}
	tmp, err := os.CreateTemp(filepath.Dir(out), "."+filepath.Base(out)+".part-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := download(tmp); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), out)
}

// openInput opens the file in, or stdin for "-".
func openInput(cmd *cobra.Command, in string) (io.Reader, func(), error) {
	if in == "-" {
		return cmd.InOrStdin(), func() {}, nil
	}
	f, err := os.Open(in)
	if err != nil {
		return nil, nil, err
	}
	return f, func() { f.Close() }, nil
}
