package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// maxOutput bounds what is kept of a tool's output for an error message.
const maxOutput = 4 << 10

// Bundle is an OCI bundle whose root is an existing, shared image layer,
// mounted read-only so the baseline can never change the image.
type Bundle struct {
	Dir string
}

// BundleOptions describes a baseline container.
type BundleOptions struct {
	// Runc is the runc binary; default "runc" from PATH.
	Runc string
	// Dir is created and receives config.json.
	Dir string
	// Rootfs is the image layer directory (absolute).
	Rootfs string
	Args   []string
	// NoFile is RLIMIT_NOFILE (soft and hard); default 1024, which is what
	// the host's limits allow every container here.
	NoFile uint64
}

// WriteBundle starts from `runc spec` (so the baseline is runc's own
// defaults, not a spec tuned to look fast) and changes only what must
// differ: the root, the command, no terminal, and the open-files limit.
func WriteBundle(ctx context.Context, o BundleOptions) (*Bundle, error) {
	if !filepath.IsAbs(o.Rootfs) {
		return nil, fmt.Errorf("bundle rootfs %q must be an absolute path", o.Rootfs)
	}
	if fi, err := os.Stat(o.Rootfs); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("bundle rootfs %q is not a directory", o.Rootfs)
	}
	if len(o.Args) == 0 {
		return nil, fmt.Errorf("bundle: no command")
	}
	bin := o.Runc
	if bin == "" {
		bin = "runc"
	}
	nofile := o.NoFile
	if nofile == 0 {
		nofile = 1024
	}
	if err := os.MkdirAll(o.Dir, 0o700); err != nil {
		return nil, err
	}
	cfgPath := filepath.Join(o.Dir, "config.json")
	_ = os.Remove(cfgPath) // runc spec refuses to overwrite
	if _, err := runTool(ctx, bin, "spec", "--bundle", o.Dir); err != nil {
		return nil, err
	}
	raw, err := os.ReadFile(cfgPath)
	if err != nil {
		return nil, err
	}
	var spec specs.Spec
	if err := json.Unmarshal(raw, &spec); err != nil {
		return nil, fmt.Errorf("runc spec wrote an unreadable config.json: %w", err)
	}
	if spec.Process == nil {
		return nil, fmt.Errorf("runc spec wrote no process section")
	}
	spec.Root = &specs.Root{Path: o.Rootfs, Readonly: true}
	spec.Process.Terminal = false
	spec.Process.Args = append([]string(nil), o.Args...)
	spec.Process.Rlimits = []specs.POSIXRlimit{{Type: "RLIMIT_NOFILE", Soft: nofile, Hard: nofile}}
	spec.Hostname = "bench"
	out, err := json.MarshalIndent(&spec, "", "\t")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(cfgPath, out, 0o600); err != nil {
		return nil, err
	}
	return &Bundle{Dir: o.Dir}, nil
}

// Runc drives the runc binary with one state root.
type Runc struct {
	Binary string   // default "runc"
	Root   string   // --root; required
	Flags  []string // more global flags (runsc's --platform, ...)
}

func (r Runc) bin() string {
	if r.Binary == "" {
		return "runc"
	}
	return r.Binary
}

func (r Runc) args(a ...string) []string {
	return append(append([]string{"--root", r.Root}, r.Flags...), a...)
}

// Run runs the bundle's process in the foreground and removes the
// container when it exits (what `runc run` does without --detach).
func (r Runc) Run(ctx context.Context, b *Bundle, id string) error {
	_, err := runTool(ctx, r.bin(), r.args("run", "--bundle", b.Dir, id)...)
	return err
}

// RunDetached starts the bundle's process and returns once it runs.
func (r Runc) RunDetached(ctx context.Context, b *Bundle, id string) error {
	// The container inherits runc's stdout and stderr; were they pipes,
	// waiting for runc would wait for the container too. A file is not
	// waited on.
	f, err := os.CreateTemp("", "runc-detach-")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	cmd := exec.CommandContext(ctx, r.bin(), r.args("run", "--detach", "--bundle", b.Dir, id)...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Run(); err != nil {
		out := make([]byte, maxOutput)
		n, _ := f.ReadAt(out, 0)
		if ctx.Err() != nil {
			return fmt.Errorf("%s run --detach: %w", filepath.Base(r.bin()), ctx.Err())
		}
		return fmt.Errorf("%s run --detach: %v: %s", filepath.Base(r.bin()), err, strings.TrimSpace(string(out[:n])))
	}
	return nil
}

// Exec runs args in the running container id and waits for it.
func (r Runc) Exec(ctx context.Context, id string, args ...string) error {
	_, err := runTool(ctx, r.bin(), r.args(append([]string{"exec", id}, args...)...)...)
	return err
}

// Delete force-removes container id.
func (r Runc) Delete(ctx context.Context, id string) error {
	_, err := runTool(ctx, r.bin(), r.args("delete", "--force", id)...)
	return err
}

// State returns the pid of container id's init process.
func (r Runc) State(ctx context.Context, id string) (int, error) {
	out, err := runTool(ctx, r.bin(), r.args("state", id)...)
	if err != nil {
		return 0, err
	}
	return parseStatePid(out)
}

// parseStatePid reads the pid out of `runc state` / `runsc state` output.
func parseStatePid(out []byte) (int, error) {
	var st struct {
		Pid    int    `json:"pid"`
		Status string `json:"status"`
	}
	if err := json.Unmarshal(out, &st); err != nil {
		return 0, fmt.Errorf("unreadable container state: %w", err)
	}
	if st.Pid <= 0 || st.Pid > 1<<22 {
		return 0, fmt.Errorf("container state has no valid pid (status %q)", st.Status)
	}
	return st.Pid, nil
}

// runTool runs a command and returns its stdout; on failure the error
// carries the head of its stderr so a report can say why.
func runTool(ctx context.Context, bin string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	var stdout, stderr limitedBuffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	// Should a child keep the output pipes open past the tool's own exit,
	// stop waiting for them soon after instead of hanging the run.
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = strings.TrimSpace(stdout.String())
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%s %s: %w", filepath.Base(bin), firstArg(args), ctx.Err())
		}
		return nil, fmt.Errorf("%s %s: %v: %s", filepath.Base(bin), firstArg(args), err, msg)
	}
	return stdout.Bytes(), nil
}

// firstArg names the subcommand for an error message, skipping flags.
func firstArg(args []string) string {
	for i := 0; i < len(args); i++ {
		if args[i] == "--root" {
			i++
			continue
		}
		if !strings.HasPrefix(args[i], "-") {
			return args[i]
		}
	}
	return ""
}

// limitedBuffer keeps the first maxOutput bytes and drops the rest, so a
// chatty tool cannot grow the harness's memory.
type limitedBuffer struct{ bytes.Buffer }

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if room := maxOutput - b.Len(); room > 0 {
		if len(p) > room {
			b.Buffer.Write(p[:room])
		} else {
			b.Buffer.Write(p)
		}
	}
	return len(p), nil
}
