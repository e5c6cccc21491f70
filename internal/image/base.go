package image

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/paddock-dev/paddock/internal/errdefs"
)

// basePackages are installed on top of Debian's minbase variant: a shell,
// the usual text tools, Python with pip and venv (and `python` naming
// python3), git, curl and wget with CA certificates for HTTPS, ps/top and
// ip for looking around, and sudo for the default user. With E2B's base
// template in mind, the tools it installs that Debian packages: a C
// compiler and make (build-essential, for pip packages built from source),
// util-linux and GitHub's gh. Recommends are never installed (mmdebstrap's
// default), which keeps the image to what is named here and its
// dependencies.
var basePackages = []string{
	"bash", "coreutils", "procps", "python3", "git", "curl", "ca-certificates",
	"less", "findutils", "grep", "sed", "tar", "gzip", "xz-utils", "iproute2",
	"sudo", "python-is-python3", "python3-pip", "python3-venv", "util-linux",
	"build-essential", "gh", "wget", "unzip",
}

// codeInterpreterPackages are added to basePackages for the code-interpreter
// image: what E2B's code-interpreter template offers for data work and
// charts, from Debian's packages (pip would need PyPI at run time).
// python3-munkres satisfies fonttools' "scipy or munkres" dependency with a
// small package: apt would otherwise take scipy, and with it a compiler
// toolchain for Python (pythran, boost, OpenBLAS headers), some 350 MB.
var codeInterpreterPackages = []string{
	"python3-numpy", "python3-pandas", "python3-matplotlib", "python3-munkres",
}

// baseDpkgOpts drop manuals and documentation (but not licences) from the
// image; they are half its size of text nobody reads in a sandbox. They
// also apply to packages installed later inside the sandbox.
var baseDpkgOpts = []string{
	"path-exclude=/usr/share/man/*",
	"path-exclude=/usr/share/info/*",
	"path-exclude=/usr/share/doc/*",
	"path-include=/usr/share/doc/*/copyright",
}

// baseHooks run in the finished chroot. The user gets fixed ids so files
// it writes map to the same owner on every host, and may use sudo without
// a password, as E2B's default user may: the sandbox is the boundary, not
// root inside it.
var baseHooks = []string{
	`chroot "$1" groupadd --gid 1000 user`,
	`chroot "$1" useradd --uid 1000 --gid 1000 --create-home --home-dir /home/user --shell /bin/bash --comment user user`,
	`chroot "$1" sh -c 'echo "user ALL=(ALL:ALL) NOPASSWD: ALL" > /etc/sudoers.d/user && chmod 0440 /etc/sudoers.d/user && visudo -c -q'`,
}

// codeInterpreterHooks build matplotlib's font cache as the user, once,
// rather than in every sandbox's first plot (seconds of CPU each time).
var codeInterpreterHooks = []string{
	`chroot "$1" runuser -u user -- env HOME=/home/user MPLBACKEND=Agg python3 -c 'import matplotlib.pyplot'`,
}

// debianImage is the definition of an image mmdebstrap builds: minbase
// with these packages, then baseHooks and its own hooks.
type debianImage struct {
	name     string
	packages []string
	hooks    []string
}

// debianImages are the built-in images made from Debian's packages.
var debianImages = []debianImage{
	{name: NameBase, packages: basePackages},
	{
		name:     NameCodeInterpreter,
		packages: append(slices.Clip(basePackages), codeInterpreterPackages...),
		hooks:    codeInterpreterHooks,
	},
}

// debianRecipeVersion changes whenever what a Debian image is made of
// changes in a way its package list does not show (finishBase, say).
const debianRecipeVersion = 2

