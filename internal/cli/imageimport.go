package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/paddock-dev/paddock/api"
)

// addImageImportCmds adds import, pull, rm and gc under `paddock images`.
func addImageImportCmds(g *globals, images *cobra.Command) {
	var source string
	imp := &cobra.Command{
		Use:   "import FILE",
		Short: "Import a `docker save` archive or an OCI layout tarball (- reads stdin)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			in := cmd.InOrStdin()
			if args[0] != "-" {
				f, err := os.Open(args[0])
				if err != nil {
					return err
				}
				defer f.Close()
				in = f
			}
			img, err := g.client().ImportImage(cmd.Context(), in, source)
			if err != nil {
				return err
			}
			return printImage(cmd, g, "imported", img)
		},
	}
	imp.Flags().StringVar(&source, "source", "", "name to record as the image's source (default: the archive's tag)")

	pull := &cobra.Command{
		Use:   "pull REF",
		Short: "Pull an image from an OCI registry (anonymously), printing progress",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			out := cmd.OutOrStdout()
			enc := json.NewEncoder(out)
			img, err := g.client().PullImage(cmd.Context(), args[0], func(ev api.BuildEvent) {
				switch {
				case g.json:
					_ = enc.Encode(ev)
				case ev.Message != "":
					fmt.Fprintf(out, "%s: %s\n", ev.Type, ev.Message)
				}
			})
			if err != nil {
				return err
			}
			if g.json {
				return nil
			}
			return printImage(cmd, g, "pulled", img)
		},
	}

	var gcAfter bool
	rm := &cobra.Command{
		Use:   "rm NAME|DIGEST|SOURCE",
		Short: "Remove an image that no sandbox, snapshot or template uses",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			res, err := g.client().RemoveImage(cmd.Context(), args[0], gcAfter)
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd.OutOrStdout(), res)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "removed %s %s\n", res.Image.Name, res.Image.Digest)
			if res.GC != nil {
				printGC(cmd, res.GC)
			}
			return nil
		},
	}
	rm.Flags().BoolVar(&gcAfter, "gc", false, "also delete the layers nothing references any more")

	gc := &cobra.Command{
		Use:   "gc",
		Short: "Delete image layers that no image, sandbox, snapshot or template references",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			res, err := g.client().GCImages(cmd.Context())
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd.OutOrStdout(), res)
			}
			printGC(cmd, res)
			return nil
		},
	}
	export := newExportCmd(g, "export NAME|DIGEST|SOURCE -o FILE",
		"Write an image, with Paddock's agent as its entrypoint, as an OCI archive (for ctr images import or a registry)",
		func(ctx context.Context, ref, prefix string, w io.Writer) (string, error) {
			return g.client().ExportImage(ctx, ref, prefix, w)
		})
	images.AddCommand(imp, pull, rm, gc, export)
}

func printImage(cmd *cobra.Command, g *globals, verb string, img *api.Image) error {
	if g.json {
		return printJSON(cmd.OutOrStdout(), img)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "%s %s %s (%d layers, %s)\n", verb, img.Name, img.Digest, img.LayerCount, humanBytes(img.SizeBytes))
	return nil
}

func printGC(cmd *cobra.Command, res *api.ImageGCResult) {
	fmt.Fprintf(cmd.OutOrStdout(), "removed %d layers, freed %s\n", len(res.RemovedLayers), humanBytes(res.FreedBytes))
}

// newExportCmd is a command writing an OCI archive that export makes
// (an image's, a template's) to a file or stdout.
func newExportCmd(g *globals, use, short string, export func(ctx context.Context, ref, prefix string, w io.Writer) (string, error)) *cobra.Command {
	var out, prefix string
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return fmt.Errorf("-o FILE is required (- for stdout)")
			}
			var w io.Writer = cmd.OutOrStdout()
			var f *os.File
			if out != "-" {
				var err error
				f, err = os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
				if err != nil {
					return err
				}
				w = f
			}
			ref, err := export(cmd.Context(), args[0], prefix, w)
			if f != nil {
				if cerr := f.Close(); err == nil {
					err = cerr
				}
				if err != nil {
					_ = os.Remove(out)
				}
			}
			if err != nil {
				return err
			}
			if out != "-" {
				fmt.Fprintf(cmd.OutOrStdout(), "exported %s as %s to %s\n", args[0], ref, out)
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "", "file to write (- for stdout)")
	cmd.Flags().StringVar(&prefix, "prefix", "", "registry and path the image is named under (default paddock.local)")
	return cmd
}
