package ledgers

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/controller"
	"github.com/paddock-dev/paddock/internal/controller/controllertest"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/ledger"
	"github.com/paddock-dev/paddock/internal/runtime/processbackend"
)

func TestMain(m *testing.M) {
	processbackend.RunAgentIfChild()
	os.Exit(m.Run())
}

// TestCallerRefusedPaddockKinds: a caller may add no entry of a kind the
// daemon records, whichever it is; its own kinds are accepted.
func TestCallerRefusedPaddockKinds(t *testing.T) {
	for _, k := range api.PaddockLedgerKinds() {
		err := validateAdd(api.AddLedgerEntryRequest{Kind: k})
		if !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), "recorded by paddock itself") {
			t.Errorf("caller kind %q: %v, want refused", k, err)
		}
	}
	for _, k := range []string{"payment.sent", "egress_refused.note", "snapshots", "x"} {
		if err := validateAdd(api.AddLedgerEntryRequest{Kind: k}); err != nil {
			t.Errorf("caller kind %q refused: %v", k, err)
		}
	}
}

func TestValidateAdd(t *testing.T) {
	many := map[string]string{}
	for i := range maxData + 1 {
		many[strings.Repeat("k", i+1)] = "v"
	}
	for name, req := range map[string]api.AddLedgerEntryRequest{
		"no kind":         {},
		"upper case kind": {Kind: "Payment"},
		"long kind":       {Kind: strings.Repeat("a", 65)},
		"NUL in note":     {Kind: "x", Note: "a\x00b"},
		"long note":       {Kind: "x", Note: strings.Repeat("n", ledger.MaxNote+1)},
		"bad UTF-8 note":  {Kind: "x", Note: "\xff"},
		"too much data":   {Kind: "x", Data: many},
		"bad data key":    {Kind: "x", Data: map[string]string{"a b": "v"}},
		"NUL in value":    {Kind: "x", Data: map[string]string{"k": "\x00"}},
		"long value":      {Kind: "x", Data: map[string]string{"k": strings.Repeat("v", ledger.MaxDataValue+1)}},
	} {
		if err := validateAdd(req); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("%s: %v, want invalid", name, err)
		}
	}
	if err := validateAdd(api.AddLedgerEntryRequest{Kind: "payment.sent", Note: "paid", Data: map[string]string{"amount": "3"}}); err != nil {
		t.Errorf("a plain entry is refused: %v", err)
	}
}

// TestLedgerPages: on the process backend, a caller's entries land after
// the daemon's, pages follow Next to the end, another key's sandbox is the
// same not found as none, and a destroyed sandbox's ledger is still read
// and added to under its id.
func TestLedgerPages(t *testing.T) {
	env := controllertest.New(t, controllertest.Options{})
	c := env.Controller
	s := New(Options{Core: c, Store: env.Store})
	base, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	a := controller.WithCaller(base, "aaaaaaaaaaaaaaaa", api.KeyScopeOwn)
	b := controller.WithCaller(base, "bbbbbbbbbbbbbbbb", api.KeyScopeOwn)
	sb, err := c.Create(a, api.CreateSandboxRequest{Name: "led", Image: controllertest.Image})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		e, err := s.Add(a, "led", api.AddLedgerEntryRequest{Kind: "payment.sent", Data: map[string]string{"n": string(rune('0' + i))}})
		if err != nil {
			t.Fatal(err)
		}
		if e.SandboxID != sb.ID || e.Source != "caller" || e.Seq == 0 {
			t.Fatalf("added entry %+v", e)
		}
	}
	all, err := s.Page(a, sb.ID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(all.Entries) < 6 || all.Entries[0].Kind != api.LedgerCreate || all.Next != 0 {
		t.Fatalf("whole ledger: %d entries, first %q, next %d", len(all.Entries), all.Entries[0].Kind, all.Next)
	}
	var paged []api.LedgerEntry
	for after := int64(0); ; {
		p, err := s.Page(a, "led", after, 2)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Entries) > 2 {
			t.Fatalf("a page of 2 has %d entries", len(p.Entries))
		}
		paged = append(paged, p.Entries...)
		if p.Next == 0 {
			break
		}
		after = p.Next
	}
	if len(paged) != len(all.Entries) || paged[len(paged)-1].Seq != all.Entries[len(all.Entries)-1].Seq {
		t.Errorf("pages of 2 gave %d entries, the whole ledger %d", len(paged), len(all.Entries))
	}
	for _, bad := range []struct {
		after int64
		limit int
	}{{-1, 0}, {0, -1}, {0, maxPage + 1}} {
		if _, err := s.Page(a, "led", bad.after, bad.limit); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("page after %d limit %d: %v, want invalid", bad.after, bad.limit, err)
		}
	}

	// Another key: not found, nothing added.
	if _, err := s.Page(b, sb.ID, 0, 0); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("another key reads the ledger: %v", err)
	}
	if _, err := s.Add(b, sb.ID, api.AddLedgerEntryRequest{Kind: "x"}); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("another key adds to the ledger: %v", err)
	}
	if _, err := s.Page(a, "no-such-sandbox", 0, 0); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("ledger of no sandbox: %v", err)
	}

	// Destroyed: kept, still its owner's alone.
	if err := c.Delete(a, sb.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Add(a, sb.ID, api.AddLedgerEntryRequest{Kind: "refund.sent"}); err != nil {
		t.Fatalf("add to a destroyed sandbox's ledger: %v", err)
	}
	after, err := s.Page(a, sb.ID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(after.Entries); n < len(all.Entries)+2 || after.Entries[n-1].Kind != "refund.sent" {
		t.Errorf("destroyed sandbox's ledger: %d entries, last %+v", n, after.Entries[n-1])
	}
	if _, err := s.Page(b, sb.ID, 0, 0); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("another key reads a destroyed sandbox's ledger: %v", err)
	}
}
