package cli

import (
	"errors"
	"io"
	"log/slog"
	"os"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/paddock-dev/paddock/internal/daemon"
	"github.com/paddock-dev/paddock/internal/mcp"
)

func newMCPCmd(g *globals) *cobra.Command {
	var (
		f        createFlags
		sandbox  string
		keep     bool
		snapshot bool
		logLevel string
		wsName   string
	)
	cmd := &cobra.Command{
		Use:   "mcp [flags]",
		Short: "Serve Paddock's tools to an MCP client over stdio",
		Long: `Serve Paddock as Model Context Protocol tools on standard input and output, for
MCP clients (coding agents) that start a server as a command. The tools talk to
the daemon like any other client (--socket, --url, --api-key).

The session's default sandbox (used when a tool names none) is created with the
create flags on first use and destroyed when the client disconnects, unless
--keep is given; --sandbox uses an existing sandbox instead (never destroyed).

With --workspace NAME the session works in that workspace instead (created on
first use when missing, never deleted): its tools are run, read_file,
write_file, edit_file, list_dir, history, diff and rollback, and it has no
sandbox tools.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			req, err := f.request()
			if err != nil {
				return err
			}
			if wsName != "" {
				if err := mcp.CheckWorkspaceRef(wsName); err != nil {
					return err
				}
				if sandbox != "" || keep || snapshot {
					return errors.New("--workspace serves a workspace, which has no default sandbox: drop --sandbox, --keep and --snapshot-on-end")
				}
			}
			var level slog.Level
			if err := level.UnmarshalText([]byte(logLevel)); err != nil {
				return err
			}
			// stdout carries the protocol; logs go to stderr only.
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: level}))
			s := mcp.New(mcp.Options{
				Client: g.client(), Default: req, DefaultSandbox: sandbox, KeepDefault: keep, SnapshotDefault: snapshot,
				Logger: log, Version: daemon.Version, Workspace: wsName,
			})
			return s.Run(cmd.Context(), &mcpsdk.IOTransport{Reader: readCloser(cmd.InOrStdin()), Writer: writeCloser(cmd.OutOrStdout())})
		},
	}
	f.register(cmd, "hard lifetime of the default sandbox, e.g. 1h")
	fs := cmd.Flags()
	fs.StringVar(&sandbox, "sandbox", "", "use this existing sandbox (id or name) as the default instead of creating one")
	fs.BoolVar(&keep, "keep", false, "keep the default sandbox when the session ends instead of destroying it")
	fs.BoolVar(&snapshot, "snapshot-on-end", false, "snapshot the default sandbox's files (as mcp-<id>) before destroying it when the session ends")
	fs.StringVar(&wsName, "workspace", "", "work in this workspace (id or name; created when missing) instead of sandboxes")
	fs.StringVar(&logLevel, "log-level", "warn", "log level on stderr: debug, info, warn, error")
	return cmd
}

// readCloser and writeCloser adapt the command's streams; closing the
// process's own stdin or stdout is left to the process's exit.
func readCloser(r io.Reader) io.ReadCloser {
	if rc, ok := r.(io.ReadCloser); ok && r != os.Stdin {
		return rc
	}
	return io.NopCloser(r)
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

func writeCloser(w io.Writer) io.WriteCloser { return nopWriteCloser{w} }
