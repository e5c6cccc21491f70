package kube

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"

	agentclient "github.com/paddock-dev/paddock/internal/agent/client"
	"github.com/paddock-dev/paddock/internal/agent/wire"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/runtime"
	"github.com/paddock-dev/paddock/internal/snapshot"
)

// A template's build step on this backend runs in a pod, whose writable
// layer the daemon cannot read. So its layer is taken through the agent:
// a tar of the pod's root filesystem (one filesystem: mount points come
// as names alone) compared with the layers the pod was started from,
// which the daemon has. What differs becomes an overlay-format layer as a
// local build's writable layer would be (new and changed entries, 0/0
// whiteouts for what the step removed); the home directory, on a volume
// of its own, is taken whole as a snapshot takes it.

// maxLowerEntries bounds the entries of the layers a build compares with.
const maxLowerEntries = 1 << 21

// lowerEntry is one entry of the merged lower layers.
type lowerEntry struct {
	file  string // host path, for comparing content
	typ   uint32 // S_IFDIR, S_IFREG, S_IFLNK (others are never compared)
	perm  uint32 // permission and setuid/setgid/sticky bits
	uid   int
	gid   int
	size  int64
	mtime int64 // nanoseconds
	link  string
}

// indexLower merges overlay-format layer directories, lowest first, into
// the tree a pod started from them sees: each layer's entries replace the
// ones below, its whiteouts remove a path and its opaque directories
// hide what is below them.
func indexLower(ctx context.Context, layers []string) (map[string]lowerEntry, error) {
	idx := map[string]lowerEntry{}
	hide := func(p string) {
		prefix := p + "/"
		for k := range idx {
			if strings.HasPrefix(k, prefix) {
				delete(idx, k)
			}
		}
	}
	for _, dir := range layers {
		err := filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			if p == dir {
				return nil
			}
			rel, err := filepath.Rel(dir, p)
			if err != nil {
				return err
			}
			rel = filepath.ToSlash(rel)
			var st unix.Stat_t
			if err := unix.Lstat(p, &st); err != nil {
				return err
			}
			typ := st.Mode & unix.S_IFMT
			if typ == unix.S_IFCHR && st.Rdev == 0 {
				delete(idx, rel)
				hide(rel)
				return nil
			}
			if old, ok := idx[rel]; ok && (old.typ == unix.S_IFDIR) != (typ == unix.S_IFDIR) {
				hide(rel)
			}
			if typ == unix.S_IFDIR && opaqueDir(p) {
				hide(rel)
			}
			e := lowerEntry{file: p, typ: typ, perm: st.Mode & 0o7777, uid: int(st.Uid), gid: int(st.Gid), size: st.Size, mtime: st.Mtim.Nano()}
			if typ == unix.S_IFLNK {
				if e.link, err = os.Readlink(p); err != nil {
					return err
				}
			}
			idx[rel] = e
			if len(idx) > maxLowerEntries {
				return fmt.Errorf("the layers hold more than %d entries: %w", maxLowerEntries, errdefs.ErrResourceExhausted)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("read layer %s: %w", filepath.Base(dir), err)
		}
	}
	return idx, nil
}

// rootDiff is the state of one writeRootDiff.
type rootDiff struct {
	idx      map[string]lowerEntry
	maxBytes int64 // the most one file may hold (the scratch file's bound)
	tw       *tar.Writer
	scratch  *os.File
	dirs     map[string]*tar.Header // the root's directories, by path
	emitted  map[string]bool
	seen     map[string]bool
	mounts   []string
	// runtimeMade counts files unchanged since the pod's start that the
	// lower tree lacks (made by the runtime, not a step): left out.
	runtimeMade int
}

