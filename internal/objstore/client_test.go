package objstore_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/objstore"
	"github.com/paddock-dev/paddock/internal/objstore/objstoretest"
)

func newClient(t *testing.T, srv *objstoretest.Server, secret string) *objstore.Client {
	t.Helper()
	c, err := objstore.New(objstore.Options{
		Endpoint: srv.Endpoint, Region: srv.Region, PathStyle: true,
		Credentials: objstore.Credentials{AccessKeyID: srv.AccessKey, SecretAccessKey: secret},
		MaxAttempts: 2, RetryBase: 50 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestRealServer runs every operation against a real S3-compatible server;
// one server for all subtests keeps the suite fast.
func TestRealServer(t *testing.T) {
	srv := objstoretest.Start(t)
	c := newClient(t, srv, srv.SecretKey)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const bucket = "paddock-test"
	if err := c.CreateBucket(ctx, bucket); err != nil {
		t.Fatalf("create bucket: %v", err)
	}

	t.Run("put get head delete", func(t *testing.T) {
		for _, body := range [][]byte{nil, []byte("hello, s3"), bytes.Repeat([]byte{0, 1, 2}, 100000)} {
			key := fmt.Sprintf("objs/a+b=c,d/%d.bin", len(body))
			if err := c.Put(ctx, bucket, key, bytes.NewReader(body), int64(len(body))); err != nil {
				t.Fatalf("put %s: %v", key, err)
			}
			oi, err := c.Head(ctx, bucket, key)
			if err != nil || oi.Size != int64(len(body)) {
				t.Fatalf("head %s = %+v, %v", key, oi, err)
			}
			rc, _, err := c.Get(ctx, bucket, key)
			if err != nil {
				t.Fatalf("get %s: %v", key, err)
			}
			got, err := io.ReadAll(rc)
			rc.Close()
			if err != nil || !bytes.Equal(got, body) {
				t.Fatalf("get %s: %d bytes, %v; want %d bytes", key, len(got), err, len(body))
			}
			if err := c.Delete(ctx, bucket, key); err != nil {
				t.Fatalf("delete: %v", err)
			}
			if _, err := c.Head(ctx, bucket, key); !errors.Is(err, errdefs.ErrNotFound) {
				t.Fatalf("head after delete: %v, want not found", err)
			}
			if _, _, err := c.Get(ctx, bucket, key); !errors.Is(err, errdefs.ErrNotFound) || !strings.Contains(err.Error(), key) {
				t.Fatalf("get after delete: %v, want not found naming the key", err)
			}
		}
		if err := c.Delete(ctx, bucket, "never/was"); err != nil {
			t.Fatalf("delete of a missing object: %v", err)
		}
	})

	t.Run("list pages", func(t *testing.T) {
		for i := range 5 {
			if err := c.Put(ctx, bucket, fmt.Sprintf("list/%d", i), strings.NewReader("x"), 1); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.Put(ctx, bucket, "other/1", strings.NewReader("x"), 1); err != nil {
			t.Fatal(err)
		}
		var keys []string
		token, pages := "", 0
		for {
			p, err := c.ListPage(ctx, bucket, "list/", token, 2)
			if err != nil {
				t.Fatal(err)
			}
			pages++
			for _, o := range p.Objects {
				keys = append(keys, o.Key)
			}
			if p.Next == "" {
				break
			}
			token = p.Next
		}
		if len(keys) != 5 || pages != 3 {
			t.Fatalf("paged listing: %d pages, keys %v; want 3 pages of 5 keys", pages, keys)
		}
		all, err := c.List(ctx, bucket, "list/", 0)
		if err != nil || len(all) != 5 {
			t.Fatalf("List = %d, %v", len(all), err)
		}
	})

	t.Run("multipart over 64 MiB", func(t *testing.T) {
		size := int64(objstore.DefaultMultipartThreshold + 3<<20)
		f := randomFile(t, size)
		want := fileSHA(t, f)
		if err := c.Put(ctx, bucket, "big/blob", f, size); err != nil {
			t.Fatalf("multipart put: %v", err)
		}
		oi, err := c.Head(ctx, bucket, "big/blob")
		if err != nil || oi.Size != size {
			t.Fatalf("head = %+v, %v", oi, err)
		}
		if !strings.Contains(oi.ETag, "-") {
			t.Errorf("ETag %q is not a multipart ETag", oi.ETag)
		}
		rc, _, err := c.Get(ctx, bucket, "big/blob")
		if err != nil {
			t.Fatal(err)
		}
		h := sha256.New()
		n, err := io.Copy(h, rc)
		rc.Close()
		if err != nil || n != size || fmt.Sprintf("%x", h.Sum(nil)) != want {
			t.Fatalf("read back %d bytes, %v; checksum mismatch or short", n, err)
		}
	})

	t.Run("aborted multipart", func(t *testing.T) {
		id, err := c.CreateMultipartUpload(ctx, bucket, "aborted/obj")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.UploadPart(ctx, bucket, "aborted/obj", id, 1, bytes.Repeat([]byte("p"), 5<<20)); err != nil {
			t.Fatal(err)
		}
		if err := c.AbortMultipartUpload(ctx, bucket, "aborted/obj", id); err != nil {
			t.Fatalf("abort: %v", err)
		}
		if _, err := c.UploadPart(ctx, bucket, "aborted/obj", id, 2, []byte("late")); err == nil {
			t.Fatal("a part was accepted into an aborted upload")
		}
		if _, err := c.Head(ctx, bucket, "aborted/obj"); !errors.Is(err, errdefs.ErrNotFound) {
			t.Fatalf("aborted upload left an object: %v", err)
		}
		// A body that fails half-way aborts the upload and leaves nothing.
		size := int64(objstore.DefaultMultipartThreshold + 1)
		err = c.Put(ctx, bucket, "aborted/put", &failingReader{ReadSeeker: randomFile(t, size), failAt: 20 << 20}, size)
		if err == nil {
			t.Fatal("Put of a failing body succeeded")
		}
		if _, err := c.Head(ctx, bucket, "aborted/put"); !errors.Is(err, errdefs.ErrNotFound) {
			t.Fatalf("failed multipart left an object: %v", err)
		}
	})

	t.Run("wrong secret", func(t *testing.T) {
		const wrong = "not-the-secret-xyz"
		bad := newClient(t, srv, wrong)
		err := bad.Put(ctx, bucket, "k", strings.NewReader("x"), 1)
		if !errors.Is(err, errdefs.ErrPermissionDenied) {
			t.Fatalf("err = %v, want permission denied", err)
		}
		var se *objstore.Error
		if !errors.As(err, &se) || se.Code != "SignatureDoesNotMatch" || !strings.Contains(err.Error(), bucket+"/k") {
			t.Fatalf("err = %v: want the S3 code SignatureDoesNotMatch and the bucket/key", err)
		}
		if strings.Contains(err.Error(), wrong) || strings.Contains(err.Error(), srv.SecretKey) {
			t.Fatalf("error text carries a secret: %v", err)
		}
	})

	t.Run("missing bucket", func(t *testing.T) {
		_, err := c.List(ctx, "no-such-bucket", "", 0)
		var se *objstore.Error
		if !errors.Is(err, errdefs.ErrNotFound) || !errors.As(err, &se) || se.Code != "NoSuchBucket" || !strings.Contains(err.Error(), "no-such-bucket") {
			t.Fatalf("err = %v, want NoSuchBucket naming the bucket", err)
		}
	})
}

// failingReader fails reads past failAt, like a disk error mid-upload.
type failingReader struct {
	io.ReadSeeker
	pos, failAt int64
}

func (f *failingReader) Read(p []byte) (int, error) {
	if f.pos >= f.failAt {
		return 0, errors.New("disk went away")
	}
	n, err := f.ReadSeeker.Read(p)
	f.pos += int64(n)
	return n, err
}

func (f *failingReader) Seek(off int64, whence int) (int64, error) {
	n, err := f.ReadSeeker.Seek(off, whence)
	f.pos = n
	return n, err
}

func randomFile(t *testing.T, size int64) *os.File {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), "body"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	r := rand.NewChaCha8([32]byte{1, 2, 3})
	if _, err := io.CopyN(f, r, size); err != nil {
		t.Fatal(err)
	}
	return f
}

func fileSHA(t *testing.T, f *os.File) string {
	t.Helper()
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%x", h.Sum(nil))
}

// A server that fails with 503 twice is retried; one that is not listening
// is an "unavailable" error after the bounded attempts. (A real server
// cannot be made to answer 503 on demand, so this one is a stand-in.)
func TestRetries(t *testing.T) {
	var calls atomic.Int32
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) <= 2 {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, "<Error><Code>SlowDown</Code><Message>busy</Message></Error>")
			return
		}
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	t.Cleanup(hs.Close)
	opts := objstore.Options{Endpoint: hs.URL, PathStyle: true, Credentials: objstore.Credentials{AccessKeyID: "a", SecretAccessKey: "b"}, RetryBase: time.Millisecond}
	c, err := objstore.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Put(context.Background(), "bkt", "k", strings.NewReader("body"), 4); err != nil || calls.Load() != 3 {
		t.Fatalf("put = %v after %d calls; want success on the 3rd", err, calls.Load())
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	opts.Endpoint = "http://" + addr
	opts.MaxAttempts = 2
	c, err = objstore.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	err = c.Put(context.Background(), "bkt", "k", strings.NewReader("body"), 4)
	if !errors.Is(err, errdefs.ErrUnavailable) || !strings.Contains(err.Error(), "bkt/k") {
		t.Fatalf("err = %v, want unavailable naming bkt/k", err)
	}
}

// Over TLS a single PUT streams its body unhashed (UNSIGNED-PAYLOAD, still
// signed); over plain http the payload's sha256 is signed.
func TestPayloadHashByScheme(t *testing.T) {
	var gotHash, gotBody atomic.Value
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		gotHash.Store(r.Header.Get("X-Amz-Content-Sha256"))
		gotBody.Store(string(b))
	})
	for _, tls := range []bool{true, false} {
		var hs *httptest.Server
		if tls {
			hs = httptest.NewTLSServer(h)
		} else {
			hs = httptest.NewServer(h)
		}
		t.Cleanup(hs.Close)
		c, err := objstore.New(objstore.Options{Endpoint: hs.URL, PathStyle: true, HTTPClient: hs.Client(),
			Credentials: objstore.Credentials{AccessKeyID: "a", SecretAccessKey: "b"}})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Put(context.Background(), "bkt", "k", strings.NewReader("payload"), 7); err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("%x", sha256.Sum256([]byte("payload")))
		if tls {
			want = objstore.UnsignedPayload
		}
		if gotHash.Load() != want || gotBody.Load() != "payload" {
			t.Errorf("tls=%v: hash header %v body %v; want %s", tls, gotHash.Load(), gotBody.Load(), want)
		}
	}
}
