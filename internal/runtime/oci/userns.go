package oci

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/runtime"
)

// User namespaces for runc and crun sandboxes. Root in the sandbox is a
// uid of its own range on the host (usernsFirst + slot*usernsSize, and the
// 65,536 ids above it), so a process that escapes the container lands as
// an id that owns nothing of the host's and nothing of another sandbox's.
//
// Nothing on disk changes owner: the image layers and the sandbox's own
// disk keep the ids the sandbox sees (0 for its root). The root filesystem
// is an overlay of idmapped mounts of them, made for each start with the
// range that start claimed. A range is claimed only while the sandbox
// runs; the next start may take another.
//
// The idmapped mounts also map the host's root to an id the sandbox never
// has (usernsSize): overlayfs does its own bookkeeping (its work
// directory) with the credentials of whoever mounted it, which is the
// daemon, and an id the mount cannot map fails that with EOVERFLOW. Those
// files belong to no one inside the sandbox: its own namespace does not
// map the host's root, so the kernel shows them as nobody's and honours
// no setuid bit or file capability of theirs.
const (
	usernsSize = 65536
	// usernsFirst is where the ranges start: inside the span systemd sets
	// aside for container ranges (0x00080000-0x6FFFFFFF), well above the
	// ranges useradd gives to /etc/subuid (from 100000) and the ids of
	// systemd's dynamic users.
	usernsFirst = 0x40000000
	// usernsSlots bounds how many sandboxes of every daemon of this host
	// run with a range of their own at once.
	usernsSlots = 4096
)

// usernsClaimDir holds one file per claimed range, shared by every Paddock
// daemon of the host so that two never hand out the same range. It is on
// a tmpfs: after a reboot nothing runs, and nothing is claimed.
const usernsClaimDir = "/run/paddock/userns"

// usernsSetting values for Options.UserNamespaces.
const (
	UsernsAuto = "auto" // on where the kernel and file systems allow it
	UsernsOff  = "off"
)

// usernsState is what the runtime found at its start.
type usernsState struct {
	on       bool
	reason   string // why off, when off
	claimDir string
}

// UserNamespaces reports whether runc and crun sandboxes get a user
// namespace, and when they do not, why.
func (r *Runtime) UserNamespaces() (bool, string) { return r.userns.on, r.userns.reason }

// setupUserns decides, at the runtime's start, whether its sandboxes get
// user namespaces: asked for, a runtime that uses them (gVisor has its own
// kernel between the sandbox and the host's ids), and a kernel that mounts
// the runtime's state directory idmapped and overlays such mounts.
func (r *Runtime) setupUserns(setting string) {
	r.userns = usernsState{claimDir: usernsClaimDir}
	switch {
	case r.kind == KindRunsc:
		r.userns.reason = "gVisor sandboxes run on gVisor's own kernel"
		return
	case setting == UsernsOff:
		r.userns.reason = "turned off in the configuration"
		return
	}
	for _, d := range []string{r.root, filepath.Join(r.root, "sandboxes")} {
		if err := os.Chmod(d, 0o711); err != nil {
			r.userns.reason = err.Error()
			return
		}
	}
	if err := reachable(r.root); err != nil {
		r.userns.reason = "a sandbox's root could not reach its files: " + err.Error()
		r.log.Warn("sandboxes run without user namespaces", "reason", r.userns.reason)
		return
	}
	if err := probeIdmappedOverlay(filepath.Join(r.root, "userns-probe")); err != nil {
		r.userns.reason = "this host cannot overlay idmapped mounts: " + err.Error()
		r.log.Info("sandboxes run without user namespaces", "reason", r.userns.reason)
		return
	}
	r.userns.on = true
	r.sweepClaims()
}

// mountMap is the id map of the idmapped mounts of the range at base: the
// sandbox's ids 0 to usernsSize-1 at base, and for the writable layer the
// host's root too (above). The image's layers do not map it: a layer's
// file owned by id 65536 (an image is a tenant's input) must not show as
// the host's root, setuid bit and all.
func mountMap(base uint32, hostRoot bool) []syscall.SysProcIDMap {
	m := []syscall.SysProcIDMap{{ContainerID: 0, HostID: int(base), Size: usernsSize}}
	if hostRoot {
		m = append(m, syscall.SysProcIDMap{ContainerID: usernsSize, HostID: 0, Size: 1})
	}
	return m
}

// usernsKey names a cached mount namespace: a range, with or without the
// host's root.
type usernsKey struct {
	base     uint32
	hostRoot bool
}