// writeRootDiff writes to w, as a tar stream for snapshot.Extract, what
// the agent's one-filesystem tar of the root (r) holds that the lower
// tree (idx) does not: new and changed entries with the directories above
// them, and a whiteout for each highest path of the lower tree the root
// no longer has. Mount points, Paddock's own directory and files the
// agent marks unchanged since the pod started are left alone; if the home
// directory is a mount point (its volume), home() gives its tar, written
// whole under home/user/ as an opaque directory. scratch holds a file's
// content while it is compared; no file may be larger than maxBytes. It
// returns how many files unchanged since the start it left out although
// the lower tree lacks them (the runtime made them, not a step).
func writeRootDiff(ctx context.Context, r io.Reader, w io.Writer, idx map[string]lowerEntry, maxBytes int64, scratch *os.File, home func(w io.Writer) error) (int, error) {
	d := &rootDiff{idx: idx, maxBytes: maxBytes, tw: tar.NewWriter(w), scratch: scratch, dirs: map[string]*tar.Header{}, emitted: map[string]bool{}, seen: map[string]bool{}}
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return 0, fmt.Errorf("read the root's tar: %w", err)
		}
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		if err := d.entry(hdr, tr); err != nil {
			return 0, err
		}
	}
	if err := d.whiteouts(); err != nil {
		return 0, err
	}
	if slices.Contains(d.mounts, homeLayerDir) {
		if err := d.home(home); err != nil {
			return 0, err
		}
	}
	return d.runtimeMade, d.tw.Close()
}

// ownDir is where the agent lives in the pod's image: not the sandbox's.
const ownDir = ".paddock"

func (d *rootDiff) excluded(name string) bool {
	if name == ownDir || strings.HasPrefix(name, ownDir+"/") {
		return true
	}
	for _, m := range d.mounts {
		if name == m || strings.HasPrefix(name, m+"/") {
			return true
		}
	}
	return false
}

func (d *rootDiff) entry(hdr *tar.Header, tr io.Reader) error {
	name := strings.TrimSuffix(hdr.Name, "/")
	if name == "" || name == "." || path.IsAbs(name) || path.Clean(name) != name || name == ".." || strings.HasPrefix(name, "../") {
		return fmt.Errorf("the root's tar names %q: %w", truncName(hdr.Name), errdefs.ErrInvalidArgument)
	}
	if d.seen[name] {
		return fmt.Errorf("the root's tar names %q twice: %w", truncName(name), errdefs.ErrInvalidArgument)
	}
	d.seen[name] = true
	if hdr.PAXRecords[wire.MountPointRecord] != "" {
		d.mounts = append(d.mounts, name)
		return nil
	}
	if d.excluded(name) {
		return nil
	}
	if hdr.PAXRecords[wire.UnchangedRecord] != "" {
		// Not changed since the pod started: the image's, as the lower
		// tree has it. One the lower tree lacks was made by the runtime
		// before the start, not by a step.
		if _, ok := d.idx[name]; !ok {
			d.runtimeMade++
		}
		return nil
	}
	var typ uint32
	switch hdr.Typeflag {
	case tar.TypeDir:
		typ = unix.S_IFDIR
		d.dirs[name] = hdr
	case tar.TypeReg:
		typ = unix.S_IFREG
	case tar.TypeSymlink:
		typ = unix.S_IFLNK
	default:
		return nil
	}
	low, ok := d.idx[name]
	same := ok && low.typ == typ && low.perm == uint32(hdr.Mode)&0o7777 && low.uid == hdr.Uid && low.gid == hdr.Gid
	switch {
	case typ == unix.S_IFLNK:
		same = same && low.link == hdr.Linkname
	case typ == unix.S_IFREG && same && low.size == hdr.Size && low.mtime == hdr.ModTime.UnixNano():
		// Unchanged since the image: its content is not read.
	case typ == unix.S_IFREG:
		equal, err := d.spool(tr, hdr.Size, low, same && low.size == hdr.Size)
		if err != nil {
			return err
		}
		if equal {
			return nil
		}
		if err := d.parents(name); err != nil {
			return err
		}
		if err := d.tw.WriteHeader(layerHeader(hdr, name)); err != nil {
			return err
		}
		if _, err := d.scratch.Seek(0, io.SeekStart); err != nil {
			return err
		}
		_, err = io.CopyN(d.tw, d.scratch, hdr.Size)
		return err
	}
	if same {
		return nil
	}
	if err := d.parents(name); err != nil {
		return err
	}
	if typ == unix.S_IFDIR {
		d.emitted[name] = true
	}
	return d.tw.WriteHeader(layerHeader(hdr, name))
}

