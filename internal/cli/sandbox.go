package cli

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/sdk/go/paddock"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// resourceFlags are a sandbox's size: create's and do's, and a pool's.
type resourceFlags struct {
	cpu    float64
	memory string
	disk   string
	pids   int64
}

func (f *resourceFlags) register(fs *pflag.FlagSet) {
	fs.Float64Var(&f.cpu, "cpu", 0, "vCPUs, e.g. 0.5 or 2 (default: the daemon's)")
	fs.StringVar(&f.memory, "memory", "", "memory limit, e.g. 512M, 2G, 1GiB")
	fs.StringVar(&f.disk, "disk", "", "writable-layer size cap, e.g. 1G")
	fs.Int64Var(&f.pids, "pids", 0, "process and thread limit")
}

// resources validates the flags.
func (f *resourceFlags) resources() (api.Resources, error) {
	var r api.Resources
	if f.cpu < 0 || f.cpu > 1024 {
		return r, fmt.Errorf("--cpu %g: want a number of vCPUs between 0 and 1024, e.g. 0.5", f.cpu)
	}
	r.CPU = f.cpu
	var err error
	if f.memory != "" {
		if r.MemoryMB, err = parseSizeMiB("memory", f.memory); err != nil {
			return r, err
		}
	}
	if f.disk != "" {
		if r.DiskMB, err = parseSizeMiB("disk", f.disk); err != nil {
			return r, err
		}
	}
	if f.pids < 0 {
		return r, fmt.Errorf("--pids %d: must not be negative", f.pids)
	}
	r.Pids = f.pids
	return r, nil
}

// createFlags are the sandbox options shared by create and do.
type createFlags struct {
	name    string
	image   string
	runtime string
	resourceFlags
	env        []string
	labels     []string
	sleepAfter time.Duration
	keepAlive  bool
	timeout    time.Duration
	// Snapshot restore and idle policy (snapshots.go).
	fromSnapshot string
	onIdle       string
	// Size preset (admission.go).
	size string
	// Template, pool and identifier (templates.go).
	template   string
	pool       string
	identifier string
	// Network mode and host rules (network.go).
	net netFlags
}

func (f *createFlags) register(cmd *cobra.Command, timeoutHelp string) {
	fs := cmd.Flags()
	fs.StringVar(&f.name, "name", "", "name the sandbox (1-63 letters, digits, '-', '_', '.')")
	fs.StringVar(&f.image, "image", "", `image: "base" (default), "busybox", or sha256:<digest>`)
	fs.StringVar(&f.runtime, "runtime", "", "runtime: runc (default), gvisor or crun (`paddock info` says which work here)")
	f.resourceFlags.register(fs)
	fs.StringArrayVar(&f.env, "env", nil, "environment variable K=V for every command (repeatable)")
	fs.StringArrayVar(&f.labels, "label", nil, "label k=v (repeatable)")
	fs.DurationVar(&f.sleepAfter, "sleep-after", 0, "stop after being idle this long, e.g. 10m")
	fs.BoolVar(&f.keepAlive, "keep-alive", false, "never stop for idleness")
	fs.DurationVar(&f.timeout, "timeout", 0, timeoutHelp)
	f.registerSnapshotFlags(fs)
	f.registerTemplateFlags(fs)
	f.net.register(fs)
	fs.StringVar(&f.size, "size", "", "size preset: lite, basic, standard-1 ... standard-4 (`paddock info`); --cpu/--memory/--disk/--pids override its fields")
}