// maxCachedUserns bounds the namespaces kept open for reuse (an open file
// each): a start on a range used before makes no process.
const maxCachedUserns = 512

// mountUserns returns the user namespace for idmapped mounts with
// mountMap(base, hostRoot), made once and kept while there is room; the
// caller calls done when its mounts are made.
func (r *Runtime) mountUserns(base uint32, hostRoot bool) (f *os.File, done func(), err error) {
	k := usernsKey{base, hostRoot}
	r.usernsMu.Lock()
	f = r.usernsCache[k]
	r.usernsMu.Unlock()
	if f != nil {
		return f, func() {}, nil
	}
	if f, err = newUserns(mountMap(base, hostRoot)); err != nil {
		return nil, nil, err
	}
	r.usernsMu.Lock()
	defer r.usernsMu.Unlock()
	if old := r.usernsCache[k]; old != nil {
		f.Close()
		return old, func() {}, nil
	}
	if len(r.usernsCache) >= maxCachedUserns {
		return f, func() { f.Close() }, nil
	}
	if r.usernsCache == nil {
		r.usernsCache = map[usernsKey]*os.File{}
	}
	r.usernsCache[k] = f
	return f, func() {}, nil
}

// newUserns returns a file of a new user namespace with the given map, for
// idmapped mounts. A process has to be made in it: it is stopped at its
// exec (traced, so it never runs a line of its program), its namespace is
// opened and it is killed. The open file keeps the namespace alive.
func newUserns(m []syscall.SysProcIDMap) (*os.File, error) {
	// The tracer is a thread: the child must be forked from, and waited
	// on by, the same one.
	goruntime.LockOSThread()
	defer goruntime.UnlockOSThread()
	cmd := exec.Command("/proc/self/exe")
	cmd.Args = []string{"paddock-userns"}
	cmd.Env = []string{}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER,
		UidMappings: m,
		GidMappings: m,
		Ptrace:      true,
		Pdeathsig:   syscall.SIGKILL,
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("make a user namespace: %w", err)
	}
	f, err := os.Open("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/ns/user")
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if err != nil {
		return nil, fmt.Errorf("open the new user namespace: %w", err)
	}
	return f, nil
}

// mountIdmapped mounts src again at dst, with file owners mapped through
// the user namespace userns: an owner id k on disk shows as whatever host
// id the namespace maps k to.
func mountIdmapped(src, dst string, userns *os.File) error {
	fd, err := unix.OpenTree(unix.AT_FDCWD, src, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		return fmt.Errorf("oci: clone mount of %s: %w", filepath.Base(src), err)
	}
	defer unix.Close(fd)
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_IDMAP, Userns_fd: uint64(userns.Fd())}
	if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH, &attr); err != nil {
		return fmt.Errorf("oci: idmap %s: %w", filepath.Base(src), err)
	}
	if err := unix.MoveMount(fd, "", unix.AT_FDCWD, dst, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("oci: mount idmapped %s: %w", filepath.Base(src), err)
	}
	return nil
}

// idmapLayout is where a start puts its idmapped mounts, all under one
// directory of the sandbox's, which Stop empties.
type idmapLayout struct {
	dir   string // <sandbox>/idmap
	upper string // the writable layer's disk, idmapped
	sys   string // sysfs of the sandbox's network namespace
	// Files the sandbox's mounts are made from, bound here from wherever
	// they are: the runtime makes the container's mounts as the sandbox's
	// root, which may not pass through the daemon's private directories.
	agent, resolv, trust string
}

func (l layout) idmap() idmapLayout {
	d := filepath.Join(l.dir, "idmap")
	return idmapLayout{
		dir: d, upper: filepath.Join(d, "upper"), sys: filepath.Join(d, "sys"),
		agent: filepath.Join(d, "agent"), resolv: filepath.Join(d, "resolv.conf"), trust: filepath.Join(d, "ca-bundle.pem"),
	}
}

// bindFile binds the file src at dst, read-only.
func bindFile(src, dst string) error {
	f, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("oci: create mount point: %w", err)
	}
	f.Close()
	if err := unix.Mount(src, dst, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("oci: bind %s: %w", filepath.Base(dst), err)
	}
	if err := unix.Mount("", dst, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
		return fmt.Errorf("oci: bind %s read-only: %w", filepath.Base(dst), err)
	}
	return nil
}

