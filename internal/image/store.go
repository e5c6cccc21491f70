package image

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/paddock-dev/paddock/internal/errdefs"
)

// Defaults for Options fields left empty.
const (
	DefaultBusyboxPath = "/bin/busybox"
	DefaultMirror      = "http://deb.debian.org/debian"
	DefaultSuite       = "bookworm"
)

// maxRefFileSize bounds how much of a ref file is read: a valid one is a few
// hundred bytes, anything bigger is damage.
const maxRefFileSize = 4 << 10

// Options configures a Store. Only Dir is required.
type Options struct {
	// Dir is the store's directory, e.g. <state-dir>/images. It is created
	// if missing.
	Dir    string
	Logger *slog.Logger
	// BusyboxPath is the static busybox copied into the busybox image:
	// default /bin/busybox, else "busybox" looked up in PATH.
	BusyboxPath string
	// Mirror is the Debian mirror mmdebstrap downloads from.
	Mirror string
	// Suite is the Debian release of the base image.
	Suite string
}

// Store keeps built images under Dir:
//
//	layers/sha256/<hex>/rootfs  read-only layer, an overlay lower dir
//	refs/<name>.json            name -> digest, created_at, size
//	tmp/                        builds in progress; cleared by New
//
// Every change is a rename, so a crash leaves at most debris in tmp/.
type Store struct {
	dir     string
	log     *slog.Logger
	busybox string
	mirror  string
	suite   string

	// builders maps each builtin name to the function that fills a fresh
	// rootfs directory. Tests replace entries to observe builds.
	builders map[string]builderFunc
	// recipes maps a builtin name to the digest of its definition (base.go),
	// recorded with each build: an image recorded with another is stale.
	// Builtins without an entry (busybox) are never stale.
	recipes map[string]string

	mu      sync.Mutex
	flights map[string]*flight
	active  map[*flight]struct{} // every build still running, waited for or not
	closed  bool
	// importing holds one channel per owner with an import or pull under
	// way, closed when it ends (quota.go).
	importing map[string]chan struct{}
	// layerHolds counts the imports in this process using each layer.
	layerHolds map[string]int
}

// builderFunc fills rootfs, a path that does not exist yet, with an image.
type builderFunc func(ctx context.Context, rootfs string, progress Progress) error

// refFile is the on-disk form of refs/<name>.json.
type refFile struct {
	Name      string    `json:"name"`
	Digest    string    `json:"digest"`
	CreatedAt time.Time `json:"created_at"`
	Size      int64     `json:"size"`
	// Recipe is the definition the image was built from (Store.recipes).
	Recipe string `json:"recipe,omitempty"`
}

// New opens (creating if needed) the store in opts.Dir and removes what
// interrupted builds left in tmp/.
func New(opts Options) (*Store, error) {
	if opts.Dir == "" {
		return nil, errdefs.Invalid("image store: directory is required")
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, errdefs.Invalid("image store: directory %q: %v", opts.Dir, err)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Store{
		dir:     dir,
		log:     log.With("component", "image"),
		busybox: opts.BusyboxPath,
		mirror:  opts.Mirror,
		suite:   opts.Suite,
		flights: make(map[string]*flight),
		active:  make(map[*flight]struct{}),

		importing: make(map[string]chan struct{}),
	}
	if s.busybox == "" {
		s.busybox = DefaultBusyboxPath
		if _, err := os.Stat(s.busybox); err != nil {
			if p, lerr := exec.LookPath("busybox"); lerr == nil {
				s.busybox = p
			}
		}
	}
	if s.mirror == "" {
		s.mirror = DefaultMirror
	}
	if s.suite == "" {
		s.suite = DefaultSuite
	}
	if err := validateMirror(s.mirror); err != nil {
		return nil, err
	}
	if err := validateSuite(s.suite); err != nil {
		return nil, err
	}
	s.builders = map[string]builderFunc{NameBusybox: s.buildBusybox}
	s.recipes = make(map[string]string)
	for _, d := range debianImages {
		s.builders[d.name] = s.debianBuilder(d)
		s.recipes[d.name] = d.recipe(s.suite)
	}
	for _, d := range []string{s.layersDir(), s.refsDir()} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("image store: %w", err)
		}
	}
	// Only root may pass into the store: its layers are images as pulled,
	// setuid programs with their owners included, and an image is a
	// tenant's input. Were the store reachable, any host user (or a
	// sandbox's root escaped into the host as its unprivileged id) could
	// run a root-owned setuid program an image planted.
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, fmt.Errorf("image store: %w", err)
	}
	// Anything in tmp/ while no process holds the build lock is a build
	// that died with its process (recover.go). Another process may share
	// the store and be building right now: then tmp/ is left alone.
	if unlock, ok := tryFlockExclusive(filepath.Join(dir, "builds.lock")); ok {
		err := s.clearInterrupted()
		unlock()
		if err != nil {
			return nil, fmt.Errorf("image store: clearing interrupted builds: %w", err)
		}
	}
	if err := os.MkdirAll(s.tmpDir(), 0o700); err != nil {
		return nil, fmt.Errorf("image store: %w", err)
	}
	return s, nil
}

