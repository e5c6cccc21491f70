package cli

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/paddock-dev/paddock/sdk/go/paddock"
	"github.com/spf13/cobra"
)

// teardownTimeout bounds the destroy that follows every `do`, including
// after Ctrl-C, so the client neither hangs nor leaves the sandbox behind.
const teardownTimeout = 60 * time.Second

// doLifetimeSlack is added to the command's timeout to make the sandbox's
// hard lifetime: the command's own timeout fires first and is reported as
// such, while a client that dies cannot leave the sandbox running for long.
const doLifetimeSlack = 2 * time.Minute

type doFlags struct {
	create    createFlags
	exec      execFlags
	importTar string
	exportTar string
}

func newDoCmd(g *globals) *cobra.Command {
	var f doFlags
	cmd := &cobra.Command{
		Use:   "do [flags] -- CMD...",
		Short: "Run one command in a fresh sandbox, then destroy it",
		Long: `do creates an ephemeral sandbox, optionally extracts a tar archive into it,
runs the command, optionally exports what the command changed as a tar archive,
and destroys the sandbox whatever happened. It exits with the command's code
(128+n for signal n, 124 when --timeout killed it).`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return fmt.Errorf("do needs a command, as in: paddock do [flags] -- CMD ARGS")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return runDo(cmd, g, &f, args)
		},
	}
	cmd.Flags().SetInterspersed(false)
	f.create.register(cmd, "kill the command after this long (exit code 124); the sandbox lives a little longer")
	f.exec.register(cmd, false, false)
	cmd.Flags().StringVar(&f.importTar, "import-tar", "", "extract this tar archive at / (as root) before the command")
	cmd.Flags().StringVar(&f.exportTar, "export-tar", "", "write the sandbox's changes (its writable layer) to this tar file after the command")
	return cmd
}

func runDo(cmd *cobra.Command, g *globals, f *doFlags, argv []string) (err error) {
	timeout := f.create.timeout
	f.create.timeout = 0
	req, err := f.create.request()
	if err != nil {
		return err
	}
	if timeout < 0 {
		return fmt.Errorf("--timeout %s: must not be negative", timeout)
	}
	if timeout > 0 {
		req.Timeout = (timeout + doLifetimeSlack).String()
	}
	opts, err := f.exec.options(cmd, argv)
	if err != nil {
		return err
	}
	opts.Timeout = timeout
	var importFile *os.File
	if f.importTar != "" {
		if importFile, err = os.Open(f.importTar); err != nil {
			return fmt.Errorf("--import-tar: %w", err)
		}
		defer importFile.Close()
	}
	if f.exportTar != "" {
		if err := checkWritableDir(f.exportTar); err != nil {
			return fmt.Errorf("--export-tar: %w", err)
		}
	}
	// A name chosen here lets teardown find the sandbox even when the
	// create response is lost (Ctrl-C or a dropped connection mid-create).
	ownName := req.Name == ""
	if ownName {
		req.Name = "do-" + strings.ToLower(rand.Text()[:16])
		if g.idemKey != "" {
			// A retry must send the same create: the name comes from the key.
			sum := sha256.Sum256([]byte(g.idemKey))
			req.Name = "do-" + hex.EncodeToString(sum[:8])
		}
	}
	if req.Labels == nil {
		req.Labels = map[string]string{}
	}
	req.Labels["paddock.dev/ephemeral"] = "true"

	ctx := cmd.Context()
	c := g.client()
	if err := prepareCreate(ctx, c, req, cmd.ErrOrStderr()); err != nil {
		return err
	}
	sb, err := c.Create(ctx, req)
	if err != nil {
		if ownName && (ctx.Err() != nil || errors.Is(err, paddock.ErrUnavailable)) {
			teardown(ctx, cmd, c, req.Name, true)
		}
		return err
	}
	defer func() {
		if terr := teardown(ctx, cmd, c, sb.ID, false); terr != nil && err == nil {
			err = terr
		}
	}()
	if importFile != nil {
		if err := c.TarIn(ctx, sb.ID, "/", importFile, paddock.AsUser("root")); err != nil {
			return fmt.Errorf("--import-tar: %w", err)
		}
	}
	res, err := c.Exec(ctx, sb.ID, opts)
	if err != nil {
		return err
	}
	if f.exportTar != "" {
		if err := exportLayer(ctx, c, sb.ID, f.exportTar); err != nil {
			return fmt.Errorf("--export-tar: %w", err)
		}
	}
	return exitWith(res)
}

// teardown destroys the sandbox under a context that outlives the
// command's, so Ctrl-C still cleans up.
func teardown(ctx context.Context, cmd *cobra.Command, c *paddock.Client, ref string, quietIfMissing bool) error {
	tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), teardownTimeout)
	defer cancel()
	err := c.Delete(tctx, ref)
	if err == nil || (quietIfMissing && errors.Is(err, paddock.ErrNotFound)) {
		return nil
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "paddock: could not destroy sandbox %s: %v (remove it with `paddock rm %s`)\n", ref, err, ref)
	return fmt.Errorf("destroy sandbox %s: %w", ref, err)
}

// checkWritableDir fails early, before any sandbox exists, when the file
// cannot be written at all.
func checkWritableDir(file string) error {
	st, err := os.Stat(filepath.Dir(file))
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return fmt.Errorf("%s is not a directory", filepath.Dir(file))
	}
	return nil
}

// exportLayer writes the layer to a temporary file and renames it into
// place, so a failed export never leaves a truncated archive under the name.
func exportLayer(ctx context.Context, c *paddock.Client, id, dst string) error {
	tmp, err := os.CreateTemp(filepath.Dir(dst), "."+filepath.Base(dst)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := c.ExportLayer(ctx, id, tmp); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), dst)
}
