// Package backups is the controller's backups subsystem: archives of a
// sandbox's directory kept beside the daemon (local) or in S3-compatible
// object storage (s3.go), filtered on the way (filter.go), owned and seen
// like every object, restored into any sandbox the caller may reach. It
// reaches sandboxes, their ledger and the local store's cap through the
// controller's core (Core).
package backups

import (
	"compress/gzip"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/agent/client"
	"github.com/paddock-dev/paddock/internal/config"
	"github.com/paddock-dev/paddock/internal/controller"
	"github.com/paddock-dev/paddock/internal/controller/rules"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/lazyre"
	"github.com/paddock-dev/paddock/internal/periodic"
	"github.com/paddock-dev/paddock/internal/store"
)

// storageLocal keeps archives as files under the state dir; storageS3
// (s3.go) in S3-compatible object storage.
const storageLocal = "local"

// backupSlack is added to a sandbox's disk size to bound a backup's
// content, since the directory may include image files as well as the
// sandbox's own writes.
const backupSlack = 1 << 30

// orphanAge is how old an archive file without a record (or a temporary
// file) must be before retention deletes it; younger ones may belong to a
// backup being written right now.
const orphanAge = time.Hour

var backupIDRE = lazyre.New(`^bk[a-z0-9]{20}$`)

// Core is what the subsystem uses of the controller (*controller.Controller
// implements it): a sandbox's agent, its ledger, and the local store's
// room, which backups share with snapshots.
type Core interface {
	// Agent reaches a running sandbox ctx's caller may use.
	Agent(ctx context.Context, ref string) (ag *client.Client, id string, done func(), err error)
	// Record appends a daemon-made entry to a sandbox's ledger.
	Record(ctx context.Context, sandboxID string, e api.LedgerEntry) error
	// RecordedSandbox finds a sandbox ctx's caller may see, live or
	// destroyed with its ledger kept.
	RecordedSandbox(ctx context.Context, ref string) (id, name string, err error)
	// StoreRoom refuses adding bytes past the local store's cap, and runs
	// place, if set, with the room held.
	StoreRoom(adding int64, place func() error) error
	// BackupsDir is where local archives are kept (the cap counts them).
	BackupsDir() string
}

var _ Core = (*controller.Controller)(nil)

// Store keeps the records: backups, and the sandboxes they come from.
type Store interface {
	store.BackupStore
	GetSandbox(ctx context.Context, id string) (*store.Sandbox, error)
}

// Options configures the subsystem.
type Options struct {
	Core  Core
	Store Store
	// TTL is how long a backup is kept when its request does not say.
	TTL time.Duration
	// S3 is the object storage for store "s3"; off unless configured.
	S3     config.BackupS3
	Logger *slog.Logger
}

// Service serves backups.
type Service struct {
	core  Core
	st    Store
	ttl   time.Duration
	s3cfg config.BackupS3
	s3    s3State
	log   *slog.Logger
}

// New returns the subsystem.
func New(o Options) *Service {
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Service{core: o.Core, st: o.Store, ttl: o.TTL, s3cfg: o.S3, log: log}
}

// purgeInterval is how often RunRetention deletes expired backups and
// sweeps orphaned archives; it also does at start.
const purgeInterval = time.Hour

// RunRetention deletes expired backups and archives no record names, now
// and every purgeInterval, until ctx ends.
func (s *Service) RunRetention(ctx context.Context) {
	periodic.Run(ctx, purgeInterval, func(ctx context.Context) {
		if err := s.purge(ctx); err != nil {
			s.log.Warn("backup expiry", "err", err)
		}
		s.sweepS3Orphans(ctx) // s3.go
	})
}

func newBackupID() string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, 20)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return "bk" + string(b)
}

func (s *Service) dir() string { return s.core.BackupsDir() }

func (s *Service) backupFile(id string) string {
	return filepath.Join(s.dir(), id+".tar.gz")
}

func validBackupPath(field, p string) error {
	if p == "" {
		return errdefs.Invalid("%s is required", field)
	}
	if len(p) > 4096 || strings.ContainsRune(p, 0) {
		return errdefs.Invalid("%s is longer than 4096 bytes or contains NUL", field)
	}
	return nil
}

