package controller

import (
	"errors"
	"io"
	"testing"
)

func TestStartErrNamesTheSandboxOnce(t *testing.T) {
	base := errors.New("sandbox abc: pod not running after 15s")
	if got := startErr("abc", base).Error(); got != "start: sandbox abc: pod not running after 15s" {
		t.Errorf("got %q", got)
	}
	if got := startErr("abc", io.ErrUnexpectedEOF); got.Error() != "start sandbox abc: unexpected EOF" || !errors.Is(got, io.ErrUnexpectedEOF) {
		t.Errorf("got %q", got)
	}
}
