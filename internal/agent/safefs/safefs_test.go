package safefs

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/paddock-dev/paddock/internal/errdefs"
)

// TestCheckRegularAfterOpen: a pipe that passed for a file until it was
// opened is refused by the check after the open, and an open that failed
// on one is told as the pipe it is.
func TestCheckRegularAfterOpen(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	// A reader, so the non-blocking open for writing succeeds.
	r, err := os.OpenFile(fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	f, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := CheckRegular(f, fifo); !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), "named pipe") {
		t.Errorf("CheckRegular on a pipe: %v", err)
	}
	// Without a reader the open itself fails; it is told as the pipe it is.
	r.Close()
	_, err = os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0)
	if err := OpenError("create", fifo, err); !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), "named pipe") {
		t.Errorf("OpenError for a pipe with no reader: %v", err)
	}
}

// TestErrorUserMistakes: errors a request can provoke by naming the wrong
// file are typed, never left as internal errors.
func TestErrorUserMistakes(t *testing.T) {
	for _, tc := range []struct {
		errno syscall.Errno
		want  error
	}{
		{syscall.EBUSY, errdefs.ErrFailedPrecondition},
		{syscall.ETXTBSY, errdefs.ErrFailedPrecondition},
		{syscall.ENXIO, errdefs.ErrInvalidArgument},
		{syscall.ENOENT, errdefs.ErrNotFound},
		{syscall.ENOSPC, errdefs.ErrResourceExhausted},
	} {
		err := Error("extract", "/x", &os.PathError{Op: "unlink", Path: "/x", Err: tc.errno})
		if !errors.Is(err, tc.want) {
			t.Errorf("%v: %v, want %v", tc.errno, err, tc.want)
		}
	}
}
