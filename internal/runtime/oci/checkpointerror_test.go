package oci

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/internal/errdefs"
)

func TestCheckpointError(t *testing.T) {
	dir := t.TempDir() // a file system with room: not taken as full
	panicked := &cmdError{kind: KindRunsc, op: "checkpoint", err: errors.New("exit status 128"),
		stderr: "W1203 saving\npanic: save failed: write pages: bad address\n\ngoroutine 1 [running]:\nmain.save()\n\t/x/kernel.go:735 +0x3de"}
	err := checkpointError(panicked, dir)
	if got := err.Error(); !strings.Contains(got, "panic: save failed: write pages: bad address") || strings.Contains(got, "goroutine") {
		t.Errorf("a sentry panic is reported as %q", got)
	}
	full := &cmdError{kind: KindRunsc, op: "checkpoint", err: errors.New("exit status 1"),
		stderr: "checkpoint failed: write /images/pages.img: no space left on device"}
	if err := checkpointError(full, dir); !errors.Is(err, errdefs.ErrResourceExhausted) {
		t.Errorf("no space left is %v, want resource exhausted", err)
	}
	other := &cmdError{kind: KindRunsc, op: "checkpoint", err: errors.New("exit status 1"), stderr: "container is not running"}
	if err := checkpointError(other, dir); err != other {
		t.Errorf("another failure is %v, want it as it was", err)
	}
}

// TestResendUntilPath: the attach is sent again while the socket does not
// show (a dropped signal), a send's error ends the wait, and a socket that
// never shows runs out at the limit.
func TestResendUntilPath(t *testing.T) {
	ctx := context.Background()
	sock := filepath.Join(t.TempDir(), "agent.sock")
	sends := 0
	dropTwice := func() error {
		if sends++; sends == 3 {
			return os.WriteFile(sock, nil, 0o600)
		}
		return nil
	}
	if err := resendUntilPath(ctx, sock, dropTwice, 5*time.Second); err != nil || sends != 3 {
		t.Errorf("two dropped sends: %v after %d sends; want the third to land", err, sends)
	}

	gone := errors.New("no such sandbox")
	if err := resendUntilPath(ctx, filepath.Join(t.TempDir(), "x"), func() error { return gone }, 5*time.Second); !errors.Is(err, gone) {
		t.Errorf("a failing send = %v", err)
	}

	began, sends := time.Now(), 0
	err := resendUntilPath(ctx, filepath.Join(t.TempDir(), "never"), func() error { sends++; return nil }, 600*time.Millisecond)
	if !errors.Is(err, errdefs.ErrDeadlineExceeded) || time.Since(began) < 600*time.Millisecond || time.Since(began) > 3*time.Second || sends < 2 {
		t.Errorf("a socket that never shows: %v after %v and %d sends", err, time.Since(began), sends)
	}
}
