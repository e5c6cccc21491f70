// Package console drives Paddock's web console in a real browser (Debian's
// Chromium, headless, through chromedp) against a real daemon: signing in,
// the live list, a sandbox's terminal and files, and that a key of scope
// own never sees another key's sandboxes in the page or in any answer the
// page gets.
package console

import (
	"os"
	"testing"

	"github.com/paddock-dev/paddock/internal/testdaemon"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testdaemon.Cleanup()
	os.Exit(code)
}
