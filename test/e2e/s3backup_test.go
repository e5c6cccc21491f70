package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/objstore"
	"github.com/paddock-dev/paddock/internal/objstore/objstoretest"
	"github.com/paddock-dev/paddock/sdk/go/paddock"
)

// s3Env is the environment that points a daemon at srv's bucket.
func s3Env(srv *objstoretest.Server, endpoint, bucket string) []string {
	return []string{
		"PADDOCK_BACKUP_S3_ENDPOINT=" + endpoint, "PADDOCK_BACKUP_S3_BUCKET=" + bucket,
		"PADDOCK_BACKUP_S3_PREFIX=e2e/", "PADDOCK_BACKUP_S3_PATH_STYLE=true",
		"AWS_ACCESS_KEY_ID=" + srv.AccessKey, "AWS_SECRET_ACCESS_KEY=" + srv.SecretKey,
	}
}

// treeDigest lists a directory's files with their checksums, to compare a
// restored tree with its source.
func treeDigest(t *testing.T, d *daemon, id, dir string) string {
	t.Helper()
	out, code := execOut(t, d, id, "sh", "-c", "cd "+dir+" && find . | sort && find . -type f | sort | xargs md5sum")
	if code != 0 {
		t.Fatalf("list %s: %s", dir, out)
	}
	return out
}

// TestS3Backups: a daemon configured with a real S3-compatible server backs
// up to the bucket, restores into another sandbox with equal contents,
// refuses a tampered object, deletes the object on rm and on expiry, and
// shows its S3 settings (never the keys) in info.
func TestS3Backups(t *testing.T) {
	srv := objstoretest.Start(t)
	const bucket = "paddock-e2e"
	s3, err := objstore.New(objstore.Options{Endpoint: srv.Endpoint, PathStyle: true,
		Credentials: objstore.Credentials{AccessKeyID: srv.AccessKey, SecretAccessKey: srv.SecretKey}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t, 8*time.Minute)
	if err := s3.CreateBucket(ctx, bucket); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, daemonOpts{env: s3Env(srv, srv.Endpoint, bucket)})

	info := d.must("info")
	if !strings.Contains(info, srv.Endpoint) || !strings.Contains(info, bucket) {
		t.Fatalf("info does not show the S3 endpoint and bucket:\n%s", info)
	}
	infoJSON := d.must("info", "--json")
	if strings.Contains(infoJSON+info, srv.SecretKey) || strings.Contains(infoJSON+info, srv.AccessKey) {
		t.Fatal("info shows an S3 credential")
	}

	src := create(t, d, api.CreateSandboxRequest{Image: "busybox"})
	if out, code := execOut(t, d, src.ID, "sh", "-c", `set -e; mkdir -p /home/user/p/sub /home/user/p/skip
		echo one > /home/user/p/a.txt; dd if=/dev/urandom of=/home/user/p/sub/r.bin bs=1k count=300 2>/dev/null
		echo s > /home/user/p/skip/s; ln -s a.txt /home/user/p/link`); code != 0 {
		t.Fatalf("setup: %s", out)
	}
	bkID := strings.TrimSpace(d.must("backup", "create", src.ID, "/home/user/p", "--store", "s3", "--exclude", "skip", "--ttl", "72h"))
	bk, err := d.client.GetBackup(ctx, bkID)
	if err != nil {
		t.Fatal(err)
	}
	key := "e2e/backups/" + bkID + ".tar.gz"
	if bk.Storage != "s3" || bk.Location != "s3://"+bucket+"/"+key {
		t.Fatalf("backup storage %q location %q", bk.Storage, bk.Location)
	}
	if oi, err := s3.Head(ctx, bucket, key); err != nil || oi.Size != bk.SizeBytes {
		t.Fatalf("object %s: %+v, %v; want %d bytes", key, oi, err, bk.SizeBytes)
	}
	if _, err := os.Stat(filepath.Join(d.stateDir, "backups", bkID+".tar.gz")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("an S3 backup left a local archive: %v", err)
	}
	if ls := d.must("backup", "ls"); !strings.Contains(ls, bkID) || !strings.Contains(ls, "s3") {
		t.Fatalf("backup ls:\n%s", ls)
	}

	dst := create(t, d, api.CreateSandboxRequest{Image: "busybox"})
	d.must("backup", "restore", bkID, dst.ID, "--path", "/home/user/q")
	execOut(t, d, src.ID, "rm", "-rf", "/home/user/p/skip")
	if got, want := treeDigest(t, d, dst.ID, "/home/user/q"), treeDigest(t, d, src.ID, "/home/user/p"); got != want {
		t.Fatalf("restored tree differs:\n%s\nwant\n%s", got, want)
	}
	_, l := ledgerKinds(t, d, dst.ID)
	var found bool
	for _, e := range l.Entries {
		found = found || (e.Kind == api.LedgerBackupRestore && e.Data["backup_id"] == bkID && e.Data["store"] == "s3")
	}
	if !found {
		t.Fatalf("no backup_restore entry naming %s in %+v", bkID, l.Entries)
	}
	if strings.Contains(d.must("ledger", dst.ID, "--json"), srv.SecretKey) {
		t.Fatal("the ledger carries the S3 secret")
	}

	// A tampered object is refused and writes nothing.
	rc, _, err := s3.Get(ctx, bucket, key)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		t.Fatal(err)
	}
	body[len(body)/2] ^= 0xff
	if err := s3.Put(ctx, bucket, key, bytes.NewReader(body), int64(len(body))); err != nil {
		t.Fatal(err)
	}
	_, err = d.client.RestoreBackup(ctx, bkID, api.RestoreBackupRequest{Sandbox: dst.ID, Path: "/home/user/tampered"})
	if !errors.Is(err, paddock.ErrFailedPrecondition) || !strings.Contains(err.Error(), "corrupt") {
		t.Fatalf("restore of a tampered object: %v, want failed precondition saying corrupt", err)
	}
	if _, code := execOut(t, d, dst.ID, "test", "-e", "/home/user/tampered"); code == 0 {
		t.Fatal("a tampered backup wrote files")
	}
	d.must("backup", "rm", bkID)
	if _, err := s3.Head(ctx, bucket, key); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("backup rm left the object: %v", err)
	}

	// Expiry deletes the object.
	expID := strings.TrimSpace(d.must("backup", "create", src.ID, "/home/user/p", "--store", "s3", "--ttl", "1s"))
	expKey := "e2e/backups/" + expID + ".tar.gz"
	if _, err := s3.Head(ctx, bucket, expKey); err != nil {
		t.Fatalf("object of the expiring backup: %v", err)
	}
	time.Sleep(1500 * time.Millisecond)
	if strings.Contains(d.must("backup", "ls"), expID) {
		t.Fatal("an expired backup is listed")
	}
	if _, err := s3.Head(ctx, bucket, expKey); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("expiry left the object: %v", err)
	}
	if objs, err := s3.List(ctx, bucket, "e2e/", 0); err != nil || len(objs) != 0 {
		t.Fatalf("objects left in the bucket: %+v, %v", objs, err)
	}
}

