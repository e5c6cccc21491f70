package processbackend

import (
	"context"
	"os"
	"testing"
	"time"
)

// ForTest returns a Backend whose agent is the running test binary (its
// TestMain must call RunAgentIfChild), keeping sandboxes in a fresh
// directory that t's cleanup empties after stopping every agent.
func ForTest(t testing.TB, opts Options) *Backend {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// Not t.TempDir: its long path would not leave room for the socket.
	dir, err := os.MkdirTemp("", "pdpb")
	if err != nil {
		t.Fatal(err)
	}
	opts.Dir = dir
	if opts.Agent == "" {
		opts.Agent = self
	}
	b, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		ids, _ := b.List(ctx)
		for _, id := range ids {
			if err := b.Destroy(ctx, id); err != nil {
				t.Errorf("processbackend cleanup: destroy %s: %v", id, err)
			}
		}
		if err := os.RemoveAll(dir); err != nil {
			t.Errorf("processbackend cleanup: %v", err)
		}
	})
	return b
}
