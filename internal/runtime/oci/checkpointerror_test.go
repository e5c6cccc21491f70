package oci

import (
	"errors"
	"strings"
	"testing"

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