// Dir returns the store's absolute directory.
func (s *Store) Dir() string { return s.dir }

func (s *Store) layersDir() string { return filepath.Join(s.dir, "layers", "sha256") }
func (s *Store) refsDir() string   { return filepath.Join(s.dir, "refs") }
func (s *Store) tmpDir() string    { return filepath.Join(s.dir, "tmp") }

func (s *Store) layerPath(digest string) string {
	return filepath.Join(s.layersDir(), digest[len(digestPrefix):], "rootfs")
}

// Resolve finds a built image by name or digest. A builtin that has not been
// built yet is ErrNotFound; a malformed reference or unknown name is
// ErrInvalidArgument.
func (s *Store) Resolve(ctx context.Context, ref string) (*Image, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if img, err := s.resolveImported(ctx, ref); img != nil || err != nil {
		return img, err // oci.go
	}
	r, err := ParseRef(ref)
	if err != nil {
		return nil, err
	}
	if r.Digest != "" {
		return s.resolveDigest(r.Digest)
	}
	return s.resolveName(r.Name)
}

func (s *Store) resolveName(name string) (*Image, error) {
	rf, err := s.readRef(name)
	if err != nil {
		return nil, err
	}
	if !dirExists(s.layerPath(rf.Digest)) {
		return nil, errdefs.NotFound("image %q points at layer %s, which is missing; build it again", name, rf.Digest)
	}
	if rf.Recipe != s.recipes[name] {
		// Sandboxes already on it keep it (they pin the digest); new ones
		// get the image this version defines.
		return nil, errdefs.NotFound("image %q was built from another definition of it; build it again", name)
	}
	return s.image(rf), nil
}

func (s *Store) resolveDigest(digest string) (*Image, error) {
	if !dirExists(s.layerPath(digest)) {
		return nil, errdefs.NotFound("image %s is not in the store", digest)
	}
	// A digest that some name points at takes that name and its record.
	for _, name := range Builtin() {
		if rf, err := s.readRef(name); err == nil && rf.Digest == digest {
			return s.image(rf), nil
		}
	}
	info, _ := os.Stat(s.layerPath(digest))
	img := &Image{Name: digest, Digest: digest, Layers: []string{s.layerPath(digest)}}
	if info != nil {
		img.CreatedAt = info.ModTime().UTC()
	}
	return img, nil
}

func (s *Store) image(rf refFile) *Image {
	return &Image{
		Name:      rf.Name,
		Digest:    rf.Digest,
		Layers:    []string{s.layerPath(rf.Digest)},
		SizeBytes: rf.Size,
		CreatedAt: rf.CreatedAt,
	}
}

// readRef loads and checks refs/<name>.json. A missing or damaged ref is
// ErrNotFound, so Ensure builds the image afresh instead of failing forever.
func (s *Store) readRef(name string) (refFile, error) {
	notBuilt := func(why string) error {
		return errdefs.NotFound("image %q %s; build it first", name, why)
	}
	f, err := os.Open(filepath.Join(s.refsDir(), name+".json"))
	if errors.Is(err, fs.ErrNotExist) {
		return refFile{}, notBuilt("is not built yet")
	}
	if err != nil {
		return refFile{}, fmt.Errorf("image %q: reading its record: %w", name, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxRefFileSize+1))
	if err != nil {
		return refFile{}, fmt.Errorf("image %q: reading its record: %w", name, err)
	}
	var rf refFile
	if len(data) > maxRefFileSize || json.Unmarshal(data, &rf) != nil ||
		rf.Name != name || !validDigest(rf.Digest) || rf.Size < 0 {
		s.log.Warn("damaged image record ignored", "image", name)
		return refFile{}, notBuilt("has a damaged record")
	}
	return rf, nil
}

func validDigest(d string) bool {
	return len(d) == len(digestPrefix)+digestHexLen && d[:len(digestPrefix)] == digestPrefix && validHex(d[len(digestPrefix):])
}