// reachable reports the first directory from dir up to / that a process
// which is neither the owner nor in the group cannot pass through: the
// runtime resolves the root filesystem's path as the sandbox's root.
func reachable(dir string) error {
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return err
		}
		if fi.Mode().Perm()&0o001 == 0 {
			return fmt.Errorf("%s is not searchable by other users (mode %#o)", d, fi.Mode().Perm())
		}
		if d == "/" {
			return nil
		}
	}
}

// shareWith lets the ids of the range at base (its group) pass through
// the directories of one sandbox, and no one else but root, while the
// runtime sets the container up; base 0 closes them again.
func shareWith(base uint32, dirs ...string) error {
	mode := os.FileMode(0o710)
	if base == 0 {
		mode = 0o700
	}
	for _, d := range dirs {
		if err := os.Chown(d, 0, int(base)); err != nil {
			return fmt.Errorf("oci: chown sandbox dir: %w", err)
		}
		if err := os.Chmod(d, mode); err != nil {
			return fmt.Errorf("oci: chmod sandbox dir: %w", err)
		}
	}
	return nil
}

func (m idmapLayout) lower(i int) string { return filepath.Join(m.dir, "l"+strconv.Itoa(i)) }

// mountIdmappedTree makes the idmapped mounts of one start: the disk
// mounted at scratch (through the user namespace upperNS), and each image
// layer (through layersNS). It returns the layers' paths to overlay,
// lowest first, like the spec's.
func mountIdmappedTree(m idmapLayout, scratch string, layers []string, upperNS, layersNS *os.File) (lowers []string, err error) {
	if err := os.MkdirAll(m.upper, 0o700); err != nil {
		return nil, fmt.Errorf("oci: create idmap dir: %w", err)
	}
	if err := mountIdmapped(scratch, m.upper, upperNS); err != nil {
		return nil, err
	}
	lowers = make([]string, len(layers))
	for i, layer := range layers {
		lowers[i] = m.lower(i)
		if err := os.Mkdir(lowers[i], 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("oci: create idmap dir: %w", err)
		}
		if err := mountIdmapped(layer, lowers[i], layersNS); err != nil {
			return nil, err
		}
	}
	return lowers, nil
}

// unmountIdmapped unmounts whatever a start mounted under the idmap
// directory, deepest first.
func unmountIdmapped(m idmapLayout) error {
	if _, err := os.Lstat(m.dir); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	mounts, err := mountsUnder(m.dir)
	if err != nil {
		return err
	}
	for _, p := range mounts {
		// Each is a mount point as just read; unmount's checks and
		// retries are for one that is busy.
		if unix.Unmount(p, 0) == nil {
			continue
		}
		if err := unmount(p); err != nil {
			return err
		}
	}
	return nil
}

// mountSysfsIn mounts, at dst, a read-only sysfs of the network namespace
// at netns. A sandbox in a user namespace may not mount sysfs itself when
// its network namespace was made outside it (the daemon makes it, to wire
// it up), and the host's /sys would show the host's interfaces.
func mountSysfsIn(netns, dst string) error {
	if err := os.MkdirAll(dst, 0o700); err != nil {
		return fmt.Errorf("oci: create sysfs dir: %w", err)
	}
	ns, err := os.Open(netns)
	if err != nil {
		return fmt.Errorf("oci: open network namespace: %w", err)
	}
	defer ns.Close()
	own, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		return fmt.Errorf("oci: open own network namespace: %w", err)
	}
	defer own.Close()
	goruntime.LockOSThread()
	if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
		goruntime.UnlockOSThread()
		return fmt.Errorf("oci: enter network namespace: %w", err)
	}
	merr := unix.Mount("sysfs", dst, "sysfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "")
	if err := unix.Setns(int(own.Fd()), unix.CLONE_NEWNET); err != nil {
		// The thread stays locked and ends with its goroutine: it must
		// not serve anything else from the sandbox's namespace.
		return fmt.Errorf("oci: leave network namespace: %w", err)
	}
	goruntime.UnlockOSThread()
	if merr != nil {
		return fmt.Errorf("oci: mount sysfs of the sandbox's network: %w", merr)
	}
	return nil
}

