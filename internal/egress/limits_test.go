package egress

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
)

func TestRefusalLog(t *testing.T) {
	var mu sync.Mutex
	var got []Refusal
	l := &refusalLog{window: 150 * time.Millisecond, budget: 3, id: "box", emit: func(r Refusal) {
		mu.Lock()
		got = append(got, r)
		mu.Unlock()
	}}
	seen := func() []Refusal {
		mu.Lock()
		defer mu.Unlock()
		return append([]Refusal(nil), got...)
	}
	r := Refusal{Sandbox: "box", Host: "a.test", Port: 53, Rule: "default-deny", Via: "dns"}
	for range 5 {
		l.add(r)
	}
	if g := seen(); len(g) != 1 || g[0] != r {
		t.Fatalf("within the window: %+v, want the first only", g)
	}
	// Distinct destinations: the budget (3, one used) is recorded singly.
	for i := range 6 {
		l.add(Refusal{Sandbox: "box", Host: fmt.Sprintf("n%d.test", i), Port: 53, Rule: "default-deny", Via: "dns"})
	}
	if g := seen(); len(g) != 3 {
		t.Fatalf("past the budget: %d recorded, want 3", len(g))
	}
	time.Sleep(400 * time.Millisecond) // the window ends
	g := seen()
	var repeats, others int
	for _, x := range g[3:] {
		switch {
		case x.Others:
			others = x.Repeats
		case x.Host == "a.test" && x.Repeats > 0:
			repeats = x.Repeats
		default:
			t.Errorf("unexpected entry %+v", x)
		}
	}
	if repeats != 4 || others != 4 {
		t.Fatalf("after the window: repeats %d others %d (%+v), want 4 and 4", repeats, others, g)
	}
	// A new window records at once again.
	l.add(r)
	if g := seen(); g[len(g)-1] != r {
		t.Fatalf("a new window: %+v", g[len(g)-1])
	}
	l.add(r)
	l.close()
	if g := seen(); g[len(g)-1].Repeats != 1 {
		t.Fatalf("close did not record the repeats: %+v", g[len(g)-1])
	}
	l.add(r) // after close: nothing, no timer
	time.Sleep(200 * time.Millisecond)
	if n := len(seen()); n != len(g)+2 {
		t.Fatalf("entries after close: %d", n-len(g))
	}
}

// TestDNSFloodIsCoalesced: a sandbox hammering its resolver with refused
// names costs a bounded number of records.
func TestDNSFloodIsCoalesced(t *testing.T) {
	f := newDNSFixture(t, Policy{Allow: []string{"ok.test"}}, nil, func(o *Options) { o.RefusalWindow = time.Hour })
	for range 500 {
		f.ask("same.denied.test", dns.TypeA, dns.ClassINET)
	}
	for i := range 500 {
		f.ask(fmt.Sprintf("x%d.exfil.test", i), dns.TypeA, dns.ClassINET)
	}
	f.mu.Lock()
	n := len(f.refused)
	f.mu.Unlock()
	if n != defaultRefusalBudget {
		t.Fatalf("%d refusals recorded during the window, want %d", n, defaultRefusalBudget)
	}
	f.b.refusals.close()
	f.mu.Lock()
	defer f.mu.Unlock()
	var repeats, others int
	for _, r := range f.refused[n:] {
		if r.Others {
			others += r.Repeats
		} else {
			repeats += r.Repeats
		}
	}
	if repeats != 499 || others != 500-(defaultRefusalBudget-1) {
		t.Fatalf("window end: repeats %d others %d", repeats, others)
	}
}

// TestDNSQueriesInProgressAreBounded: past MaxDNS queries in progress, a
// query is refused at once with an extended error saying why.
func TestDNSQueriesInProgressAreBounded(t *testing.T) {
	f := newDNSFixture(t, Policy{Allow: []string{"*.ok.test"}}, map[string][]string{}, func(o *Options) { o.MaxDNS = 2 })
	f.hold = make(chan struct{})
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := new(dns.Msg)
			m.SetQuestion(fmt.Sprintf("slow%d.ok.test.", i), dns.TypeA)
			f.s.serveQuery(context.Background(), f.b, m)
		}()
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(f.b.dnsSem) < 2 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	m := new(dns.Msg)
	m.SetQuestion("third.ok.test.", dns.TypeA)
	m.SetEdns0(1232, false)
	resp := f.s.serveQuery(context.Background(), f.b, m)
	close(f.hold)
	wg.Wait()
	if resp.Rcode != dns.RcodeRefused {
		t.Fatalf("rcode %s", dns.RcodeToString[resp.Rcode])
	}
	var text string
	if o := resp.IsEdns0(); o != nil {
		for _, opt := range o.Option {
			if e, ok := opt.(*dns.EDNS0_EDE); ok {
				text = e.ExtraText
			}
		}
	}
	if text != "paddock egress: this sandbox has 2 DNS queries in progress, the most it may have" {
		t.Fatalf("extended error %q", text)
	}
	if r := f.last(); r.Rule != "dns-limit" || r.Host != "third.ok.test" {
		t.Fatalf("recorded %+v", r)
	}
	// With the others done, queries are answered again.
	if resp := f.s.serveQuery(context.Background(), f.b, m); resp.Rcode != dns.RcodeSuccess {
		t.Fatalf("after: %s", dns.RcodeToString[resp.Rcode])
	}
}
