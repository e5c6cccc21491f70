// Package main is paddock-bench: it starts a private Paddock daemon (or
// uses a running one), measures it against raw runc and podman in the same
// run, and writes the results as Markdown and JSON. It runs as root.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/paddock-dev/paddock/bench"
	"github.com/paddock-dev/paddock/sdk/go/paddock"
)

func main() {
	bench.ServeFUSEIfAsked()
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "paddock-bench:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		paddockBin  = flag.String("paddock", "bin/paddock", "paddock executable to measure")
		socket      = flag.String("socket", "", "use the daemon already serving on this socket instead of starting one (needs -state-dir)")
		url         = flag.String("url", "", "with -socket: that daemon's TCP listener (http://host:port), for the items that need a second caller")
		stateDir    = flag.String("state-dir", "", "with -socket: that daemon's state directory")
		imagesDir   = flag.String("images-dir", os.Getenv("PADDOCK_IMAGES_DIR"), "shared image store for the daemon (default $PADDOCK_IMAGES_DIR, else the daemon's own)")
		n           = flag.Int("n", 30, "recorded iterations per variant")
		warmup      = flag.Int("warmup", 3, "unrecorded warm-up rounds")
		concurrency = flag.Int("concurrency", 50, "creates started at once in the burst")
		idle        = flag.Int("idle", 3, "sandboxes per runtime for the idle-memory figure")
		items       = flag.String("items", strings.Join(bench.AllItems, ","), "measurements to run, comma-separated")
		desc        = flag.String("desc", "paddock vs runc and podman", "short description, used in the results file name")
		outDir      = flag.String("out", "bench/results", "directory for the results")
		repo        = flag.String("repo", ".", "source tree whose commit is recorded")
		verbose     = flag.Bool("v", false, "log debug detail")
		snap1g      = flag.Bool("snapshot-1g", false, "also snapshot 1 GiB of changes in the snapshot item")
	)
	flag.Parse()
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	if os.Geteuid() != 0 {
		return errors.New("must run as root: it starts containers with runc and podman")
	}
	if *n < 1 || *n > 10000 || *warmup < 0 || *warmup > 100 || *concurrency < 1 || *concurrency > 500 || *idle < 1 || *idle > 50 {
		return errors.New("out-of-range flag: want 1<=n<=10000, 0<=warmup<=100, 1<=concurrency<=500, 1<=idle<=50")
	}
	if (*socket == "") != (*stateDir == "") {
		return errors.New("-socket and -state-dir go together")
	}
	bin, err := filepath.Abs(*paddockBin)
	if err != nil {
		return err
	}
	if *imagesDir != "" {
		if *imagesDir, err = filepath.Abs(*imagesDir); err != nil {
			return err
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	work, err := os.MkdirTemp("", "pbench-")
	if err != nil {
		return err
	}
	defer func() {
		if err := bench.RemoveAllUnmounted(work); err != nil {
			log.Error("work directory not removed", "err", err)
		}
	}()

	opts := bench.Options{
		Paddock: bin, Socket: *socket, StateDir: *stateDir, WorkDir: filepath.Join(work, "w"),
		Iterations: *n, Warmup: *warmup, Concurrency: *concurrency, IdleSamples: *idle, SnapshotGiB: *snap1g,
		Items: strings.Split(*items, ","), Logger: log,
	}
	if err := os.MkdirAll(opts.WorkDir, 0o700); err != nil {
		return err
	}
	if *socket == "" {
		logFile, err := os.Create(filepath.Join(work, "daemon.log"))
		if err != nil {
			return err
		}
		defer logFile.Close()
		d, err := bench.StartDaemon(ctx, bench.DaemonOptions{
			Binary: bin, StateDir: filepath.Join(work, "s"), ImagesDir: *imagesDir, Log: logFile, Logger: log,
		})
		if err != nil {
			return fmt.Errorf("%w\n%s", err, tail(logFile.Name()))
		}
		defer func() {
			if err := d.Stop(context.WithoutCancel(ctx)); err != nil {
				log.Error("stop daemon", "err", err)
			}
		}()
		opts.Socket, opts.StateDir, opts.DaemonPid, opts.OwnDaemon = d.Socket, d.StateDir, d.Pid(), true
		opts.URL = d.URL
		opts.ImagesDirs = d.ImagesDirs
	}
	if *socket != "" {
		opts.URL = *url
		if *imagesDir != "" {
			opts.ImagesDirs = append(opts.ImagesDirs, *imagesDir)
		}
		opts.ImagesDirs = append(opts.ImagesDirs, filepath.Join(opts.StateDir, "images"))
	}

	suite, err := bench.NewSuite(opts)
	if err != nil {
		return err
	}
	machine := bench.ProbeMachine(ctx, *repo)
	if h, err := (&paddock.Client{Socket: opts.Socket}).Health(ctx); err == nil {
		machine.Paddock = h.Version
	}
	report, err := suite.Run(ctx)
	if report == nil {
		return err
	}
	if err != nil {
		report.Notes = append(report.Notes, "The run was interrupted: "+err.Error())
	}
	report.Machine = machine
	report.Description = *desc
	path, werr := report.Write(*outDir, time.Now())
	if werr != nil {
		return werr
	}
	if err := report.Markdown(os.Stdout); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "\nresults written to %s (and .json)\n", path)
	return err
}

// tail returns the end of the daemon's log, for an error message.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return "daemon log (end):\n" + string(b)
}