// spool copies a file's content to the scratch file and, when compare,
// says whether it is the lower file's. A file larger than the layer may
// hold is refused before a byte of it is written.
func (d *rootDiff) spool(r io.Reader, size int64, low lowerEntry, compare bool) (bool, error) {
	if size < 0 || size > d.maxBytes {
		return false, fmt.Errorf("a file of %d bytes is more than the layer may hold (%d): %w", size, d.maxBytes, errdefs.ErrResourceExhausted)
	}
	if err := d.scratch.Truncate(0); err != nil {
		return false, err
	}
	if _, err := d.scratch.Seek(0, io.SeekStart); err != nil {
		return false, err
	}
	var lf *os.File
	if compare {
		f, err := os.OpenFile(low.file, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
		if err == nil {
			defer f.Close()
			lf = f
		}
	}
	equal := lf != nil
	buf, lbuf := make([]byte, 64<<10), make([]byte, 64<<10)
	for left := size; left > 0; {
		n := int64(len(buf))
		if left < n {
			n = left
		}
		if _, err := io.ReadFull(r, buf[:n]); err != nil {
			return false, fmt.Errorf("read the root's tar: %w", err)
		}
		if _, err := d.scratch.Write(buf[:n]); err != nil {
			return false, err
		}
		if equal {
			if _, err := io.ReadFull(lf, lbuf[:n]); err != nil || !bytes.Equal(buf[:n], lbuf[:n]) {
				equal = false
			}
		}
		left -= n
	}
	return equal, nil
}

// parents writes the directories above name not written yet, as the
// root has them.
func (d *rootDiff) parents(name string) error {
	parts := strings.Split(name, "/")
	for i := 1; i < len(parts); i++ {
		dir := strings.Join(parts[:i], "/")
		if d.emitted[dir] {
			continue
		}
		hdr := d.dirs[dir]
		if hdr == nil {
			return fmt.Errorf("the root's tar names %q before its directory: %w", truncName(name), errdefs.ErrInvalidArgument)
		}
		if err := d.tw.WriteHeader(layerHeader(hdr, dir)); err != nil {
			return err
		}
		d.emitted[dir] = true
	}
	return nil
}

// whiteouts removes what the lower tree has and the root does not: the
// highest such paths only, under directories the root still has.
func (d *rootDiff) whiteouts() error {
	var gone []string
	for name, low := range d.idx {
		if d.seen[name] || d.excluded(name) || low.typ != unix.S_IFDIR && low.typ != unix.S_IFREG && low.typ != unix.S_IFLNK {
			continue
		}
		if parent := path.Dir(name); parent != "." && d.dirs[parent] == nil {
			continue // its directory went, or is no longer one
		}
		gone = append(gone, name)
	}
	slices.Sort(gone)
	for _, name := range gone {
		if err := d.parents(name); err != nil {
			return err
		}
		if err := d.tw.WriteHeader(&tar.Header{Typeflag: tar.TypeChar, Name: name, Mode: 0, Format: tar.FormatPAX, ModTime: time.Unix(0, 0)}); err != nil {
			return err
		}
	}
	return nil
}

// home writes the home volume's tar under home/user/, opaque.
func (d *rootDiff) home(home func(w io.Writer) error) error {
	if err := d.parents(homeLayerDir); err != nil {
		return err
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(home(pw)) }()
	defer pr.Close()
	tr := tar.NewReader(pr)
	if err := d.tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: homeLayerDir + "/", Mode: 0o755, Uid: homeUID, Gid: homeGID,
		ModTime: time.Now(), PAXRecords: map[string]string{opaqueRecord: "y"}, Format: tar.FormatPAX}); err != nil {
		return err
	}
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read the home directory's tar: %w", err)
		}
		switch hdr.Typeflag {
		case tar.TypeDir, tar.TypeReg, tar.TypeSymlink:
		default:
			continue
		}
		name := homeLayerDir + "/" + strings.TrimSuffix(hdr.Name, "/")
		if err := d.tw.WriteHeader(layerHeader(hdr, name)); err != nil {
			return err
		}
		if hdr.Typeflag == tar.TypeReg {
			if _, err := io.CopyN(d.tw, tr, hdr.Size); err != nil {
				return err
			}
		}
	}
}

// layerHeader rebuilds an entry's header for the layer from its type,
// mode, owner, time, size and link target alone.
func layerHeader(hdr *tar.Header, name string) *tar.Header {
	out := &tar.Header{Typeflag: hdr.Typeflag, Name: name, Mode: hdr.Mode & 0o7777, Uid: hdr.Uid, Gid: hdr.Gid,
		ModTime: hdr.ModTime, Format: tar.FormatPAX}
	switch hdr.Typeflag {
	case tar.TypeDir:
		out.Name += "/"
	case tar.TypeReg:
		out.Size = hdr.Size
	case tar.TypeSymlink:
		out.Linkname = hdr.Linkname
	}
	return out
}

