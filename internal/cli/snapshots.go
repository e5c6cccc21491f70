package cli

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/sdk/go/paddock"
)

// snapshotKeeps is said wherever snapshots are offered, so nobody guesses.
const snapshotKeeps = `A snapshot keeps the sandbox's files: everything it changed against its
image, with owners, modes, times, extended attributes and deletions. It does
not keep memory, running processes or mounts; a sandbox restored from it
starts fresh on those files. To keep memory and processes in place, use pause
(--to-disk to free the host).

With --memory (gVisor sandboxes with network none) a snapshot keeps memory and
processes too: the sandbox is checkpointed and restored for it (a pause of a
fraction of a second), and a sandbox created from the snapshot, or a fork copy,
resumes every process where it was, at the same size, under its own id and
hostname. Open connections to the outside are not kept. Such snapshots cannot
be exported yet.`

func (f *createFlags) registerSnapshotFlags(fs *pflag.FlagSet) {
	fs.StringVar(&f.fromSnapshot, "from-snapshot", "", "restore a snapshot (id or name) into the new sandbox: its files on its image (not memory, processes or mounts)")
	fs.StringVar(&f.onIdle, "on-idle", "", "what --sleep-after does: stop (default; files kept), pause (memory kept), snapshot (files snapshotted, compute freed; the next request restores), or hibernate (memory and processes to disk, compute freed; gVisor)")
}

func (f *createFlags) snapshotRequest(req *api.CreateSandboxRequest) error {
	switch f.onIdle {
	case "", api.OnIdleStop, api.OnIdlePause, api.OnIdleSnapshot, api.OnIdleHibernate:
		req.OnIdle = f.onIdle
	default:
		return fmt.Errorf("--on-idle %q: want stop, pause, snapshot or hibernate", f.onIdle)
	}
	if f.onIdle != "" && f.keepAlive {
		return fmt.Errorf("--on-idle and --keep-alive contradict each other; give one")
	}
	if f.fromSnapshot != "" && !refRE.MatchString(f.fromSnapshot) {
		return fmt.Errorf("--from-snapshot %q is not a valid snapshot id or name", f.fromSnapshot)
	}
	req.FromSnapshot = f.fromSnapshot
	return nil
}

func snapshotRows(t *table, sb *api.Sandbox) {
	onIdle := sb.OnIdle
	if onIdle == "" {
		onIdle = api.OnIdleStop
	}
	t.row("On idle:", onIdle)
	if sb.FromSnapshot != "" {
		t.row("From snapshot:", sb.FromSnapshot)
	}
}

// printHistory shows a sandbox's state changes with their reasons.
func printHistory(cmd *cobra.Command, g *globals, id string) error {
	h, err := g.client().History(cmd.Context(), id)
	if err != nil {
		return err
	}
	w := cmd.OutOrStdout()
	fmt.Fprintln(w, "History:")
	t := newTable(w, "  AT", "FROM", "TO", "REASON")
	for _, c := range h.Changes {
		from := c.From
		if from == "" {
			from = "-"
		}
		t.row("  "+formatTime(c.At), from, c.To, c.Reason)
	}
	return t.flush()
}

func newSnapshotCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "snapshot",
		Aliases: []string{"snapshots"},
		Short:   "Take, list, export and import filesystem snapshots",
		Long:    "Snapshots are immutable, content-addressed copies of a sandbox's files.\n\n" + snapshotKeeps,
	}
	cmd.AddCommand(newSnapshotCreateCmd(g), newSnapshotLsCmd(g), newSnapshotInspectCmd(g), newSnapshotRmCmd(g),
		newSnapshotExportCmd(g), newSnapshotImportCmd(g), newSnapshotTTLCmd(g))
	return cmd
}

func checkTTLFlag(ttl string) error {
	if ttl == "" || ttl == api.SnapshotTTLNever {
		return nil
	}
	if d, err := time.ParseDuration(ttl); err != nil || d <= 0 {
		return fmt.Errorf("--ttl %q: want a duration such as 72h, or never", ttl)
	}
	return nil
}