// recipe is a digest of everything an image is built from, kept in its
// record: a store holding an image built from another definition (an
// older Paddock, a cache shared between versions) builds it again rather
// than hand out an image that lacks what this version promises.
func (d debianImage) recipe(suite string) string {
	h := sha256.New()
	fmt.Fprintf(h, "debian %d\nsuite %s\n", debianRecipeVersion, suite)
	for _, part := range [][]string{d.packages, baseDpkgOpts, baseHooks, d.hooks} {
		for _, v := range part {
			fmt.Fprintf(h, "%q\n", v)
		}
		h.Write([]byte("--\n"))
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// defaultSourceDateEpoch (2024-01-01) clamps file times when the
// environment sets none, so two builds from the same packages agree.
const defaultSourceDateEpoch = 1704067200

// baseTailLines is how much of mmdebstrap's output a failure carries.
const baseTailLines = 40

// maxLineLen cuts a runaway output line; progress is for people.
const maxLineLen = 1024

func validateMirror(m string) error {
	u, err := url.Parse(m)
	if err != nil || len(m) > 1024 || (u.Scheme != "http" && u.Scheme != "https" && u.Scheme != "file") ||
		strings.ContainsAny(m, " \t\r\n\x00") {
		return errdefs.Invalid("image store: Debian mirror %q must be an http, https or file URL", printable(m))
	}
	return nil
}

func validateSuite(s string) error {
	ok := len(s) > 0 && len(s) <= 32
	for i := 0; ok && i < len(s); i++ {
		c := s[i]
		ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || ((c == '-' || c == '.') && i > 0)
	}
	if !ok {
		return errdefs.Invalid("image store: Debian suite %q is not a suite name", printable(s))
	}
	return nil
}

func sourceDateEpoch() int64 {
	if v, err := strconv.ParseInt(os.Getenv("SOURCE_DATE_EPOCH"), 10, 64); err == nil && v > 0 {
		return v
	}
	return defaultSourceDateEpoch
}

func (s *Store) debianArgs(d debianImage, rootfs string) []string {
	args := []string{
		"--mode=root",
		"--variant=minbase",
		"--format=directory",
		// Every apt and dpkg step as a line of its own, so a long build
		// is seen to move and a failure shows what it was doing.
		"--verbose",
		"--include=" + strings.Join(d.packages, ","),
	}
	for _, o := range baseDpkgOpts {
		args = append(args, "--dpkgopt="+o)
	}
	for _, h := range append(slices.Clip(baseHooks), d.hooks...) {
		args = append(args, "--customize-hook="+h)
	}
	return append(args, s.suite, rootfs, s.mirror)
}

// debianBuilder returns the builder of d.
func (s *Store) debianBuilder(d debianImage) builderFunc {
	return func(ctx context.Context, rootfs string, progress Progress) error {
		return s.buildDebian(ctx, d, rootfs, progress)
	}
}

// buildDebian runs mmdebstrap into rootfs, streaming its output to progress.
func (s *Store) buildDebian(ctx context.Context, d debianImage, rootfs string, progress Progress) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("%s image: building it needs root (mmdebstrap --mode=root): %w", d.name, errdefs.ErrFailedPrecondition)
	}
	bin, err := exec.LookPath("mmdebstrap")
	if err != nil {
		return fmt.Errorf("%s image: mmdebstrap is not installed: %w", d.name, errdefs.ErrFailedPrecondition)
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		return fmt.Errorf("%s image: unshare (util-linux) is not installed: %w", d.name, errdefs.ErrFailedPrecondition)
	}
	// mmdebstrap runs as the first process of a PID namespace of its own,
	// in a mount namespace of its own, so nothing of a build outlives the
	// daemon: if the daemon dies, unshare gets SIGKILL (Pdeathsig), which
	// kills mmdebstrap (--kill-child), and the kernel then kills every
	// process left in its PID namespace (apt, dpkg, maintainer scripts).
	// The chroot's mounts (proc, sys, dev/pts, dev/shm) exist only in the
	// private mount namespace and vanish with its last process; the host
	// never sees them.
	args := append([]string{"--mount", "--propagation", "private", "--pid", "--fork", "--kill-child=SIGKILL", "--", bin},
		s.debianArgs(d, rootfs)...)
	cmd := exec.CommandContext(ctx, unshare, args...)
	cmd.Env = append(os.Environ(),
		"SOURCE_DATE_EPOCH="+strconv.FormatInt(sourceDateEpoch(), 10),
		"LC_ALL=C.UTF-8",
		"DEBIAN_FRONTEND=noninteractive",
	)
	cmd.Stdin = nil
	// Cancelling kills: the mounts need no unmounting (they go with the
	// namespace), and mmdebstrap, the first process of its PID namespace,
	// would not even see a SIGTERM it has no handler for. The process
	// group reaches unshare and everything forked below it at once.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	// The parent-death signal follows the thread that forked, not the
	// process: a thread the runtime ends (one locked by a goroutine that
	// entered a network namespace) would kill the build. Keep this
	// goroutine on its thread until the build has ended.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()

	pr, pw, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("%s image: %w", d.name, err)
	}
	defer pr.Close()
	cmd.Stdout, cmd.Stderr = pw, pw
	progress(fmt.Sprintf("mmdebstrap %s from %s", s.suite, s.mirror))
	start := time.Now()
	if err := cmd.Start(); err != nil {
		pw.Close()
		return fmt.Errorf("%s image: starting mmdebstrap: %w", d.name, err)
	}
	pw.Close()

	tail := newLineTail(baseTailLines)
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		readLines(pr, func(line string) {
			tail.add(line)
			s.log.Debug("mmdebstrap", "line", line)
			progress(line)
		})
	}()
	werr := cmd.Wait()
	if ctx.Err() != nil {
		// Whatever of the group outlived mmdebstrap goes now.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	select {
	case <-readDone:
	case <-time.After(5 * time.Second):
		// A straggler still holds the pipe; stop reading rather than hang.
		pr.Close()
		<-readDone
	}
	if werr != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("%s image: build stopped: %w", d.name, ctx.Err())
		}
		return fmt.Errorf("%s image: mmdebstrap failed (%v); its last output:\n%s\n%w", d.name,
			werr, strings.Join(tail.lines(), "\n"), errdefs.ErrUnavailable)
	}
	progress(fmt.Sprintf("mmdebstrap finished in %s", time.Since(start).Round(100*time.Millisecond)))
	if err := finishBase(rootfs); err != nil {
		return fmt.Errorf("%s image: %w", d.name, err)
	}
	return nil
}

