package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/paddock-dev/paddock/api"
)

func (f *createFlags) registerTemplateFlags(fs *pflag.FlagSet) {
	fs.StringVar(&f.template, "template", "", "create from a built template (served from a matching warm pool when one has a sandbox ready)")
	fs.StringVar(&f.pool, "pool", "", "take the sandbox from this warm pool")
	fs.StringVar(&f.identifier, "identifier", "", "with --pool: return the sandbox bound to this identifier, allocating it from the pool on first use")
}

func (f *createFlags) templateRequest(req *api.CreateSandboxRequest) error {
	if f.identifier != "" && f.pool == "" {
		return fmt.Errorf("--identifier needs --pool")
	}
	if f.template != "" && !templateRE.MatchString(f.template) {
		return fmt.Errorf("--template %q: use 1-63 letters, digits, '-', '_' or '.', and a tag after a colon if any (name:tag)", f.template)
	}
	for flag, v := range map[string]string{"pool": f.pool, "identifier": f.identifier} {
		if v != "" && !refRE.MatchString(v) {
			return fmt.Errorf("--%s %q: use 1-63 letters, digits, '-', '_' or '.'", flag, v)
		}
	}
	req.Template, req.Pool, req.Identifier = f.template, f.pool, f.identifier
	return nil
}

// templateFile is the TOML shape of a template definition.
type templateFile struct {
	Name     string             `toml:"name"`
	Image    string             `toml:"image"`
	Template string             `toml:"template"`
	Runtime  string             `toml:"runtime"`
	Env      map[string]string  `toml:"env"`
	Cwd      string             `toml:"cwd"`
	User     string             `toml:"user"`
	Start    []string           `toml:"start"`
	Ready    *api.Readiness     `toml:"ready"`
	Steps    []templateFileStep `toml:"step"`
}

type templateFileStep struct {
	Run     string            `toml:"run"`
	Copy    string            `toml:"copy"`
	To      string            `toml:"to"`
	Env     map[string]string `toml:"env"`
	Workdir string            `toml:"workdir"`
	User    string            `toml:"user"`
}

// parseTemplateFile reads a TOML template definition; unknown keys and
// steps that are not exactly one kind are errors, so typos are caught
// before a build starts.
func parseTemplateFile(data []byte) (api.TemplateSpec, error) {
	var tf templateFile
	md, err := toml.Decode(string(data), &tf)
	if err != nil {
		return api.TemplateSpec{}, err
	}
	if und := md.Undecoded(); len(und) > 0 {
		keys := make([]string, 0, len(und))
		for _, k := range und {
			keys = append(keys, k.String())
		}
		return api.TemplateSpec{}, fmt.Errorf("unknown keys: %s", strings.Join(keys, ", "))
	}
	spec := api.TemplateSpec{
		Name: tf.Name, Image: tf.Image, Template: tf.Template, Runtime: tf.Runtime,
		Env: tf.Env, Cwd: tf.Cwd, User: tf.User, Start: tf.Start, Ready: tf.Ready,
	}
	if spec.Runtime == "runsc" {
		spec.Runtime = api.RuntimeGVisor
	}
	for i, s := range tf.Steps {
		var st []api.TemplateStep
		if s.Run != "" {
			st = append(st, api.TemplateStep{Kind: api.StepRun, Run: s.Run})
		}
		if s.Copy != "" {
			st = append(st, api.TemplateStep{Kind: api.StepCopy, Src: s.Copy, Dst: s.To})
		} else if s.To != "" {
			return spec, fmt.Errorf("step %d: \"to\" belongs to a copy step", i+1)
		}
		if len(s.Env) > 0 {
			st = append(st, api.TemplateStep{Kind: api.StepEnv, Env: s.Env})
		}
		if s.Workdir != "" {
			st = append(st, api.TemplateStep{Kind: api.StepWorkdir, Dir: s.Workdir})
		}
		if s.User != "" {
			st = append(st, api.TemplateStep{Kind: api.StepUser, User: s.User})
		}
		if len(st) != 1 {
			return spec, fmt.Errorf("step %d: give exactly one of run, copy, env, workdir or user", i+1)
		}
		spec.Steps = append(spec.Steps, st[0])
	}
	return spec, nil
}

func newTemplateCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "template",
		Aliases: []string{"templates"},
		Short:   "Build, list and remove templates (docs/templates-pools.md)",
		Args:    cobra.NoArgs,
	}
	var file, contextDir string
	build := &cobra.Command{
		Use:   "build -f FILE",
		Short: "Build a template from a TOML file; unchanged steps come from the cache",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if file == "" {
				return fmt.Errorf("give the template file with -f")
			}
			data, err := os.ReadFile(file)
			if err != nil {
				return err
			}
			spec, err := parseTemplateFile(data)
			if err != nil {
				return fmt.Errorf("%s: %w", file, err)
			}
			if contextDir == "" {
				contextDir = filepath.Dir(file)
			}
			out := cmd.OutOrStdout()
			enc := json.NewEncoder(out)
			start := time.Now()
			tpl, err := g.client().BuildTemplate(cmd.Context(), spec, contextDir, func(ev api.TemplateBuildEvent) {
				switch {
				case g.json:
					_ = enc.Encode(ev)
				case ev.Type == api.BuildStep:
					cached := ""
					if ev.Cached {
						cached = " (cached)"
					}
					fmt.Fprintf(out, "step %d/%d: %s%s\n", ev.Step, ev.Steps, ev.Kind, cached)
				case ev.Type == api.BuildOutput:
					_, _ = out.Write(ev.Data)
				}
			})
			if err != nil {
				return err
			}
			if !g.json {
				fmt.Fprintf(out, "built template %s (%s, %d layers) in %s\n", tpl.Name, shortDigest("build:"+tpl.BuildID), len(tpl.Layers), time.Since(start).Round(time.Millisecond))
			}
			return nil
		},
	}
	build.Flags().StringVarP(&file, "file", "f", "", "template definition (TOML)")
	build.Flags().StringVar(&contextDir, "context", "", "build context directory for copy steps (default: the file's directory)")
	ls := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List templates",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ts, err := g.client().Templates(cmd.Context())
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd.OutOrStdout(), api.TemplateList{Templates: nonNil(ts)})
			}
			now := time.Now()
			t := newTable(cmd.OutOrStdout(), "NAME", "IMAGE", "STEPS", "BUILD", "UPDATED", "SANDBOXES", "LAST CREATE")
			for _, tp := range ts {
				last := "-"
				if tp.LastSpawnedAt != nil {
					last = ago(*tp.LastSpawnedAt, now)
				}
				t.row(tp.Name, tp.Image, fmt.Sprint(len(tp.Spec.Steps)), shortDigest("build:"+tp.BuildID), ago(tp.UpdatedAt, now), fmt.Sprint(tp.Spawns), last)
			}
			return t.flush()
		},
	}
	rm := &cobra.Command{
		Use:   "rm NAME...",
		Short: "Remove templates (sandboxes made from them keep running)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			for _, n := range args {
				if err := g.client().DeleteTemplate(cmd.Context(), n); err != nil {
					return err
				}
			}
			return nil
		},
	}
	export := newExportCmd(g, "export NAME[:TAG] -o FILE",
		"Write the image a template's sandboxes run on Kubernetes (its base image, the files its build made, Paddock's agent) as an OCI archive",
		func(ctx context.Context, name, prefix string, w io.Writer) (string, error) {
			return g.client().ExportTemplate(ctx, name, prefix, w)
		})
	cmd.AddCommand(build, ls, rm, newTemplateTagCmd(g), newTemplateTagsCmd(g), export)
	return cmd
}

func newTemplateTagCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "tag NAME[:TAG] TAG...",
		Short: "Give a template's build more tags (each a template NAME:TAG; `template rm NAME:TAG` removes one)",
		Args:  cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			tags, err := g.client().TagTemplate(cmd.Context(), args[0], args[1:]...)
			if err != nil {
				return err
			}
			return printTemplateTags(cmd, g, tags)
		},
	}
}

func newTemplateTagsCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "tags NAME",
		Short: "List the tags of a template's name and the build each names",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			tags, err := g.client().TemplateTags(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return printTemplateTags(cmd, g, tags)
		},
	}
}