// probeIdmappedOverlay checks, in a scratch directory under dir, that this
// kernel and the file system under dir take what a start does: idmapped
// mounts of a directory, one of them mapping the host's root, and an
// overlay of them that the daemon can write to.
func probeIdmappedOverlay(dir string) (err error) {
	_ = os.RemoveAll(dir) // a probe that died left it; nothing in it is mounted after a reboot, and unmounts below
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	m := idmapLayout{dir: filepath.Join(dir, "idmap"), upper: filepath.Join(dir, "idmap", "upper")}
	lower, scratch, root := filepath.Join(dir, "lower"), filepath.Join(dir, "scratch"), filepath.Join(dir, "root")
	defer func() {
		_ = unmount(root)
		if uerr := unmountIdmapped(m); uerr != nil && err == nil {
			err = uerr
		}
		if err == nil {
			err = os.RemoveAll(dir)
		}
	}()
	for _, d := range []string{lower, filepath.Join(scratch, "upper"), filepath.Join(scratch, "work"), root, m.dir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(lower, "f"), nil, 0o644); err != nil {
		return err
	}
	var ns [2]*os.File
	for i := range ns {
		if ns[i], err = newUserns(mountMap(usernsFirst, i == 0)); err != nil {
			return err
		}
		defer ns[i].Close()
	}
	lowers, err := mountIdmappedTree(m, scratch, []string{lower}, ns[0], ns[1])
	if err != nil {
		return err
	}
	if err := mountOverlay(lowers, filepath.Join(m.upper, "upper"), filepath.Join(m.upper, "work"), root); err != nil {
		return err
	}
	var st unix.Stat_t
	if err := unix.Stat(filepath.Join(root, "f"), &st); err != nil {
		return err
	}
	if st.Uid != usernsFirst {
		return fmt.Errorf("a layer's file shows as owned by %d, want %d", st.Uid, usernsFirst)
	}
	// overlayfs mounts read-only when it cannot make its work directory
	// through the idmapped mount; a write shows that.
	if err := os.WriteFile(filepath.Join(root, "w"), nil, 0o644); err != nil {
		return fmt.Errorf("the overlay is not writable: %w", err)
	}
	return nil
}

// claimRange claims a range for sandbox id, preferring the one it had
// last (recorded in the sandbox's directory), and returns its first host
// id. A range is claimed by creating its file in the claim directory,
// which fails if another daemon's sandbox holds it.
func (r *Runtime) claimRange(l layout, id string) (uint32, error) {
	if err := os.MkdirAll(r.userns.claimDir, 0o700); err != nil {
		return 0, fmt.Errorf("oci: create user namespace claim dir: %w", err)
	}
	owner := r.root + "\n" + id + "\n"
	slotFile := filepath.Join(l.dir, "userns-slot")
	try := func(slot int) (bool, error) {
		p := filepath.Join(r.userns.claimDir, strconv.Itoa(slot))
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, 0o600)
		if errors.Is(err, fs.ErrExist) {
			b, rerr := os.ReadFile(p)
			return rerr == nil && string(b) == owner, nil // already ours (a start after a crash)
		}
		if err != nil {
			return false, fmt.Errorf("oci: claim a user namespace range: %w", err)
		}
		_, werr := f.WriteString(owner)
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			os.Remove(p)
			return false, fmt.Errorf("oci: claim a user namespace range: %w", werr)
		}
		return true, nil
	}
	done := func(slot int) (uint32, error) {
		if err := writeFileAtomic(slotFile, []byte(strconv.Itoa(slot)), 0o600); err != nil {
			r.releaseSlot(slot, id)
			return 0, err
		}
		return usernsFirst + uint32(slot)*usernsSize, nil
	}
	if b, err := os.ReadFile(slotFile); err == nil {
		if slot, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && slot >= 0 && slot < usernsSlots {
			if ok, err := try(slot); err != nil {
				return 0, err
			} else if ok {
				return done(slot)
			}
		}
	}
	// A range this runtime gave back lately first: its namespaces for the
	// idmapped mounts are still open (mountUserns), so the start makes no
	// process for them.
	for {
		r.usernsMu.Lock()
		n := len(r.freeSlots)
		slot := -1
		if n > 0 {
			slot, r.freeSlots = r.freeSlots[n-1], r.freeSlots[:n-1]
		}
		r.usernsMu.Unlock()
		if slot < 0 {
			break
		}
		if ok, err := try(slot); err != nil {
			return 0, err
		} else if ok {
			return done(slot)
		}
	}
	var rb [4]byte
	_, _ = rand.Read(rb[:])
	start := int(binary.LittleEndian.Uint32(rb[:]) % usernsSlots)
	for i := 0; i < usernsSlots; i++ {
		slot := (start + i) % usernsSlots
		if ok, err := try(slot); err != nil {
			return 0, err
		} else if ok {
			return done(slot)
		}
	}
	return 0, fmt.Errorf("oci: all %d user namespace ranges of this host are in use: %w", usernsSlots, errdefs.ErrResourceExhausted)
}