func newSnapshotCreateCmd(g *globals) *cobra.Command {
	var name, ttl string
	var memory bool
	cmd := &cobra.Command{
		Use:   "create SANDBOX [--name NAME] [--ttl 720h|never] [--memory]",
		Short: "Snapshot a sandbox's files now (a running sandbox is frozen for the copy)",
		Long:  snapshotKeeps + "\n\nOn the Kubernetes backend a snapshot is the home directory, /home/user,\ncopied while the sandbox runs (not frozen: a file written meanwhile may be torn);\na stopped sandbox must be started first.\n\nA snapshot expires after 30 days unless --ttl says otherwise; each restore\nrenews its expiry to now + TTL (snapshot ttl changes the TTL).",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if name != "" && !refRE.MatchString(name) {
				return fmt.Errorf("--name %q: use 1-63 letters, digits, '-', '_' or '.', starting with a letter or digit", name)
			}
			if err := checkTTLFlag(ttl); err != nil {
				return err
			}
			s, err := g.client().CreateSnapshot(cmd.Context(), args[0], api.CreateSnapshotRequest{Name: name, TTL: ttl, Memory: memory})
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd.OutOrStdout(), s)
			}
			fmt.Fprintln(cmd.OutOrStdout(), s.ID)
			return nil
		},
	}
	cmd.Flags().StringVar(&name, "name", "", "name the snapshot (unique)")
	cmd.Flags().StringVar(&ttl, "ttl", "", `time to live, e.g. 72h, or "never" (default 30 days)`)
	cmd.Flags().BoolVar(&memory, "memory", false, "keep memory and processes too (gVisor, network none)")
	return cmd
}

func newSnapshotLsCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List snapshots",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			list, err := g.client().ListSnapshots(cmd.Context())
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd.OutOrStdout(), api.SnapshotList{Snapshots: nonNil(list)})
			}
			now := time.Now()
			t := newTable(cmd.OutOrStdout(), "ID", "NAME", "SIZE", "MEMORY", "LAYERS", "SANDBOX", "CREATED", "EXPIRES")
			for _, s := range list {
				mem := "-"
				if s.Memory {
					mem = humanBytes(s.MemorySize)
				}
				t.row(s.ID, s.Name, humanBytes(s.Size), mem, fmt.Sprint(len(s.Layers)), s.Sandbox, ago(s.CreatedAt, now), expires(s.ExpiresAt))
			}
			return t.flush()
		},
	}
}

func expires(t *time.Time) string {
	if t == nil {
		return "never"
	}
	return formatTime(*t)
}

func newSnapshotInspectCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "inspect SNAPSHOT",
		Short: "Show one snapshot",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := g.client().GetSnapshot(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd.OutOrStdout(), s)
			}
			t := newTable(cmd.OutOrStdout(), "ID:", s.ID)
			t.row("Name:", s.Name)
			t.row("Size:", fmt.Sprintf("%s (all layers %s)", humanBytes(s.Size), humanBytes(s.SizeTotal)))
			t.row("Stored:", humanBytes(s.SizeAdded)+" new on disk (files already stored are shared)")
			t.row("Image:", s.Image+" "+s.ImageDigest)
			t.row("Sandbox:", s.Sandbox)
			t.row("Parent:", s.Parent)
			t.row("Created:", formatTime(s.CreatedAt))
			t.row("TTL:", s.TTL+" (each restore renews the expiry to now + TTL)")
			t.row("Expires:", expires(s.ExpiresAt))
			for i, l := range s.Layers {
				t.row(fmt.Sprintf("Layer %d:", i+1), l)
			}
			t.row("Keeps:", "files only (no memory, processes or mounts)")
			return t.flush()
		},
	}
}

func newSnapshotRmCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "rm SNAPSHOT...",
		Aliases: []string{"delete"},
		Short:   "Delete snapshots (sandboxes restored from them keep working)",
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var failed []error
			for _, ref := range args {
				err := g.client().DeleteSnapshot(cmd.Context(), ref)
				switch {
				case err == nil:
					fmt.Fprintln(cmd.OutOrStdout(), ref)
				case errors.Is(err, paddock.ErrNotFound):
					failed = append(failed, fmt.Errorf("snapshot rm %s: no such snapshot", ref))
				default:
					failed = append(failed, fmt.Errorf("snapshot rm %s: %w", ref, err))
				}
			}
			return errors.Join(failed...)
		},
	}
}

func newSnapshotTTLCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "ttl SNAPSHOT DURATION|never",
		Short: "Give a snapshot a new TTL: it expires DURATION from now (or never), and restores renew by it",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkTTLFlag(args[1]); err != nil {
				return err
			}
			s, err := g.client().SetSnapshotTTL(cmd.Context(), args[0], args[1])
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd.OutOrStdout(), s)
			}
			fmt.Fprintln(cmd.OutOrStdout(), s.ID, expires(s.ExpiresAt))
			return nil
		},
	}
}

func newSnapshotExportCmd(g *globals) *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "export SNAPSHOT -o FILE",
		Short: "Write a snapshot to one file (manifest and layers with sha256 checksums)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return writeOutput(cmd, out, func(w io.Writer) error {
				return g.client().ExportSnapshot(cmd.Context(), args[0], w)
			})
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "", "file to write (- for stdout)")
	return cmd
}

func newSnapshotImportCmd(g *globals) *cobra.Command {
	var name, ttl string
	var filesOnly bool
	cmd := &cobra.Command{
		Use:   "import FILE [--name NAME] [--ttl D|never] [--files-only]",
		Short: "Import a snapshot file; every layer's checksum is verified",
		Long: `Import a snapshot file; every layer's checksum is verified.

A memory snapshot's memory image is kept only if this daemon's gVisor can
restore it and the file was exported by this daemon, or by one whose
memory-export.key (in its state directory) was copied to this one's:
a memory image is trusted by the sandbox kernel that restores it.
--files-only imports the files of any memory snapshot without its memory.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkTTLFlag(ttl); err != nil {
				return err
			}
			r, closeIn, err := openInput(cmd, args[0])
			if err != nil {
				return err
			}
			defer closeIn()
			s, err := g.client().ImportSnapshot(cmd.Context(), r, paddock.ImportOptions{Name: name, TTL: ttl, FilesOnly: filesOnly})
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd.OutOrStdout(), s)
			}
			fmt.Fprintln(cmd.OutOrStdout(), s.ID)
			return nil
		},
	}
	cmd.Flags().StringVar(&name, "name", "", "name the imported snapshot (default: its name in the file, if free)")
	cmd.Flags().StringVar(&ttl, "ttl", "", `time to live, e.g. 72h, or "never" (default 30 days)`)
	cmd.Flags().BoolVar(&filesOnly, "files-only", false, "import a memory snapshot's files without its memory image")
	return cmd
}

func newForkCmd(g *globals) *cobra.Command {
	var (
		count  int
		prefix string
		labels []string
		memory bool
	)
	cmd := &cobra.Command{
		Use:   "fork SANDBOX [--count N] [--name-prefix P] [--memory]",
		Short: "Make N independent copies of a sandbox's files, now",
		Long:  "fork snapshots the sandbox (frozen for the copy; on the Kubernetes backend, its home directory, copied live) and restores the snapshot into N new sandboxes\nwith the same runtime, size, environment and idle policy. It prints their ids.\n\n" + snapshotKeeps,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if count < 1 || count > api.MaxForkCount {
				return fmt.Errorf("--count %d: want 1 to %d", count, api.MaxForkCount)
			}
			want, err := parseLabels("label", labels)
			if err != nil {
				return err
			}
			res, err := g.client().Fork(cmd.Context(), args[0], api.ForkRequest{Count: count, NamePrefix: prefix, Labels: want, Memory: memory})
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd.OutOrStdout(), res)
			}
			ids := make([]string, 0, len(res.Sandboxes))
			for _, sb := range res.Sandboxes {
				ids = append(ids, sb.ID)
			}
			fmt.Fprintln(cmd.OutOrStdout(), strings.Join(ids, "\n"))
			return nil
		},
	}
	cmd.Flags().IntVar(&count, "count", 1, "how many copies")
	cmd.Flags().StringVar(&prefix, "name-prefix", "", "name the copies PREFIX-1, PREFIX-2, ...")
	cmd.Flags().StringArrayVar(&labels, "label", nil, "label k=v for every copy (repeatable)")
	cmd.Flags().BoolVar(&memory, "memory", false, "live copies: memory and processes too (gVisor, network none)")
	return cmd
}
