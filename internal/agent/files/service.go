// Package files is the agent's file service: envd's filesystem.Filesystem
// Connect service (stat, list, make, move, remove, watch), envd's /files
// download and upload (gzip both ways, metadata as xattrs), and Paddock's
// tar streams in and out and tree stream out. Every path is resolved
// against the requesting user's home and everything it creates is that
// user's; every open of a sandbox file goes through safefs. The agent
// (internal/agent) makes one Service and mounts it on its handler; the
// service knows the agent only through the user resolution it is given.
package files

import (
	"context"
	"log/slog"
	"net/http"

	"connectrpc.com/connect"

	"github.com/paddock-dev/paddock/internal/agent/tree"
	"github.com/paddock-dev/paddock/internal/agent/users"
	"github.com/paddock-dev/paddock/proto/gen/filesystem/filesystemconnect"
)

// Options configure a Service. Users and User are required.
type Options struct {
	Logger *slog.Logger
	// Users names the owners of listed entries.
	Users users.DB
	// User resolves the user a request acts as: explicit (envd's username
	// parameter) when given, else the agent's selection for the request.
	User func(ctx context.Context, explicit string) (*users.User, error)
	// MaxTarBytes and MaxTarEntries bound one tar upload.
	MaxTarBytes   int64
	MaxTarEntries int
}

// Service serves a sandbox's files. Make it with New.
type Service struct {
	log      *slog.Logger
	users    users.DB
	userFor  func(ctx context.Context, explicit string) (*users.User, error)
	opts     Options
	watchers *watcherTable
}

// New makes the file service.
func New(opts Options) *Service {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Service{
		log:      opts.Logger,
		users:    opts.Users,
		userFor:  opts.User,
		opts:     opts,
		watchers: newWatcherTable(),
	}
}

// Register mounts the service's Connect service and HTTP routes on mux.
func (s *Service) Register(mux *http.ServeMux, rpcOpts ...connect.HandlerOption) {
	mux.Handle(filesystemconnect.NewFilesystemHandler(s, rpcOpts...))
	mux.HandleFunc("GET /files", s.handleDownload)
	mux.HandleFunc("POST /files", s.handleUpload)
	mux.HandleFunc("GET /paddock/v1/tar", s.handleTarOut)
	mux.HandleFunc("PUT /paddock/v1/tar", s.handleTarIn)
	mux.HandleFunc("GET "+tree.Path, s.handleTreeOut)
}

// Close ends every polled watcher (the agent's shutdown).
func (s *Service) Close() { s.watchers.closeAll() }