func truncName(s string) string {
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}

// SnapshotRootLayer implements runtime.RootLayerSnapshotter: the pod's
// root filesystem as it differs from lower (the host directories of the
// layers it was started from, lowest first), written into dst as an
// overlay-format layer, with the home directory whole.
func (b *Backend) SnapshotRootLayer(ctx context.Context, id, dst string, lower []string) error {
	st, err := b.Status(ctx, id)
	if err != nil {
		return err
	}
	if st != runtime.StatusRunning {
		return fmt.Errorf("sandbox %s is not running: %w", id, errdefs.ErrFailedPrecondition)
	}
	lim, err := b.snapshotLimits(ctx, id)
	if err != nil {
		return err
	}
	idx, err := indexLower(ctx, lower)
	if err != nil {
		return fmt.Errorf("sandbox %s: %w", id, err)
	}
	info, err := b.Info(ctx, id)
	if err != nil {
		return err
	}
	ag := agentclient.NewTCP(info.AgentAddr, info.AgentToken)
	defer ag.Close()
	scratch, err := os.CreateTemp(filepath.Dir(dst), ".rootdiff-")
	if err != nil {
		return err
	}
	defer os.Remove(scratch.Name())
	defer scratch.Close()

	since, err := b.podStarted(ctx, id)
	if err != nil {
		return err
	}
	root, rootW := io.Pipe()
	go func() { rootW.CloseWithError(ag.TarOutOneFS(ctx, "/", agentUser, since.UnixNano(), rootW)) }()
	defer root.Close()
	layer, layerW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := snapshot.Extract(ctx, layer, dst, lim)
		layer.CloseWithError(errLayerDone)
		done <- err
	}()
	maxBytes := lim.MaxBytes
	if maxBytes <= 0 {
		maxBytes = 64 << 30 // snapshot.Extract's own bound
	}
	runtimeMade, werr := writeRootDiff(ctx, root, layerW, idx, maxBytes, scratch, func(w io.Writer) error {
		return ag.TarOut(ctx, homePath, agentUser, w)
	})
	layerW.CloseWithError(werr)
	xerr := <-done
	if werr != nil && !errors.Is(werr, errLayerDone) {
		return fmt.Errorf("sandbox %s: %w", id, werr)
	}
	if xerr != nil {
		return fmt.Errorf("sandbox %s: %w", id, xerr)
	}
	b.o.Logger.Info("build layer taken from the pod's root filesystem", "sandbox", id, "lower_entries", len(idx), "max_bytes", maxBytes,
		"unchanged_since", since, "runtime_files_left_out", runtimeMade)
	return nil
}

// podStarted is when the sandbox's container started, by its node's
// clock (the second it started in: the API gives whole seconds). A file
// of its root filesystem whose inode changed before then is the image's.
// The zero time when the pod does not say: every file is read.
func (b *Backend) podStarted(ctx context.Context, id string) (time.Time, error) {
	name, err := b.sandboxName(ctx, id)
	if err != nil {
		return time.Time{}, err
	}
	var pod corev1.Pod
	if err := b.o.Client.Get(ctx, b.nsName(name), &pod); err != nil {
		return time.Time{}, fmt.Errorf("sandbox %s: %w", id, apiErr(err))
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if r := cs.State.Running; r != nil && !r.StartedAt.IsZero() {
			return r.StartedAt.Time, nil
		}
	}
	return time.Time{}, nil
}

// opaqueDir says whether the layer directory p is marked opaque: by
// overlay's trusted.overlay.opaque, or user.overlay.opaque where the
// daemon that stored it could not set trusted.* attributes (in a pod
// without CAP_SYS_ADMIN; the image and snapshot stores do so).
func opaqueDir(p string) bool {
	for _, name := range []string{"trusted.overlay.opaque", "user.overlay.opaque"} {
		var buf [1]byte
		if n, err := unix.Lgetxattr(p, name, buf[:]); err == nil && n == 1 && buf[0] == 'y' {
			return true
		}
	}
	return false
}