// TestS3BackupFaults: S3 not configured, and S3 unreachable, are clear
// errors that leave no record and no file behind.
func TestS3BackupFaults(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + l.Addr().String()
	l.Close() // nothing listens there now
	srv := &objstoretest.Server{AccessKey: "k", SecretKey: "unreachable-secret"}
	d := startDaemon(t, daemonOpts{env: s3Env(srv, dead, "paddock-e2e")})
	sb := create(t, d, api.CreateSandboxRequest{Image: "busybox"})
	_, errOut, code := d.run("backup", "create", sb.ID, "/home/user", "--store", "s3")
	if code == 0 || !strings.Contains(errOut, "unavailable") || !strings.Contains(errOut, "paddock-e2e/e2e/backups/") {
		t.Fatalf("backup to an unreachable S3: exit %d, %q; want unavailable naming the bucket/key", code, errOut)
	}
	if strings.Contains(errOut, srv.SecretKey) {
		t.Fatal("the error carries the secret")
	}
	if list, err := d.client.ListBackups(ctxT(t, time.Minute), ""); err != nil || len(list) != 0 {
		t.Fatalf("a failed S3 backup left records: %+v, %v", list, err)
	}
	entries, _ := os.ReadDir(filepath.Join(d.stateDir, "backups"))
	if len(entries) != 0 {
		t.Fatalf("a failed S3 backup left files: %v", entries)
	}

	plain := startDaemon(t, daemonOpts{})
	sb2 := create(t, plain, api.CreateSandboxRequest{Image: "busybox"})
	_, err = plain.client.CreateBackup(ctxT(t, time.Minute), sb2.ID, api.CreateBackupRequest{Path: "/home/user", Store: "s3"})
	if !errors.Is(err, paddock.ErrUnavailable) || !strings.Contains(err.Error(), "not configured") {
		t.Fatalf("--store s3 without S3: %v, want unavailable saying not configured", err)
	}
	if _, errOut, code := plain.run("backup", "create", sb2.ID, "/home/user", "--store", "ftp"); code == 0 || !strings.Contains(errOut, "store") {
		t.Fatalf("--store ftp: exit %d, %q", code, errOut)
	}
	var in api.Info
	if err := json.Unmarshal([]byte(plain.must("info", "--json")), &in); err != nil || in.BackupS3 != nil {
		t.Fatalf("info of a daemon without S3: %+v, %v", in.BackupS3, err)
	}
}
