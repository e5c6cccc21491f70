package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// The FUSE server of the workspace-fuse figures runs in a child process
// (paddock-bench itself, told by these variables): a process that serves
// a FUSE mount must not also start the commands that use it, since a
// fork holds locks the server needs while the child enters the mount.
const (
	fuseSourceEnv = "PADDOCK_BENCH_FUSE_SOURCE"
	fuseMountEnv  = "PADDOCK_BENCH_FUSE_MOUNT"
)

// fuseReady is the line the child prints once its mount serves.
const fuseReady = "fuse loopback ready"

// ServeFUSEIfAsked serves a FUSE loopback mount and exits when this
// process was started as the workspace-fuse figures' server; it returns
// at once otherwise. paddock-bench's main calls it first.
func ServeFUSEIfAsked() {
	src, mnt := os.Getenv(fuseSourceEnv), os.Getenv(fuseMountEnv)
	if src == "" || mnt == "" {
		return
	}
	if err := serveFUSELoopback(src, mnt); err != nil {
		fmt.Fprintln(os.Stderr, "paddock-bench fuse server:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// serveFUSELoopback mounts go-fuse's loopback of src at mnt, says so on
// stdout, and unmounts when stdin ends (the parent closed it or died) or
// on SIGTERM.
func serveFUSELoopback(src, mnt string) error {
	root, err := fs.NewLoopbackRoot(src)
	if err != nil {
		return err
	}
	second := time.Second
	server, err := fs.Mount(mnt, root, &fs.Options{
		EntryTimeout: &second, AttrTimeout: &second,
		MountOptions: fuse.MountOptions{DirectMountStrict: true, FsName: "paddock-bench", Name: "paddock-bench"},
	})
	if err != nil {
		return fmt.Errorf("mount a FUSE loopback at %s (needs /dev/fuse and root): %w", mnt, err)
	}
	fmt.Println(fuseReady)
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(done)
	}()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	select {
	case <-done:
	case <-sig:
	}
	if err := server.Unmount(); err != nil {
		// Busy: detach it; the kernel ends it once its last user goes.
		_ = syscall.Unmount(mnt, syscall.MNT_DETACH)
	}
	return nil
}

// fuseLoopback is a running FUSE loopback mount served by a child.
type fuseLoopback struct {
	cmd   *exec.Cmd
	stdin io.Closer
	mnt   string
}

// startFUSELoopback starts this executable as the server of a loopback
// of src at mnt and waits until it serves.
func startFUSELoopback(ctx context.Context, src, mnt string) (*fuseLoopback, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), fuseSourceEnv+"="+src, fuseMountEnv+"="+mnt)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	f := &fuseLoopback{cmd: cmd, stdin: stdin, mnt: mnt}
	ready := make(chan error, 1)
	go func() {
		line, err := bufio.NewReader(stdout).ReadString('\n')
		if err == nil && strings.TrimSpace(line) != fuseReady {
			err = fmt.Errorf("unexpected first line %q", line)
		}
		ready <- err
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case err = <-ready:
	case <-time.After(15 * time.Second):
		err = errors.New("not serving after 15 s")
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err != nil {
		f.stop()
		return nil, fmt.Errorf("FUSE loopback server: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return f, nil
}

// stop ends the server (it unmounts) and, should it not end in time,
// kills it and detaches the mount.
func (f *fuseLoopback) stop() {
	_ = f.stdin.Close()
	exited := make(chan struct{})
	go func() {
		_ = f.cmd.Wait()
		close(exited)
	}()
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		_ = f.cmd.Process.Kill()
		<-exited
	}
	if isFUSEMount(f.mnt) {
		_ = syscall.Unmount(f.mnt, syscall.MNT_DETACH)
	}
}

// isFUSEMount says whether the mount table has a FUSE mount at mnt.
func isFUSEMount(mnt string) bool {
	b, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		return false
	}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) > 2 && f[1] == filepath.Clean(mnt) && strings.HasPrefix(f[2], "fuse") {
			return true
		}
	}
	return false
}
