package backups

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/config"
	"github.com/paddock-dev/paddock/internal/controller/rules"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/objstore"
	"github.com/paddock-dev/paddock/internal/store"
)

// storageS3 is the API name of S3-compatible backup storage. A record of
// an S3 backup stores "s3://<bucket>/<key>" in its Storage column, so the
// object is found again even after the daemon's prefix changes.
const storageS3 = "s3"

// s3State holds the S3 client, built on first use from the config.
type s3State struct {
	once   sync.Once
	client *objstore.Client
	err    error
}

// s3Client returns the configured client, or ErrUnavailable saying S3 is
// not configured.
func (s *Service) s3Client() (*objstore.Client, error) {
	cfg := s.s3cfg
	if !cfg.Enabled() {
		return nil, fmt.Errorf("S3 backup storage is not configured on this daemon (set PADDOCK_BACKUP_S3_ENDPOINT and PADDOCK_BACKUP_S3_BUCKET): %w", errdefs.ErrUnavailable)
	}
	s.s3.once.Do(func() {
		s.s3.client, s.s3.err = objstore.New(objstore.Options{
			Endpoint: cfg.Endpoint, Region: cfg.Region, PathStyle: cfg.PathStyle,
			Credentials: objstore.Credentials{
				AccessKeyID: cfg.AccessKeyID, SecretAccessKey: cfg.SecretAccessKey, SessionToken: cfg.SessionToken,
			},
			Logger: s.log.With("part", "s3"),
		})
	})
	if s.s3.err != nil {
		return nil, fmt.Errorf("S3 backup storage: %w", s.s3.err)
	}
	return s.s3.client, nil
}

// backupStore reads a request's store name.
func backupStore(s string) (string, error) {
	switch s {
	case "", storageLocal:
		return storageLocal, nil
	case storageS3:
		return storageS3, nil
	}
	return "", errdefs.Invalid("store %q: want %q or %q", rules.Truncate(s, 40), storageLocal, storageS3)
}

// s3Location splits a record's "s3://bucket/key".
func s3Location(storage string) (bucket, key string, ok bool) {
	rest, ok := strings.CutPrefix(storage, "s3://")
	if !ok {
		return "", "", false
	}
	bucket, key, ok = strings.Cut(rest, "/")
	return bucket, key, ok && objstore.ValidBucket(bucket) && objstore.ValidKey(key)
}

func (s *Service) s3Key(id string) string {
	return s.s3cfg.Prefix + "backups/" + id + ".tar.gz"
}

// uploadBackup puts a finished local archive into the bucket, under
// bk.ID, and points bk's Storage at it. Nothing is recorded here: a
// failure leaves no record, and the caller removes the local file.
func (s *Service) uploadBackup(ctx context.Context, bk *store.Backup, path string) error {
	cl, err := s.s3Client()
	if err != nil {
		return err
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("backup %s: reopen archive: %w", bk.ID, err)
	}
	defer f.Close()
	bucket, key := s.s3cfg.Bucket, s.s3Key(bk.ID)
	// An upload is not abandoned half-way when the caller goes away; it is
	// bounded instead.
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Hour)
	defer cancel()
	if err := cl.Put(uctx, bucket, key, f, bk.SizeBytes); err != nil {
		return fmt.Errorf("backup %s: upload to S3: %w", bk.ID, err)
	}
	bk.Storage = "s3://" + bucket + "/" + key
	return nil
}

// openArchive returns a backup's archive as a local file whose sha256 has
// been checked against the record, positioned at its start, and a func
// that closes (and for S3, removes) it.
func (s *Service) openArchive(ctx context.Context, b *store.Backup) (*os.File, func(), error) {
	if b.Storage == storageLocal {
		f, err := os.Open(s.backupFile(b.ID))
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return nil, nil, fmt.Errorf("backup %s: its archive is missing from the backup store: %w", b.ID, errdefs.ErrFailedPrecondition)
			}
			return nil, nil, fmt.Errorf("backup %s: %w", b.ID, err)
		}
		if err := verifyArchive(b, f, -1); err != nil {
			f.Close()
			return nil, nil, err
		}
		return f, func() { f.Close() }, nil
	}
	bucket, key, ok := s3Location(b.Storage)
	if !ok {
		return nil, nil, fmt.Errorf("backup %s: its record names an unknown storage: %w", b.ID, errdefs.ErrFailedPrecondition)
	}
	cl, err := s.s3Client()
	if err != nil {
		return nil, nil, err
	}
	if err := os.MkdirAll(s.dir(), 0o700); err != nil {
		return nil, nil, fmt.Errorf("backup store: %w", err)
	}
	// The object is spooled to a private file so its checksum is known
	// before anything is written into the sandbox.
	f, err := os.CreateTemp(s.dir(), b.ID+".*.dl.tmp")
	if err != nil {
		return nil, nil, fmt.Errorf("backup store: %w", err)
	}
	cleanup := func() { f.Close(); os.Remove(f.Name()) }
	body, _, err := cl.Get(ctx, bucket, key)
	if err != nil {
		cleanup()
		if errors.Is(err, errdefs.ErrNotFound) {
			return nil, nil, fmt.Errorf("backup %s: its object is missing from S3: %v: %w", b.ID, err, errdefs.ErrFailedPrecondition)
		}
		return nil, nil, fmt.Errorf("backup %s: %w", b.ID, err)
	}
	// One byte more than recorded is enough to know it does not match.
	_, err = io.Copy(f, io.LimitReader(body, b.SizeBytes+1))
	body.Close()
	if err != nil {
		cleanup()
		return nil, nil, fmt.Errorf("backup %s: download from S3: %v: %w", b.ID, err, errdefs.ErrUnavailable)
	}
	if err := verifyArchive(b, f, b.SizeBytes); err != nil {
		cleanup()
		return nil, nil, err
	}
	return f, cleanup, nil
}