// finishBase replaces files mmdebstrap copies from the build host: the
// host's resolver, name and hosts table mean nothing inside a sandbox.
func finishBase(rootfs string) error {
	files := []struct{ path, body string }{
		{"etc/hosts", "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"},
		{"etc/hostname", "localhost\n"},
		{"etc/resolv.conf", ""},
	}
	etc := filepath.Join(rootfs, "etc")
	if info, err := os.Lstat(etc); err != nil || !info.IsDir() {
		return errors.New("/etc is missing or not a directory")
	}
	for _, f := range files {
		p := filepath.Join(rootfs, f.path)
		// Remove does not follow a final symlink, and the exclusive create
		// below refuses one, so nothing outside the rootfs is written.
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		if err := writeFileExact(p, []byte(f.body), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// readLines calls fn for each line of r, cutting lines longer than
// maxLineLen and turning carriage-return updates into lines of their own.
func readLines(r io.Reader, fn func(string)) {
	br := bufio.NewReaderSize(r, 64<<10)
	var cur []byte
	flush := func() {
		line := strings.TrimRight(string(cur), " \t")
		cur = cur[:0]
		if line != "" {
			fn(line)
		}
	}
	for {
		b, err := br.ReadByte()
		if err != nil {
			flush()
			return
		}
		switch {
		case b == '\n' || b == '\r':
			flush()
		case len(cur) < maxLineLen:
			cur = append(cur, b)
		}
	}
}

// lineTail keeps the last n lines seen.
type lineTail struct {
	buf  []string
	next int
	full bool
}

func newLineTail(n int) *lineTail { return &lineTail{buf: make([]string, n)} }

func (t *lineTail) add(line string) {
	t.buf[t.next] = line
	t.next = (t.next + 1) % len(t.buf)
	if t.next == 0 {
		t.full = true
	}
}

func (t *lineTail) lines() []string {
	if !t.full {
		return append([]string(nil), t.buf[:t.next]...)
	}
	return append(append([]string(nil), t.buf[t.next:]...), t.buf[:t.next]...)
}