func printTemplateTags(cmd *cobra.Command, g *globals, tags []api.TemplateTag) error {
	if g.json {
		return printJSON(cmd.OutOrStdout(), api.TemplateTagList{Tags: nonNil(tags)})
	}
	now := time.Now()
	t := newTable(cmd.OutOrStdout(), "TAG", "TEMPLATE", "BUILD", "SINCE")
	for _, tg := range tags {
		t.row(tg.Tag, tg.Template, shortDigest("build:"+tg.BuildID), ago(tg.CreatedAt, now))
	}
	return t.flush()
}

func newPoolCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "pool",
		Aliases: []string{"pools"},
		Short:   "Warm pools of ready sandboxes (docs/templates-pools.md)",
		Args:    cobra.NoArgs,
	}
	var req api.SetPoolRequest
	var cooldown time.Duration
	var size resourceFlags
	set := &cobra.Command{
		Use:   "set NAME",
		Short: "Create or change a pool (--template defaults to NAME)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if req.Template == "" {
				req.Template = args[0]
			}
			if cooldown < 0 {
				return fmt.Errorf("--cooldown %s: must not be negative", cooldown)
			}
			if cooldown > 0 {
				req.Cooldown = cooldown.String()
			}
			var err error
			if req.Resources, err = size.resources(); err != nil {
				return err
			}
			p, err := g.client().SetPool(cmd.Context(), args[0], req)
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd.OutOrStdout(), p)
			}
			grow := ""
			if p.MaxReady > p.MinReady {
				grow = fmt.Sprintf(", growing to %d after a burst", p.MaxReady)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "pool %s: template %s, min ready %d%s\n", p.Name, p.Template, p.MinReady, grow)
			return nil
		},
	}
	set.Flags().StringVar(&req.Template, "template", "", "template the pool keeps sandboxes of")
	set.Flags().IntVar(&req.MinReady, "min-ready", 1, "sandboxes kept ready")
	set.Flags().IntVar(&req.MaxReady, "max-ready", 0, "let the pool grow to this many after a burst: it keeps as many ready as the most creates within 10 s of the last 10 min (0: it does not grow)")
	set.Flags().DurationVar(&cooldown, "cooldown", 0, "destroy a sandbox served from the pool once idle this long (0: the daemon's idle policy)")
	size.register(set.Flags())
	ls := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List pools and their state",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ps, err := g.client().Pools(cmd.Context())
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd.OutOrStdout(), api.PoolList{Pools: nonNil(ps)})
			}
			return printPools(cmd.OutOrStdout(), ps)
		},
	}
	rm := &cobra.Command{
		Use:   "rm NAME...",
		Short: "Remove pools and their unclaimed sandboxes",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			for _, n := range args {
				if err := g.client().DeletePool(cmd.Context(), n); err != nil {
					return err
				}
			}
			return nil
		},
	}
	cmd.AddCommand(set, ls, rm)
	return cmd
}

func printPools(w io.Writer, ps []api.Pool) error {
	t := newTable(w, "POOL", "TEMPLATE", "MIN", "MAX", "TARGET", "READY", "STARTING", "SERVED", "COLD", "COOLDOWN", "ERROR")
	for _, p := range ps {
		cd := p.Cooldown
		if cd == "" {
			cd = "-"
		}
		maxReady := "-"
		if p.MaxReady > p.MinReady {
			maxReady = fmt.Sprint(p.MaxReady)
		}
		t.row(p.Name, p.Template, fmt.Sprint(p.MinReady), maxReady, fmt.Sprint(p.Target), fmt.Sprint(p.Ready), fmt.Sprint(p.Starting),
			fmt.Sprint(p.Served), fmt.Sprint(p.Cold), cd, p.Error)
	}
	return t.flush()
}

// printPoolsInfo adds the warm pools to `paddock info`.
func printPoolsInfo(cmd *cobra.Command, g *globals) error {
	ps, err := g.client().Pools(cmd.Context())
	if err != nil {
		return err
	}
	w := cmd.OutOrStdout()
	if len(ps) == 0 {
		fmt.Fprintln(w, "Warm pools:  none")
		return nil
	}
	fmt.Fprintln(w)
	return printPools(w, ps)
}