// List returns every built image whose record and layer are intact, in
// Builtin order.
func (s *Store) List(ctx context.Context) ([]*Image, error) {
	var out []*Image
	for _, name := range Builtin() {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		img, err := s.resolveName(name)
		if errors.Is(err, errdefs.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, img)
	}
	imported, err := s.listImported(ctx)
	return append(out, imported...), err
}

// Ensure returns the named image, building it first if it is missing.
// Concurrent calls for one name share one build.
func (s *Store) Ensure(ctx context.Context, name string, progress Progress) (*Image, error) {
	if _, err := s.builderFor(name); err != nil {
		return nil, err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, errClosed
	}
	if f := s.flights[name]; f != nil {
		w := f.join(progress)
		s.mu.Unlock()
		return s.wait(ctx, f, w)
	}
	img, err := s.resolveName(name)
	if err == nil || !errors.Is(err, errdefs.ErrNotFound) {
		s.mu.Unlock()
		return img, err
	}
	f, w := s.startLocked(name, false, progress)
	s.mu.Unlock()
	return s.wait(ctx, f, w)
}

// Build builds the named image unconditionally. A build already running for
// the name is waited for first, so its result is not mistaken for this one.
func (s *Store) Build(ctx context.Context, name string, progress Progress) (*Image, error) {
	if _, err := s.builderFor(name); err != nil {
		return nil, err
	}
	for {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return nil, errClosed
		}
		f := s.flights[name]
		if f == nil {
			f, w := s.startLocked(name, true, progress)
			s.mu.Unlock()
			return s.wait(ctx, f, w)
		}
		s.mu.Unlock()
		select {
		case <-f.done:
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for image %q build: %w", name, ctx.Err())
		}
	}
}

func (s *Store) builderFor(name string) (builderFunc, error) {
	r, err := ParseRef(name)
	if err != nil {
		return nil, err
	}
	if r.Name == "" {
		return nil, errdefs.Invalid("image %q: only a name can be built, not a digest", name)
	}
	return s.builders[r.Name], nil
}

// commit turns a finished rootfs under tmp/ into a layer and points name at
// it. work is the build's private directory holding rootfs.
func (s *Store) commit(ctx context.Context, name, work string) (*Image, error) {
	rootfs := filepath.Join(work, "rootfs")
	// The root of the layer is the container's /; builders may leave it
	// with the mode of a temp dir.
	if err := os.Chmod(rootfs, 0o755); err != nil {
		return nil, fmt.Errorf("image %q: %w", name, err)
	}
	sum, err := digestTree(ctx, rootfs)
	if err != nil {
		return nil, fmt.Errorf("image %q: computing digest: %w", name, err)
	}
	// Layer data must be on disk before any record points at it.
	if err := syncFS(rootfs); err != nil {
		return nil, fmt.Errorf("image %q: sync: %w", name, err)
	}
	final := filepath.Dir(s.layerPath(sum.Digest))
	if err := os.Rename(work, final); err != nil {
		if !dirExists(s.layerPath(sum.Digest)) {
			return nil, fmt.Errorf("image %q: storing layer: %w", name, err)
		}
		// Same content is already stored (a rebuild of the same input):
		// keep the one that sandboxes may already use.
		s.log.Debug("layer already stored", "image", name, "digest", sum.Digest)
	} else if err := syncDir(s.layersDir()); err != nil {
		return nil, fmt.Errorf("image %q: sync: %w", name, err)
	}
	rf := refFile{Name: name, Digest: sum.Digest, CreatedAt: time.Now().UTC().Truncate(time.Second), Size: sum.Size, Recipe: s.recipes[name]}
	if err := s.writeRef(rf); err != nil {
		return nil, fmt.Errorf("image %q: %w", name, err)
	}
	return s.image(rf), nil
}

// writeRef replaces refs/<name>.json atomically: temp file in tmp/ (so a
// crash leaves debris only there), fsync, rename, fsync the directory.
func (s *Store) writeRef(rf refFile) error {
	data, err := json.MarshalIndent(rf, "", "  ")
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(s.tmpDir(), "ref-*.json")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	if _, err := f.Write(append(data, '\n')); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(s.refsDir(), rf.Name+".json")); err != nil {
		return err
	}
	return syncDir(s.refsDir())
}

func newWorkDir(parent string) (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	dir := filepath.Join(parent, "build-"+hex.EncodeToString(b[:]))
	if err := os.Mkdir(dir, 0o700); err != nil {
		return "", err
	}
	return dir, nil
}

func dirExists(p string) bool {
	info, err := os.Lstat(p)
	return err == nil && info.IsDir()
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

func syncFS(p string) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	return unix.Syncfs(int(f.Fd()))
}
