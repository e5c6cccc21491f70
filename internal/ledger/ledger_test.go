package ledger

import (
	"context"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/store"
)

// memStore keeps appended entries; one sandbox has a record.
type memStore struct {
	entries []store.LedgerEntry
	ctxErr  error // the context's error seen by the last append
}

func (m *memStore) GetSandbox(_ context.Context, id string) (*store.Sandbox, error) {
	if id == "sb1" {
		return &store.Sandbox{ID: id, Name: "web"}, nil
	}
	return nil, errdefs.NotFound("sandbox %q", id)
}

func (m *memStore) AppendLedger(ctx context.Context, e *store.LedgerEntry) error {
	m.ctxErr = ctx.Err()
	m.entries = append(m.entries, *e)
	return nil
}

// TestRecord: an entry is written under the sandbox's name, as the
// daemon's, also when the caller's context is already over (refusals and
// ends are recorded after the request); a kind callers may use is refused
// and nothing is written.
func TestRecord(t *testing.T) {
	st := &memStore{}
	r := NewRecorder(st, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := r.Record(ctx, "sb1", api.LedgerEntry{Kind: api.LedgerEgressRefused, Note: "deny example.test:443"}); err != nil {
		t.Fatal(err)
	}
	if err := r.Record(context.Background(), "gone", api.LedgerEntry{Kind: api.LedgerStop}); err != nil {
		t.Fatal(err)
	}
	if len(st.entries) != 2 || st.ctxErr != nil {
		t.Fatalf("entries %+v, context at append %v", st.entries, st.ctxErr)
	}
	if e := st.entries[0]; e.SandboxName != "web" || e.Source != store.SourcePaddock || e.Kind != api.LedgerEgressRefused {
		t.Errorf("entry of a live sandbox: %+v", e)
	}
	if e := st.entries[1]; e.SandboxName != "" || e.SandboxID != "gone" {
		t.Errorf("entry of a sandbox without a record: %+v", e)
	}
	if err := r.Record(context.Background(), "sb1", api.LedgerEntry{Kind: "payment.sent"}); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("a caller's kind recorded as the daemon's: %v", err)
	}
	if len(st.entries) != 2 {
		t.Errorf("a refused record was written: %+v", st.entries[2:])
	}
	if IsDaemonKind("payment.sent") || !IsDaemonKind(api.LedgerExec) {
		t.Error("IsDaemonKind disagrees with api.PaddockLedgerKinds")
	}
}

// TestStorable: text from requests and sandboxes is made valid UTF-8
// without NUL and bounded, without splitting a character.
func TestStorable(t *testing.T) {
	long := strings.Repeat("é", MaxCommand)
	e := Storable(api.LedgerEntry{
		Command: []string{"a\x00b", "\xff", long, "dropped"},
		Path:    strings.Repeat("p", 5000),
		Note:    strings.Repeat("n", MaxNote+1),
		Data:    map[string]string{"k\x00": "v\xfe"},
	})
	size := 0
	for _, a := range e.Command {
		size += len(a)
		if !utf8.ValidString(a) || strings.ContainsRune(a, 0) {
			t.Errorf("argument %q is not storable", a)
		}
	}
	if len(e.Command) != 3 || size > MaxCommand+len("…") || !strings.HasSuffix(e.Command[2], "…") {
		t.Errorf("command of %d arguments, %d bytes", len(e.Command), size)
	}
	if len(e.Path) > 4096 || len(e.Note) > MaxNote {
		t.Errorf("path %d bytes, note %d bytes", len(e.Path), len(e.Note))
	}
	for k, v := range e.Data {
		if !utf8.ValidString(k+v) || strings.ContainsRune(k+v, 0) {
			t.Errorf("data %q=%q is not storable", k, v)
		}
	}
	if got := CutUTF8("aé", 2); got != "a" {
		t.Errorf("CutUTF8 split a character: %q", got)
	}
	if cmd, cut := BoundCommand(nil); cmd != nil || cut {
		t.Errorf("BoundCommand(nil) = %v, %v", cmd, cut)
	}
}