func backupUser(u string) (string, error) {
	if u == "" {
		return "", nil // the sandbox's default user
	}
	if !rules.ValidUser(u) {
		return "", errdefs.Invalid("user %q is not a valid user name", u)
	}
	return u, nil
}

// parseBackupTTL reads "72h", "never", or "" (the default).
func (s *Service) parseBackupTTL(v string) (time.Duration, bool, error) {
	switch v {
	case "":
		return s.ttl, false, nil
	case "never":
		return 0, true, nil
	}
	d, err := rules.ParseDuration("ttl", v, time.Second)
	if err != nil {
		return 0, false, err
	}
	if d <= 0 {
		return 0, false, errdefs.Invalid("ttl must be positive, or \"never\"")
	}
	return d, false, nil
}

// Create archives a directory of a sandbox into the local backup
// store. The copy is not atomic against writers in the sandbox (use a
// snapshot for a frozen view); the archive itself is all-or-nothing: it is
// listed only once it is completely written and synced.
func (s *Service) Create(ctx context.Context, ref string, req api.CreateBackupRequest) (*api.Backup, error) {
	if err := validBackupPath("path", req.Path); err != nil {
		return nil, err
	}
	if err := validateExcludes(req.Exclude); err != nil {
		return nil, err
	}
	user, err := backupUser(req.User)
	if err != nil {
		return nil, err
	}
	ttl, never, err := s.parseBackupTTL(req.TTL)
	if err != nil {
		return nil, err
	}
	where, err := backupStore(req.Store)
	if err != nil {
		return nil, err
	}
	if where == storageS3 {
		if _, err := s.s3Client(); err != nil {
			return nil, err
		}
	} else if err := s.core.StoreRoom(0, nil); err != nil {
		return nil, err
	}
	ag, id, done, err := s.core.Agent(ctx, ref)
	if err != nil {
		return nil, err
	}
	defer done()
	rec, err := s.st.GetSandbox(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(s.dir(), 0o700); err != nil {
		return nil, fmt.Errorf("backup store: %w", err)
	}
	bk := &store.Backup{
		ID: newBackupID(), SandboxID: id, SandboxName: rec.Name, Path: req.Path,
		Excludes: slices.Clone(req.Exclude), Storage: storageLocal,
		CreatedAt: time.Now().UTC().Round(0), Owner: controller.Caller(ctx),
	}
	if !never {
		bk.ExpiresAt = bk.CreatedAt.Add(ttl)
	}
	tmp, err := os.CreateTemp(s.dir(), bk.ID+".*.tmp")
	if err != nil {
		return nil, fmt.Errorf("backup store: %w", err)
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed
	defer tmp.Close()

	// agent tar -> filter -> gzip -> (file, sha256)
	pr, pw := io.Pipe()
	tarErr := make(chan error, 1)
	go func() {
		err := ag.TarOut(ctx, req.Path, user, pw)
		pw.CloseWithError(err)
		tarErr <- err
	}()
	h := sha256.New()
	counter := &countWriter{w: io.MultiWriter(tmp, h)}
	zw, _ := gzip.NewWriterLevel(counter, gzip.BestSpeed)
	maxBytes := rec.Resources.DiskMB<<20 + backupSlack
	_, ferr := filterTar(pr, zw, bk.Excludes, maxBytes)
	pr.CloseWithError(errors.New("backup stopped reading"))
	terr := <-tarErr
	switch {
	case errors.Is(ferr, errBackupTooLarge):
		return nil, fmt.Errorf("back up %s of sandbox %s: %v: %w", req.Path, id, ferr, errdefs.ErrResourceExhausted)
	case terr != nil:
		return nil, fmt.Errorf("back up %s of sandbox %s: %w", req.Path, id, terr)
	case ferr != nil:
		return nil, fmt.Errorf("back up %s of sandbox %s: %w", req.Path, id, ferr)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("backup store: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		return nil, fmt.Errorf("backup store: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return nil, fmt.Errorf("backup store: %w", err)
	}
	bk.SizeBytes = counter.n
	bk.SHA256 = hex.EncodeToString(h.Sum(nil))
	if where == storageS3 {
		if err := s.uploadBackup(ctx, bk, tmp.Name()); err != nil {
			return nil, err
		}
		if err := s.st.CreateBackup(context.WithoutCancel(ctx), bk); err != nil {
			if rerr := s.removeArchive(context.WithoutCancel(ctx), bk); rerr != nil {
				s.log.Warn("remove unrecorded backup object", "backup", bk.ID, "err", rerr)
			}
			return nil, err
		}
	} else {
		// The quota is checked with the store's lock held, so two backups
		// cannot both pass it on the same free room.
		err := s.core.StoreRoom(bk.SizeBytes, func() error { return os.Rename(tmp.Name(), s.backupFile(bk.ID)) })
		if err != nil {
			return nil, fmt.Errorf("backup store: %w", err)
		}
		syncDir(s.dir())
		if err := s.st.CreateBackup(context.WithoutCancel(ctx), bk); err != nil {
			_ = os.Remove(s.backupFile(bk.ID))
			return nil, err
		}
	}
	_ = s.core.Record(ctx, id, api.LedgerEntry{Kind: api.LedgerBackup, Path: req.Path, Data: map[string]string{
		"backup_id": bk.ID, "sha256": bk.SHA256, "size_bytes": strconv.FormatInt(bk.SizeBytes, 10), "store": where,
	}})
	s.log.Info("backup created", "sandbox", id, "backup", bk.ID, "path", req.Path, "bytes", bk.SizeBytes)
	return toAPIBackup(bk), nil
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// syncDir makes a rename durable; failure only weakens durability.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
}

func toAPIBackup(b *store.Backup) *api.Backup {
	out := &api.Backup{
		ID: b.ID, SandboxID: b.SandboxID, SandboxName: b.SandboxName, Path: b.Path,
		Exclude: b.Excludes, SizeBytes: b.SizeBytes, SHA256: b.SHA256,
		CreatedAt: b.CreatedAt, CreatedBy: b.Owner,
	}
	out.Storage, out.Location = storageAPI(b.Storage)
	if !b.ExpiresAt.IsZero() {
		t := b.ExpiresAt
		out.ExpiresAt = &t
	}
	return out
}

// visibleBackup returns a backup ctx's caller may see; another owner's is
// not found, with the store's own words for a missing one.
func (s *Service) visibleBackup(ctx context.Context, id string) (*store.Backup, error) {
	if !backupIDRE.MatchString(id) {
		return nil, errdefs.Invalid("%q is not a backup id (bk followed by 20 letters or digits)", id)
	}
	b, err := s.st.GetBackup(ctx, id)
	if err != nil {
		return nil, err
	}
	if !controller.Visible(ctx, b.Owner) {
		return nil, errdefs.NotFound("backup %q", id)
	}
	return b, nil
}

// getBackup returns a backup ctx's caller may see that exists and has not
// expired.
func (s *Service) getBackup(ctx context.Context, id string) (*store.Backup, error) {
	b, err := s.visibleBackup(ctx, id)
	if err != nil {
		return nil, err
	}
	if !b.ExpiresAt.IsZero() && !time.Now().Before(b.ExpiresAt) {
		return nil, errdefs.NotFound("backup %s (it expired at %s)", id, b.ExpiresAt.Format(time.RFC3339))
	}
	return b, nil
}

// Get describes one backup.
func (s *Service) Get(ctx context.Context, id string) (*api.Backup, error) {
	b, err := s.getBackup(ctx, id)
	if err != nil {
		return nil, err
	}
	return toAPIBackup(b), nil
}

// List lists unexpired backups ctx's caller may see, of one sandbox
// when ref is set (also of a destroyed one, by id, or by name while its
// ledger is kept). Expired backups are deleted on the way.
func (s *Service) List(ctx context.Context, ref string) ([]api.Backup, error) {
	if err := s.purge(ctx); err != nil {
		s.log.Warn("backup expiry", "err", err)
	}
	var sandboxID string
	if ref != "" {
		id, _, err := s.core.RecordedSandbox(ctx, ref)
		switch {
		case err == nil:
			sandboxID = id
		case errors.Is(err, errdefs.ErrNotFound) && controller.IsID(ref):
			sandboxID = ref
		default:
			return nil, err
		}
	}
	bs, err := s.st.ListBackups(ctx, sandboxID)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	out := make([]api.Backup, 0, len(bs))
	for _, b := range bs {
		if (b.ExpiresAt.IsZero() || now.Before(b.ExpiresAt)) && controller.Visible(ctx, b.Owner) {
			out = append(out, *toAPIBackup(b))
		}
	}
	return out, nil
}

// Delete removes a backup ctx's caller may see.
func (s *Service) Delete(ctx context.Context, id string) error {
	b, err := s.visibleBackup(ctx, id)
	if err != nil {
		return err
	}
	return s.deleteBackup(ctx, b)
}

// deleteBackup removes a backup, whoever owns it. A local archive goes
// after its record (a leftover file is swept by the purge); an S3 object
// goes first, and if that fails the record stays, so the object is never
// orphaned.
func (s *Service) deleteBackup(ctx context.Context, b *store.Backup) error {
	id := b.ID
	if b.Storage != storageLocal {
		if err := s.removeArchive(ctx, b); err != nil {
			return err
		}
	}
	if err := s.st.DeleteBackup(ctx, id); err != nil {
		return err
	}
	if b.Storage == storageLocal {
		return s.removeArchive(ctx, b)
	}
	return nil
}

// Restore extracts a backup into a sandbox (the one it came from or
// any other). The archive's checksum is verified in full before a single
// file is written, so a corrupt archive changes nothing.
func (s *Service) Restore(ctx context.Context, backupID string, req api.RestoreBackupRequest) (*api.Backup, error) {
	if req.Sandbox == "" {
		return nil, errdefs.Invalid("sandbox is required: the id or name of the sandbox to restore into")
	}
	b, err := s.getBackup(ctx, backupID)
	if err != nil {
		return nil, err
	}
	dst := req.Path
	if dst == "" {
		dst = b.Path
	}
	if err := validBackupPath("path", dst); err != nil {
		return nil, err
	}
	user, err := backupUser(req.User)
	if err != nil {
		return nil, err
	}
	f, closeArchive, err := s.openArchive(ctx, b)
	if err != nil {
		return nil, err
	}
	defer closeArchive()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("backup %s: %v: %w", b.ID, err, errdefs.ErrFailedPrecondition)
	}
	ag, id, done, err := s.core.Agent(ctx, req.Sandbox)
	if err != nil {
		return nil, err
	}
	defer done()
	if err := ag.TarIn(ctx, dst, user, zr); err != nil {
		return nil, fmt.Errorf("restore backup %s into %s of sandbox %s: %w", b.ID, dst, id, err)
	}
	_ = s.core.Record(ctx, id, api.LedgerEntry{Kind: api.LedgerBackupRestore, Path: dst, Data: map[string]string{
		"backup_id": b.ID, "from_sandbox": b.SandboxID, "sha256": b.SHA256, "store": storageOf(b.Storage),
	}})
	s.log.Info("backup restored", "backup", b.ID, "sandbox", id, "path", dst)
	return toAPIBackup(b), nil
}

// purge deletes expired backups, and archive files that no record
// names (left by a crash between writing and recording).
func (s *Service) purge(ctx context.Context) error {
	expired, err := s.st.ExpiredBackups(ctx, time.Now())
	if err != nil {
		return err
	}
	s3Down := false
	for _, b := range expired {
		// One backup whose store is down does not hold up the others; its
		// record stays and the next purge tries again. Once S3 is found
		// unreachable, this pass stops asking it (a listing must not wait
		// on retries for every expired backup).
		if b.Storage != storageLocal && s3Down {
			continue
		}
		if err := s.deleteBackup(ctx, b); err != nil {
			if errors.Is(err, errdefs.ErrUnavailable) {
				s3Down = true
			}
			if !errors.Is(err, errdefs.ErrNotFound) {
				s.log.Warn("expired backup not deleted yet", "backup", b.ID, "err", err)
			}
			continue
		}
		s.log.Info("backup expired and deleted", "backup", b.ID, "sandbox", b.SandboxID)
	}
	entries, err := os.ReadDir(s.dir())
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return err
	}
	for _, e := range entries {
		info, err := e.Info()
		if err != nil || time.Since(info.ModTime()) < orphanAge {
			continue
		}
		name := e.Name()
		id, isArchive := strings.CutSuffix(name, ".tar.gz")
		if isArchive {
			if _, err := s.st.GetBackup(ctx, id); !errors.Is(err, errdefs.ErrNotFound) {
				continue
			}
		} else if !strings.HasSuffix(name, ".tmp") {
			continue
		}
		_ = os.Remove(filepath.Join(s.dir(), name))
	}
	return nil
}