// request validates the flags and builds the API request.
func (f *createFlags) request() (api.CreateSandboxRequest, error) {
	req := api.CreateSandboxRequest{Name: f.name, Image: f.image, KeepAlive: f.keepAlive}
	if f.name != "" && !refRE.MatchString(f.name) {
		return req, fmt.Errorf("--name %q: use 1-63 letters, digits, '-', '_' or '.', starting with a letter or digit", f.name)
	}
	switch f.runtime {
	case "", api.RuntimeRunc, api.RuntimeGVisor, api.RuntimeCrun:
		req.Runtime = f.runtime
	case "runsc":
		req.Runtime = api.RuntimeGVisor
	default:
		return req, fmt.Errorf("--runtime %q: want runc, gvisor or crun", f.runtime)
	}
	var err error
	if req.Resources, err = f.resourceFlags.resources(); err != nil {
		return req, err
	}
	if req.Env, err = parseEnv("env", f.env); err != nil {
		return req, err
	}
	if req.Labels, err = parseLabels("label", f.labels); err != nil {
		return req, err
	}
	switch {
	case f.sleepAfter < 0:
		return req, fmt.Errorf("--sleep-after %s: must not be negative", f.sleepAfter)
	case f.sleepAfter > 0 && f.keepAlive:
		return req, fmt.Errorf("--sleep-after and --keep-alive contradict each other; give one")
	case f.sleepAfter > 0:
		req.SleepAfter = f.sleepAfter.String()
	}
	if f.timeout < 0 {
		return req, fmt.Errorf("--timeout %s: must not be negative", f.timeout)
	}
	if f.timeout > 0 {
		req.Timeout = f.timeout.String()
	}
	if err := f.snapshotRequest(&req); err != nil {
		return req, err
	}
	req.Size = f.size // the daemon names the presets and refuses others
	if err := f.templateRequest(&req); err != nil {
		return req, err
	}
	if err := f.net.request(&req); err != nil {
		return req, err
	}
	return req, nil
}

func newCreateCmd(g *globals) *cobra.Command {
	var f createFlags
	cmd := &cobra.Command{
		Use:   "create [flags]",
		Short: "Create a sandbox and print its id",
		Long:  "Create a sandbox and print its id.\n\nWith --from-snapshot, the new sandbox runs on the snapshot's image with the\nsnapshot's files. " + snapshotKeeps,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			req, err := f.request()
			if err != nil {
				return err
			}
			c := g.client()
			if err := prepareCreate(cmd.Context(), c, req, cmd.ErrOrStderr()); err != nil {
				return err
			}
			sb, err := c.Create(cmd.Context(), req)
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd.OutOrStdout(), sb)
			}
			fmt.Fprintln(cmd.OutOrStdout(), sb.ID)
			return nil
		},
	}
	f.register(cmd, "hard lifetime: destroy the sandbox this long after creation, e.g. 1h")
	return cmd
}

func newLsCmd(g *globals) *cobra.Command {
	var labels []string
	cmd := &cobra.Command{
		Use:     "ls [--label k=v]...",
		Aliases: []string{"list", "ps"},
		Short:   "List sandboxes",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			want, err := parseLabels("label", labels)
			if err != nil {
				return err
			}
			list, err := g.client().List(cmd.Context(), want)
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd.OutOrStdout(), api.SandboxList{Sandboxes: nonNil(list)})
			}
			now := time.Now()
			t := newTable(cmd.OutOrStdout(), "ID", "NAME", "STATE", "IMAGE", "RUNTIME", "CREATED")
			for _, sb := range list {
				t.row(sb.ID, sb.Name, sb.State, sb.Image, sb.Runtime, ago(sb.CreatedAt, now))
			}
			return t.flush()
		},
	}
	cmd.Flags().StringArrayVar(&labels, "label", nil, "only sandboxes with label k=v (repeatable)")
	return cmd
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func newInspectCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "inspect ID",
		Short: "Show everything about one sandbox",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			sb, err := g.client().Get(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd.OutOrStdout(), sb)
			}
			if err := printSandbox(cmd, sb); err != nil {
				return err
			}
			return printHistory(cmd, g, sb.ID)
		},
	}
}

func printSandbox(cmd *cobra.Command, sb *api.Sandbox) error {
	t := newTable(cmd.OutOrStdout(), "ID:", sb.ID)
	t.row("Name:", sb.Name)
	state := sb.State
	if sb.ErrorReason != "" {
		state += " (" + sb.ErrorReason + ")"
	}
	t.row("State:", state)
	t.row("Image:", sb.Image+" "+sb.ImageDigest)
	t.row("Runtime:", sb.Runtime)
	r := sb.Resources
	t.row("Resources:", fmt.Sprintf("cpu=%g memory=%dMiB disk=%dMiB pids=%d", r.CPU, r.MemoryMB, r.DiskMB, r.Pids))
	idle := "sleep after " + sb.SleepAfter
	if sb.KeepAlive {
		idle = "keep alive"
	} else if sb.SleepAfter == "" {
		idle = "daemon default"
	}
	t.row("Idle:", idle)
	snapshotRows(t, sb)
	t.row("Timeout:", sb.Timeout)
	t.row("Created:", formatTime(sb.CreatedAt))
	t.row("Last activity:", formatTime(sb.LastActivityAt))
	if sb.ExpiresAt != nil {
		t.row("Expires:", formatTime(*sb.ExpiresAt))
	}
	t.row("Labels:", joinMap(sb.Labels))
	t.row("Env:", joinMap(sb.Env))
	t.row("Created by:", sb.CreatedBy)
	return t.flush()
}

func formatTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.Local().Format(time.RFC3339)
}

func joinMap(m map[string]string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, k+"="+m[k])
	}
	return strings.Join(parts, " ")
}

func newStopCmd(g *globals) *cobra.Command {
	return lifecycleCmd(g, "stop", "Stop a sandbox, keeping its files", (*paddock.Client).Stop)
}

func newStartCmd(g *globals) *cobra.Command {
	return lifecycleCmd(g, "start", "Start a stopped sandbox", (*paddock.Client).Start)
}

func newPauseCmd(g *globals) *cobra.Command {
	var toDisk bool
	cmd := lifecycleCmd(g, "pause", "Freeze a sandbox: memory and processes are kept, no CPU is used", func(c *paddock.Client, ctx context.Context, id string) (*api.Sandbox, error) {
		if toDisk {
			return c.Hibernate(ctx, id)
		}
		return c.Pause(ctx, id)
	})
	cmd.Long = pauseKeeps
	cmd.Flags().BoolVar(&toDisk, "to-disk", false, "hibernate: write memory and processes to disk and free the host's memory and CPU (gVisor sandboxes)")
	return cmd
}

func newResumeCmd(g *globals) *cobra.Command {
	return lifecycleCmd(g, "resume", "Thaw a paused sandbox, or restore a hibernated one", (*paddock.Client).Resume)
}

// pauseKeeps says what pause keeps, and where.
const pauseKeeps = `Freeze every process of a sandbox through the runtime's freezer (the cgroup
freezer for runc, gVisor's own pause for runsc). Memory and processes are kept
and no CPU is used; resume, or any request that needs the sandbox, thaws it and
the processes carry on. The memory stays allocated in the host's RAM.

With --to-disk the sandbox hibernates instead (gVisor sandboxes only; runc
cannot checkpoint on this kind of host): its memory and processes are written
to disk under the daemon's state dir and the host frees all of its memory and
CPU. It is "hibernated" until resume, start or any request that needs it
restores it where it was (a daemon restart or a host reboot in between keeps
it). The image is checked before a restore: one that is damaged puts the
sandbox in error (start boots it from its files), one made by another runsc
build is refused naming both. Open connections to the agent (terminals, port
forwards) are closed by the hibernation; terminals can be attached again.`

type lifecycleFunc = func(c *paddock.Client, ctx context.Context, id string) (*api.Sandbox, error)

func lifecycleCmd(g *globals, use, short string, f lifecycleFunc) *cobra.Command {
	return &cobra.Command{
		Use:   use + " ID",
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			sb, err := f(g.client(), cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd.OutOrStdout(), sb)
			}
			fmt.Fprintln(cmd.OutOrStdout(), sb.ID, sb.State)
			return nil
		},
	}
}

func newRmCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "rm ID...",
		Aliases: []string{"delete"},
		Short:   "Destroy sandboxes and everything in them",
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c := g.client()
			var failed []error
			for _, id := range args {
				err := c.Delete(cmd.Context(), id)
				switch {
				case err == nil:
					fmt.Fprintln(cmd.OutOrStdout(), id)
				case errors.Is(err, paddock.ErrNotFound):
					failed = append(failed, fmt.Errorf("rm %s: no such sandbox", id))
				default:
					failed = append(failed, fmt.Errorf("rm %s: %w", id, err))
				}
				if cmd.Context().Err() != nil {
					return cmd.Context().Err()
				}
			}
			if len(failed) == 1 {
				return failed[0]
			}
			for _, err := range failed {
				fmt.Fprintln(cmd.ErrOrStderr(), "paddock:", err)
			}
			if len(failed) > 0 {
				return &exitError{code: 1}
			}
			return nil
		},
	}
}
