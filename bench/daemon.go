package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/testnet/testranges"
	"github.com/paddock-dev/paddock/sdk/go/paddock"
)

// DaemonOptions says how to start a private Paddock daemon.
type DaemonOptions struct {
	// Binary is the paddock executable.
	Binary string
	// StateDir is the daemon's state directory; it must be short, since
	// agent sockets live below it.
	StateDir string
	// ImagesDir, when set, is shared with other daemons so that the base
	// image is built once per machine.
	ImagesDir string
	// Log receives the daemon's own log; nil discards it.
	Log    io.Writer
	Logger *slog.Logger
	// ReadyTimeout bounds the wait for the API to answer; default 30s.
	ReadyTimeout time.Duration
}

// Daemon is a running `paddock serve` that this process started.
type Daemon struct {
	Socket   string
	StateDir string
	// URL is the daemon's TCP listener on loopback (API keys required
	// there), for items that need a caller other than the socket's.
	URL string
	// ImagesDirs are where the daemon's image layers may be: the shared
	// store it was given, then its own.
	ImagesDirs []string
	Client     *paddock.Client
	cmd        *exec.Cmd
	done       chan error
	log        *slog.Logger
}

// StartDaemon starts `paddock serve` and waits until its API answers.
func StartDaemon(ctx context.Context, o DaemonOptions) (*Daemon, error) {
	if o.Binary == "" || o.StateDir == "" {
		return nil, errors.New("daemon: binary and state dir are required")
	}
	if _, err := os.Stat(o.Binary); err != nil {
		return nil, fmt.Errorf("daemon: paddock binary: %w (run `make build` first)", err)
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(o.StateDir, 0o711); err != nil {
		return nil, err
	}
	sock := filepath.Join(o.StateDir, "p.sock")
	cmd := exec.Command(o.Binary, "serve", "--state-dir", o.StateDir, "--socket", sock)
	cmd.Env = append(os.Environ(), "PADDOCK_PREPARE_DEFAULT_IMAGE=false")
	// Other daemons on the host may hold the default preview port and
	// network range; the run's own picks stay out of their way unless the
	// caller chose.
	// The concurrency items make 50 sandboxes at once with the default
	// disk; the disks are sparse and stay nearly empty, so the run
	// overcommits them rather than measure a refusal (docs/admission.md).
	env := map[string]string{"PADDOCK_PREVIEW_LISTEN": "127.0.0.1:0", "PADDOCK_NETWORK_RANGE": benchNetworkRange, "PADDOCK_DISK_OVERCOMMIT": "64"}
	// A loopback port of its own, for a second caller (an API key).
	listen, err := freeLoopbackAddr()
	if err != nil {
		return nil, err
	}
	env["PADDOCK_LISTEN"] = listen
	// The proxy item's upstream lives in a namespace of the harness's own.
	for k, v := range proxyDaemonEnv() {
		env[k] = v
	}
	for k, v := range env {
		if os.Getenv(k) == "" {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
	}
	if o.ImagesDir != "" {
		cmd.Env = append(cmd.Env, "PADDOCK_IMAGES_DIR="+o.ImagesDir)
	}
	out := o.Log
	if out == nil {
		out = io.Discard
	}
	cmd.Stdout, cmd.Stderr = out, out
	// Its own process group, so a Ctrl-C meant for the harness reaches the
	// daemon only through Stop, in order.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("daemon: start: %w", err)
	}
	d := &Daemon{Socket: sock, StateDir: o.StateDir, Client: &paddock.Client{Socket: sock}, cmd: cmd, done: make(chan error, 1), log: log}
	if v := os.Getenv("PADDOCK_LISTEN"); v != "" {
		listen = v
	}
	d.URL = "http://" + listen
	if o.ImagesDir != "" {
		d.ImagesDirs = append(d.ImagesDirs, o.ImagesDir)
	}
	d.ImagesDirs = append(d.ImagesDirs, filepath.Join(o.StateDir, "images"))
	go func() { d.done <- cmd.Wait() }()

	timeout := o.ReadyTimeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	deadline := time.Now().Add(timeout)
	for {
		hctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := d.Client.Health(hctx)
		cancel()
		if err == nil {
			log.Info("daemon ready", "socket", sock, "pid", cmd.Process.Pid)
			return d, nil
		}
		select {
		case werr := <-d.done:
			d.done <- werr
			return nil, fmt.Errorf("daemon exited before it answered: %v", werr)
		case <-ctx.Done():
			_ = d.Stop(context.WithoutCancel(ctx))
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			_ = d.Stop(context.WithoutCancel(ctx))
			return nil, fmt.Errorf("daemon did not answer within %s: %v", timeout, err)
		}
	}
}

// benchNetworkRange is the private daemon's network range: outside the
// default and apart from the tests' ranges (testranges), since a daemon
// claims its range on the host and refuses one that overlaps another's.
const benchNetworkRange = testranges.Bench

// Pid is the daemon's process id.
func (d *Daemon) Pid() int { return d.cmd.Process.Pid }

// Stop sends SIGTERM and waits; after 20s it kills the daemon.
func (d *Daemon) Stop(ctx context.Context) error {
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-d.done:
		d.done <- err
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.ExitCode() >= 0 {
			return fmt.Errorf("daemon exited with %v", err)
		}
		return nil
	case <-time.After(20 * time.Second):
	case <-ctx.Done():
	}
	_ = d.cmd.Process.Kill()
	err := <-d.done
	d.done <- err
	return fmt.Errorf("daemon did not stop on SIGTERM; killed")
}

// EnsureImage builds a named image unless the daemon already has it, and
// returns it.
func EnsureImage(ctx context.Context, c *paddock.Client, name string) (*api.Image, error) {
	imgs, err := c.Images(ctx)
	if err != nil {
		return nil, err
	}
	for i := range imgs {
		if imgs[i].Name == name {
			return &imgs[i], nil
		}
	}
	return c.BuildImage(ctx, name, nil)
}

// freeLoopbackAddr returns a loopback TCP address no one listens on now
// (the kernel's pick; another process could take it before the daemon
// does, which the daemon's start would then report).
func freeLoopbackAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("daemon: pick a loopback port: %w", err)
	}
	addr := ln.Addr().String()
	return addr, ln.Close()
}
