package adversarial

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/api"
)

// TestDaemonKilledDuringBaseBuild stops a daemon the way service managers
// do (SIGTERM, then SIGKILL a second later) while it builds Debian's base
// image, with mmdebstrap unpacking packages into the build directory.
// Nothing of the build may keep running, nothing it mounted may stay
// mounted, and the next daemon on the same image store must start and
// build. (The chroot mounts of a later step, left by builders of old, are
// covered in internal/image's TestNewClearsInterruptedBuild: reaching that
// step takes minutes more.)
func TestDaemonKilledDuringBaseBuild(t *testing.T) {
	requireHost(t)
	if _, err := exec.LookPath("mmdebstrap"); err != nil {
		t.Skip("needs mmdebstrap (apt-get install mmdebstrap) to build the base image")
	}
	// A store of its own: the shared image cache is never touched.
	images, err := os.MkdirTemp(tmpRoot, "img")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Whatever the daemon failed to stop is stopped here, so a failure
		// does not leave a builder running on the machine.
		for _, pid := range buildProcs(images) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		_ = os.RemoveAll(images)
	})
	d := startDaemon(t, daemonOpts{imagesDir: images})

	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	deep := make(chan struct{})
	buildDone := make(chan error, 1)
	go func() {
		var closed bool
		_, err := d.client.BuildImage(ctx, "base", func(ev api.BuildEvent) {
			// Packages are being unpacked into the build directory.
			if !closed && strings.Contains(ev.Message, "I: extracting archives") {
				closed = true
				close(deep)
			}
		})
		buildDone <- err
	}()
	select {
	case <-deep:
	case err := <-buildDone:
		t.Fatalf("the base build ended before it unpacked anything: %v", err)
	case <-ctx.Done():
		t.Fatal("the base build did not reach unpacking")
	}
	time.Sleep(3 * time.Second) // well into it
	if procs := buildProcs(images); len(procs) == 0 {
		t.Fatal("no builder process found in the middle of the build")
	} else {
		t.Logf("builder processes before the stop: %v", procs)
	}

	_ = d.Process().Signal(syscall.SIGTERM)
	time.Sleep(time.Second)
	d.kill9()
	t.Logf("build request ended with: %v", <-buildDone)

	deadline := time.Now().Add(10 * time.Second)
	for {
		procs, mounts := buildProcs(images), mountsBelow(images)
		if len(procs) == 0 && len(mounts) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("10 s after the daemon died, its build lives on: processes %v, mounts %v", procs, mounts)
		}
		time.Sleep(100 * time.Millisecond)
	}

	d.start() // fails the test if the daemon cannot start
	if ents, err := os.ReadDir(filepath.Join(images, "tmp")); err != nil || len(ents) != 0 {
		t.Fatalf("the restarted daemon left the interrupted build in tmp/: %v %v", ents, err)
	}
	d.must("images", "build", "busybox")
}

// buildProcs lists the processes working on the image store: by their
// command line (mmdebstrap and unshare name the build's rootfs) or their
// root or working directory (chrooted apt, dpkg, maintainer scripts).
func buildProcs(images string) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		p := filepath.Join("/proc", e.Name())
		cmdline, _ := os.ReadFile(filepath.Join(p, "cmdline"))
		hit := strings.Contains(string(cmdline), images+"/")
		for _, l := range []string{"root", "cwd"} {
			if t, err := os.Readlink(filepath.Join(p, l)); err == nil && strings.HasPrefix(t, images+"/") {
				hit = true
			}
		}
		if hit {
			out = append(out, pid)
		}
	}
	return out
}

// mountsBelow lists the mount points under dir in the test's namespace.
func mountsBelow(dir string) []string {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], dir+"/") {
			out = append(out, f[4])
		}
	}
	return out
}
