package e2e

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/sdk/go/paddock"
)

// TestLedgerRetention: with a short retention ($PADDOCK_LEDGER_RETENTION),
// a destroyed sandbox's ledger is readable until its newest entry is that
// old, then purged by the daemon on its own; a live sandbox's ledger is
// kept whatever its age.
func TestLedgerRetention(t *testing.T) {
	const retention = 5 * time.Second
	d := startDaemon(t, daemonOpts{env: []string{"PADDOCK_LEDGER_RETENTION=" + retention.String()}})
	ctx := ctxT(t, 3*time.Minute)
	live := create(t, d, api.CreateSandboxRequest{Image: "busybox"})
	name := uniqueName("ret")
	gone := create(t, d, api.CreateSandboxRequest{Image: "busybox", Name: name})
	execOut(t, d, gone.ID, "true")
	if err := d.client.Delete(ctx, gone.ID); err != nil {
		t.Fatal(err)
	}
	destroyed := time.Now()

	// Before the period: readable by id and by name (a read after it would
	// find nothing: reads purge expired ledgers first).
	for _, ref := range []string{gone.ID, name} {
		l, err := d.client.Ledger(ctx, ref)
		if err != nil || l.SandboxID != gone.ID || l.Entries[len(l.Entries)-1].Kind != api.LedgerDestroy {
			t.Fatalf("ledger %s right after the destroy: %v %+v", ref, err, l)
		}
	}

	// After it: the daemon's own purge deletes it, without anyone asking.
	waitForLog(t, d, "ledger retention: deleted entries of destroyed sandboxes", retention+30*time.Second)
	if since := time.Since(destroyed); since < retention {
		t.Fatalf("the ledger was purged %s after its last entry, before the %s retention", since, retention)
	}
	for _, ref := range []string{gone.ID, name} {
		if _, err := d.client.Ledger(ctx, ref); !errors.Is(err, paddock.ErrNotFound) {
			t.Fatalf("ledger %s after the retention: %v, want not found", ref, err)
		}
	}
	if _, err := d.client.AddLedgerEntry(ctx, gone.ID, api.AddLedgerEntryRequest{Kind: "late.entry"}); !errors.Is(err, paddock.ErrNotFound) {
		t.Fatalf("adding to a purged ledger: %v, want not found", err)
	}
	// A live sandbox's ledger outlives the retention.
	if l, err := d.client.Ledger(ctx, live.ID); err != nil || len(l.Entries) == 0 || time.Since(l.Entries[0].At) < retention {
		t.Fatalf("live sandbox's ledger after the retention: %v %+v", err, l)
	}
}

func waitForLog(t *testing.T, d *daemon, line string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !strings.Contains(d.logs.String(), line) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q in the daemon's log within %s", line, within)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