// releaseRange gives back the range sandbox id claimed, if any.
func (r *Runtime) releaseRange(l layout, id string) {
	b, err := os.ReadFile(filepath.Join(l.dir, "userns-slot"))
	if err != nil {
		return
	}
	if slot, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && slot >= 0 && slot < usernsSlots {
		r.releaseSlot(slot, id)
	}
}

func (r *Runtime) releaseSlot(slot int, id string) {
	p := filepath.Join(r.userns.claimDir, strconv.Itoa(slot))
	if b, err := os.ReadFile(p); err == nil && string(b) == r.root+"\n"+id+"\n" {
		if os.Remove(p) == nil {
			r.usernsMu.Lock()
			if len(r.freeSlots) < maxCachedUserns {
				r.freeSlots = append(r.freeSlots, slot)
			}
			r.usernsMu.Unlock()
		}
	}
}

// sweepClaims gives back the ranges this runtime's sandboxes claimed and
// no longer hold: a sandbox removed while the daemon was down, or whose
// stop did not finish.
func (r *Runtime) sweepClaims() {
	ents, err := os.ReadDir(r.userns.claimDir)
	if err != nil {
		return
	}
	for _, e := range ents {
		p := filepath.Join(r.userns.claimDir, e.Name())
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		root, id, ok := strings.Cut(strings.TrimSuffix(string(b), "\n"), "\n")
		if !ok || root != r.root || checkID(id) != nil {
			continue // another daemon's
		}
		if _, err := os.Lstat(filepath.Join(r.layout(id).idmap().upper, "upper")); err == nil {
			continue // its writable layer is mounted: it runs, or its stop has to finish
		}
		_ = os.Remove(p)
	}
}

// startIdmapped is a start's part with user namespaces: it claims a range
// for the sandbox, mounts its layers and disk idmapped, binds the files its
// mounts are made from into the sandbox's directory and opens that to the
// range while the runtime sets the container up. It points spec and paths
// at what it mounted, adds its undo steps, and returns the overlay's
// layers, upper and work directories.
func (r *Runtime) startIdmapped(l layout, spec *runtime.Spec, paths *bundlePaths, fresh bool, undo *[]func() error) (layers []string, upper, work string, err error) {
	// Each start maps the layers with the range it claims, so mounts a
	// previous run left are not reused.
	m := l.idmap()
	if !fresh {
		if err := unmount(l.rootfs); err != nil {
			return nil, "", "", err
		}
		if err := unmountIdmapped(m); err != nil {
			return nil, "", "", err
		}
	}
	base, err := r.claimRange(l, spec.ID)
	if err != nil {
		return nil, "", "", err
	}
	*undo = append(*undo, func() error { r.releaseRange(l, spec.ID); return nil })
	*undo = append(*undo, func() error { return unmountIdmapped(m) })
	upperNS, doneUpper, err := r.mountUserns(base, true)
	if err != nil {
		return nil, "", "", err
	}
	defer doneUpper()
	layersNS, doneLayers, err := r.mountUserns(base, false)
	if err != nil {
		return nil, "", "", err
	}
	defer doneLayers()
	if layers, err = mountIdmappedTree(m, l.scratch, spec.Layers, upperNS, layersNS); err != nil {
		return nil, "", "", err
	}
	paths.runDir, paths.idBase = filepath.Join(m.upper, "run"), base
	if err := shareWith(base, l.dir, m.dir); err != nil {
		return nil, "", "", err
	}
	for _, f := range []struct {
		src *string
		dst string
	}{{&paths.agentBinary, m.agent}, {&spec.ResolvConf, m.resolv}, {&spec.TrustBundle, m.trust}} {
		if *f.src == "" {
			continue
		}
		if err := bindFile(*f.src, f.dst); err != nil {
			return nil, "", "", err
		}
		*f.src = f.dst
	}
	if spec.NetNSPath != "" {
		if err := mountSysfsIn(spec.NetNSPath, m.sys); err != nil {
			return nil, "", "", err
		}
		paths.sysfs = m.sys
	}
	return layers, filepath.Join(m.upper, "upper"), filepath.Join(m.upper, "work"), nil
}
