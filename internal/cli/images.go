package cli

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/spf13/cobra"
)

func newImagesCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "images",
		Short: "List and build images",
		Args:  cobra.NoArgs,
	}
	ls := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List images",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			imgs, err := g.client().Images(cmd.Context())
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd.OutOrStdout(), api.ImageList{Images: nonNil(imgs)})
			}
			now := time.Now()
			t := newTable(cmd.OutOrStdout(), "NAME", "DIGEST", "SIZE", "CREATED")
			for _, im := range imgs {
				t.row(im.Name, shortDigest(im.Digest), humanBytes(im.SizeBytes), ago(im.CreatedAt, now))
			}
			return t.flush()
		},
	}
	build := &cobra.Command{
		Use:   "build NAME",
		Short: "Build an image (base, busybox, code-interpreter), printing progress as it goes",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			out := cmd.OutOrStdout()
			enc := json.NewEncoder(out)
			img, err := g.client().BuildImage(cmd.Context(), args[0], func(ev api.BuildEvent) {
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
			if !g.json {
				fmt.Fprintf(out, "built %s %s (%s)\n", img.Name, img.Digest, humanBytes(img.SizeBytes))
			}
			return nil
		},
	}
	cmd.AddCommand(ls, build)
	addImageImportCmds(g, cmd) // imageimport.go
	return cmd
}
