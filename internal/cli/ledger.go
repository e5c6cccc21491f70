package cli

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/spf13/cobra"
)

func newLedgerCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "ledger ID",
		Short: "Show what was done to a sandbox, in order (also after it is destroyed, for the retention period)",
		Long: `Show a sandbox's ledger: its creation, every command run through the API (execs
and session commands with exit code and duration, background processes with
their end, code runs, terminals; env names, never values), file changes,
stops, starts, backups, snapshots, restores, its destruction, and the records
callers added with "paddock ledger add".
A destroyed sandbox's ledger is kept for the daemon's retention (30 days by
default) after its last entry.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			l, err := g.client().Ledger(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd.OutOrStdout(), l)
			}
			t := newTable(cmd.OutOrStdout(), "SEQ", "TIME", "KIND", "SOURCE", "WHAT")
			for _, e := range l.Entries {
				t.row(strconv.FormatInt(e.Seq, 10), e.At.Local().Format(time.DateTime), e.Kind, e.Source, describeEntry(e))
			}
			return t.flush()
		},
	}
	var kind, note string
	var data []string
	add := &cobra.Command{
		Use:   "add ID --kind KIND [--note TEXT] [--data k=v]...",
		Short: "Record a side effect outside the sandbox (a payment, an email) in its ledger",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			d, err := parseLabels("data", data)
			if err != nil {
				return err
			}
			e, err := g.client().AddLedgerEntry(cmd.Context(), args[0], api.AddLedgerEntryRequest{Kind: kind, Note: note, Data: d})
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd.OutOrStdout(), e)
			}
			fmt.Fprintln(cmd.OutOrStdout(), e.Seq)
			return nil
		},
	}
	add.Flags().StringVar(&kind, "kind", "", "what happened, e.g. payment.sent (lowercase letters, digits, '_', '.', '-')")
	add.Flags().StringVar(&note, "note", "", "free text, at most 4096 bytes")
	add.Flags().StringArrayVar(&data, "data", nil, "structured detail k=v (repeatable)")
	_ = add.MarkFlagRequired("kind")
	cmd.AddCommand(add)
	return cmd
}

// describeEntry is the WHAT column: the essentials of an entry on one line.
func describeEntry(e api.LedgerEntry) string {
	var parts []string
	if len(e.Command) > 0 {
		parts = append(parts, strings.Join(e.Command, " "))
	}
	if e.ExitCode != nil {
		parts = append(parts, fmt.Sprintf("exit=%d", *e.ExitCode))
	}
	if e.DurationMS > 0 || e.Kind == api.LedgerExec {
		parts = append(parts, fmt.Sprintf("took=%s", (time.Duration(e.DurationMS)*time.Millisecond).String()))
	}
	if e.Path != "" {
		parts = append(parts, e.Path)
	}
	if e.Note != "" {
		parts = append(parts, strconv.Quote(e.Note))
	}
	if len(e.Data) > 0 {
		parts = append(parts, joinMap(e.Data))
	}
	s := strings.Join(parts, "  ")
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}

func newBackupCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "backup",
		Short: "Back up directories of sandboxes and restore them (local store or S3)",
		Long: `Back up a directory of a sandbox to an archive in the daemon's backup store,
with a time-to-live, and restore it into the same or another sandbox.
Backups outlive the sandbox. The archive's sha256 is checked before a restore
writes anything. --store s3 keeps it in the daemon's S3-compatible bucket
(configured with PADDOCK_BACKUP_S3_*; see paddock info) instead of its
local store. A backup is not a frozen snapshot:
files written during the copy may be caught half-way (use a snapshot for that).`,
		Args: cobra.NoArgs,
	}
	var excludes []string
	var ttl, user, where string
	create := &cobra.Command{
		Use:   "create ID DIR [--exclude GLOB]... [--ttl 72h|never] [--store local|s3]",
		Short: "Archive the directory DIR of sandbox ID; prints the backup id",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			b, err := g.client().CreateBackup(cmd.Context(), args[0],
				api.CreateBackupRequest{Path: args[1], Exclude: excludes, TTL: ttl, User: user, Store: where})
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd.OutOrStdout(), b)
			}
			fmt.Fprintln(cmd.OutOrStdout(), b.ID)
			return nil
		},
	}
	create.Flags().StringArrayVar(&excludes, "exclude", nil, "leave out entries matching GLOB: a name at any depth (node_modules, *.log) or a relative path (build/cache) (repeatable)")
	create.Flags().StringVar(&ttl, "ttl", "", "how long the backup is kept (Go duration, or never; default the daemon's, 7 days)")
	create.Flags().StringVarP(&user, "user", "u", "", "read the directory as this user (user or root; default user)")
	create.Flags().StringVar(&where, "store", "local", "where the archive goes: local (the daemon's state dir) or s3 (the daemon's S3-compatible bucket)")

	var sandbox string
	ls := &cobra.Command{
		Use:     "ls [--sandbox ID]",
		Aliases: []string{"list"},
		Short:   "List backups that have not expired",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			list, err := g.client().ListBackups(cmd.Context(), sandbox)
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd.OutOrStdout(), api.BackupList{Backups: nonNil(list)})
			}
			now := time.Now()
			t := newTable(cmd.OutOrStdout(), "ID", "SANDBOX", "PATH", "SIZE", "STORE", "CREATED", "EXPIRES")
			for _, b := range list {
				exp := "never"
				if b.ExpiresAt != nil {
					exp = "in " + b.ExpiresAt.Sub(now).Round(time.Minute).String()
				}
				sb := b.SandboxID
				if b.SandboxName != "" {
					sb = b.SandboxName + " (" + b.SandboxID + ")"
				}
				t.row(b.ID, sb, b.Path, humanBytes(b.SizeBytes), b.Storage, ago(b.CreatedAt, now), exp)
			}
			return t.flush()
		},
	}
	ls.Flags().StringVar(&sandbox, "sandbox", "", "only backups of this sandbox (id or name)")

	inspect := &cobra.Command{
		Use:   "inspect BACKUP_ID",
		Short: "Describe one backup",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			b, err := g.client().GetBackup(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return printJSON(cmd.OutOrStdout(), b)
		},
	}
	rm := &cobra.Command{
		Use:     "rm BACKUP_ID...",
		Aliases: []string{"delete"},
		Short:   "Delete backups",
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			for _, id := range args {
				if err := g.client().DeleteBackup(cmd.Context(), id); err != nil {
					return err
				}
				fmt.Fprintln(cmd.OutOrStdout(), id)
			}
			return nil
		},
	}
	var path, rUser string
	restore := &cobra.Command{
		Use:   "restore BACKUP_ID ID [--path DIR]",
		Short: "Extract a backup into sandbox ID (the one it came from or another), at its path or DIR",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			b, err := g.client().RestoreBackup(cmd.Context(), args[0],
				api.RestoreBackupRequest{Sandbox: args[1], Path: path, User: rUser})
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd.OutOrStdout(), b)
			}
			dst := path
			if dst == "" {
				dst = b.Path
			}
			fmt.Fprintf(cmd.OutOrStdout(), "restored %s into %s:%s\n", b.ID, args[1], dst)
			return nil
		},
	}
	restore.Flags().StringVar(&path, "path", "", "directory to restore into (default: the backed-up path)")
	restore.Flags().StringVarP(&rUser, "user", "u", "", "write the files as this user (user or root; default user)")
	cmd.AddCommand(create, ls, inspect, rm, restore)
	return cmd
}
