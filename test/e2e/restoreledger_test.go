package e2e

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock/api"
)

// restoreEntry returns the one "restore" entry of a sandbox's ledger,
// checking that it follows "create".
func restoreEntry(t *testing.T, d *daemon, ref string) api.LedgerEntry {
	t.Helper()
	kinds, l := ledgerKinds(t, d, ref)
	if len(kinds) < 2 || kinds[0] != "create" || kinds[1] != "restore" || strings.Count(strings.Join(kinds, " "), "restore") != 1 {
		t.Fatalf("ledger of %s: kinds %v, want create then one restore", ref, kinds)
	}
	return l.Entries[1]
}

// TestRestoreLedger: a sandbox made from a snapshot (create
// --from-snapshot, fork, an imported snapshot) records where its files came
// from; the source records the snapshot taken.
func TestRestoreLedger(t *testing.T) {
	d := startDaemon(t, daemonOpts{})
	src := create(t, d, api.CreateSandboxRequest{Image: "busybox"})
	execOut(t, d, src.ID, "sh", "-c", "echo hi > /home/user/f")
	snapID := strings.TrimSpace(d.must("snapshot", "create", src.ID, "--name", "lg-snap"))
	kinds, l := ledgerKinds(t, d, src.ID)
	if kinds[len(kinds)-1] != "snapshot" || l.Entries[len(kinds)-1].Data["snapshot"] != snapID {
		t.Fatalf("source ledger: %v / %+v, want a snapshot entry naming %s", kinds, l.Entries[len(kinds)-1], snapID)
	}

	tests := []struct {
		name  string
		make  func() string // returns the new sandbox's id
		check func(e api.LedgerEntry) bool
	}{
		{"from snapshot", func() string {
			return strings.TrimSpace(d.must("create", "--from-snapshot", "lg-snap"))
		}, func(e api.LedgerEntry) bool {
			return e.Data["snapshot"] == snapID && e.Data["snapshot_name"] == "lg-snap" && e.Data["from_sandbox"] == src.ID && e.Data["fork_of"] == ""
		}},
		{"fork", func() string {
			out := d.must("fork", src.ID, "--count", "1", "--json")
			i := strings.Index(out, `"sandboxes"`)
			j := strings.Index(out[i:], `"id": "`)
			if i < 0 || j < 0 {
				t.Fatalf("fork output: %s", out)
			}
			rest := out[i+j+len(`"id": "`):]
			return rest[:strings.Index(rest, `"`)]
		}, func(e api.LedgerEntry) bool {
			return e.Data["fork_of"] == src.ID && e.Data["from_sandbox"] == src.ID && strings.Contains(e.Note, "forked from sandbox "+src.ID)
		}},
		{"imported snapshot", func() string {
			file := filepath.Join(t.TempDir(), "s.pdk")
			d.must("snapshot", "export", "lg-snap", "-o", file)
			d.must("snapshot", "import", file, "--name", "lg-imported")
			return strings.TrimSpace(d.must("create", "--from-snapshot", "lg-imported"))
		}, func(e api.LedgerEntry) bool {
			return e.Data["imported"] == "true" && e.Data["snapshot_name"] == "lg-imported" && strings.Contains(e.Note, "imported")
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := tt.make()
			if out, _ := execOut(t, d, id, "cat", "/home/user/f"); out != "hi\n" {
				t.Fatalf("restored file: %q", out)
			}
			if e := restoreEntry(t, d, id); !tt.check(e) || e.Source != "paddock" {
				t.Fatalf("restore entry = %+v", e)
			}
		})
	}
}