// verifyArchive hashes f from its start and compares with the record, then
// rewinds it. maxSize >= 0 also bounds what is read.
func verifyArchive(b *store.Backup, f *os.File, maxSize int64) error {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return fmt.Errorf("backup %s: read archive: %w", b.ID, err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != b.SHA256 {
		where := "its archive"
		if b.Storage != storageLocal {
			where = "its S3 object"
		}
		return fmt.Errorf("backup %s is corrupt: %s has sha256 %s, recorded %s; nothing was restored: %w",
			b.ID, where, got, b.SHA256, errdefs.ErrFailedPrecondition)
	}
	_, err := f.Seek(0, io.SeekStart)
	return err
}

// removeArchive deletes a backup's bytes. For S3 a failure is returned so
// the record is kept and expiry tries again, instead of orphaning the
// object.
func (s *Service) removeArchive(ctx context.Context, b *store.Backup) error {
	if b.Storage == storageLocal {
		if err := os.Remove(s.backupFile(b.ID)); err != nil && !errors.Is(err, os.ErrNotExist) {
			s.log.Warn("remove backup archive", "backup", b.ID, "err", err)
		}
		return nil
	}
	bucket, key, ok := s3Location(b.Storage)
	if !ok {
		return nil
	}
	cl, err := s.s3Client()
	if err != nil {
		return err
	}
	if err := cl.Delete(ctx, bucket, key); err != nil {
		return fmt.Errorf("backup %s: delete its S3 object: %w", b.ID, err)
	}
	return nil
}

// storageAPI splits a record's storage into the API's store name and
// location.
func storageAPI(storage string) (name, location string) {
	if storage == storageLocal || storage == "" {
		return storageLocal, ""
	}
	if strings.HasPrefix(storage, "s3://") {
		return storageS3, storage
	}
	return storage, ""
}

// S3Info describes the configured S3 backup storage, without credentials.
func (s *Service) S3Info() *api.S3Info {
	return s3Info(s.s3cfg)
}

func s3Info(s config.BackupS3) *api.S3Info {
	if !s.Enabled() {
		return nil
	}
	region := s.Region
	if region == "" {
		region = "us-east-1"
	}
	return &api.S3Info{Endpoint: s.Endpoint, Bucket: s.Bucket, Prefix: s.Prefix, Region: region, PathStyle: s.PathStyle}
}

func storageOf(storage string) string {
	name, _ := storageAPI(storage)
	return name
}

// sweepS3Orphans deletes backup objects under the daemon's prefix that no
// record names and that are older than orphanAge: left by a daemon killed
// between uploading and recording. Younger ones may be an upload in
// progress.
func (s *Service) sweepS3Orphans(ctx context.Context) {
	if !s.s3cfg.Enabled() {
		return
	}
	cl, err := s.s3Client()
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	prefix := s.s3cfg.Prefix + "backups/"
	objs, err := cl.List(ctx, s.s3cfg.Bucket, prefix, 100000)
	if err != nil {
		s.log.Warn("S3 backup sweep", "err", err)
		return
	}
	for _, o := range objs {
		id, ok := strings.CutSuffix(strings.TrimPrefix(o.Key, prefix), ".tar.gz")
		if !ok || !backupIDRE.MatchString(id) || o.LastModified.IsZero() || time.Since(o.LastModified) < orphanAge {
			continue
		}
		if _, err := s.st.GetBackup(ctx, id); !errors.Is(err, errdefs.ErrNotFound) {
			continue
		}
		if err := cl.Delete(ctx, s.s3cfg.Bucket, o.Key); err != nil {
			s.log.Warn("S3 backup sweep", "key", o.Key, "err", err)
			continue
		}
		s.log.Info("deleted an S3 backup object no record names", "key", o.Key)
	}
}
