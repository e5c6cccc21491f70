package netns

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
)

// whole is the state of chains that exist, end in DROP and are hooked.
func whole(fam iptFamily) baseState {
	st := make(baseState, len(fam.base))
	for i, c := range fam.base {
		st[i] = chainState{exists: true, hasDrop: true, hooked: make([]bool, len(c.hooks))}
		for j := range c.hooks {
			st[i].hooked[j] = true
		}
	}
	return st
}

func TestIptablesBaseScript(t *testing.T) {
	f := newIptables("b845", DefaultRange, testPorts)
	none := func(fam iptFamily) baseState {
		st := make(baseState, len(fam.base))
		for i, c := range fam.base {
			st[i].hooked = make([]bool, len(c.hooks))
		}
		return st
	}
	noDrop := whole(f.v4)
	noDrop[0].hasDrop = false
	noHook := whole(f.v4)
	noHook[0].hooked[1] = false // the range hook
	tests := []struct {
		name  string
		fam   iptFamily
		st    baseState
		flush bool
		want  string // the whole script
	}{
		{"v4 reset on a bare host", f.v4, none(f.v4), true, `*filter
:PADDOCK-IN-b845 - [0:0]
-A PADDOCK-IN-b845 -j DROP
-I INPUT 1 -i pdb845+ -j PADDOCK-IN-b845
-I INPUT 1 -d 100.96.0.0/11 -j PADDOCK-IN-b845
:PADDOCK-FWD-b845 - [0:0]
-A PADDOCK-FWD-b845 -j DROP
-I FORWARD 1 -i pdb845+ -j PADDOCK-FWD-b845
-I FORWARD 1 -o pdb845+ -j PADDOCK-FWD-b845
-I FORWARD 1 -d 100.96.0.0/11 -j PADDOCK-FWD-b845
COMMIT
*nat
:PADDOCK-PRE-b845 - [0:0]
-I PREROUTING 1 -i pdb845+ -j PADDOCK-PRE-b845
:PADDOCK-POST-b845 - [0:0]
-A PADDOCK-POST-b845 ! -o pdb845+ -j MASQUERADE
-I POSTROUTING 1 -s 100.96.0.0/11 -j PADDOCK-POST-b845
COMMIT
`},
		// A restart: each chain is emptied and gets its DROP back in the
		// same commit; the hooks stay as they are.
		{"v4 reset over live chains", f.v4, whole(f.v4), true, `*filter
:PADDOCK-IN-b845 - [0:0]
-A PADDOCK-IN-b845 -j DROP
:PADDOCK-FWD-b845 - [0:0]
-A PADDOCK-FWD-b845 -j DROP
COMMIT
*nat
:PADDOCK-PRE-b845 - [0:0]
:PADDOCK-POST-b845 - [0:0]
-A PADDOCK-POST-b845 ! -o pdb845+ -j MASQUERADE
COMMIT
`},
		{"v4 repair with nothing missing", f.v4, whole(f.v4), false, ""},
		{"v4 repair of a lost DROP", f.v4, noDrop, false, "*filter\n-A PADDOCK-IN-b845 -j DROP\nCOMMIT\n"},
		{"v4 repair of a lost hook", f.v4, noHook, false, "*filter\n-I INPUT 1 -d 100.96.0.0/11 -j PADDOCK-IN-b845\nCOMMIT\n"},
		{"v4 repair of lost chains", f.v4, none(f.v4), false, baseScript(f.v4, none(f.v4), true)},
		// IPv6: only drops, no NAT and no range (the range is IPv4).
		{"v6 reset on a bare host", f.v6, none(f.v6), true, `*filter
:PADDOCK-IN-b845 - [0:0]
-A PADDOCK-IN-b845 -j DROP
-I INPUT 1 -i pdb845+ -j PADDOCK-IN-b845
:PADDOCK-FWD-b845 - [0:0]
-A PADDOCK-FWD-b845 -j DROP
-I FORWARD 1 -i pdb845+ -j PADDOCK-FWD-b845
-I FORWARD 1 -o pdb845+ -j PADDOCK-FWD-b845
COMMIT
`},
		{"v6 reset over live chains", f.v6, whole(f.v6), true, `*filter
:PADDOCK-IN-b845 - [0:0]
-A PADDOCK-IN-b845 -j DROP
:PADDOCK-FWD-b845 - [0:0]
-A PADDOCK-FWD-b845 -j DROP
COMMIT
`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := baseScript(tt.fam, tt.st, tt.flush); got != tt.want {
				t.Errorf("got:\n%s\nwant:\n%s", got, tt.want)
			}
		})
	}
}

func TestIptablesRules(t *testing.T) {
	f := newIptables("b845", DefaultRange, testPorts)
	l := testLinks()[1]
	rules := f.rules(l)
	var accepts int
	for _, r := range rules {
		for _, a := range r {
			// Rules go into iptables-restore scripts as lines.
			if a == "" || strings.ContainsAny(a, " \t\n\"'") {
				t.Errorf("argument %q of %v cannot go in a restore line", a, r)
			}
		}
		s := strings.Join(r, " ")
		if !strings.HasSuffix(s, "--comment paddock:bbb") || !strings.Contains(s, "-i pdb8451 ") && !strings.Contains(s, "-o pdb8451 -d 100.96.0.6/32 ") {
			t.Errorf("rule not tied to the sandbox's veth and id: %s", s)
		}
		if strings.Contains(s, "-j ACCEPT") {
			accepts++
			// An accept names the sandbox's veth, own address and own
			// gateway, nothing wider.
			if r[1] != f.chainIn || !strings.Contains(s, "-s 100.96.0.6/32 -d 100.96.0.5/32 ") {
				t.Errorf("accept wider than the sandbox's own pair: %s", s)
			}
		}
	}
	if accepts != 2 || len(rules) != 8 {
		t.Errorf("%d rules, %d accepts; want 8 and 2", len(rules), accepts)
	}
	// The jumps to the sandbox's direct chain are the only other verdicts.
	if n := strings.Count(fmt.Sprint(rules), "-j PADDOCK-DIR-1-b845 "); n != 3 {
		t.Errorf("%d jumps to the direct chain, want 3: %v", n, rules)
	}
}

var scratchN atomic.Int32

// scratchNetns makes a network namespace of the test's own, so firewall
// code can run for real without touching the host's rules.
func scratchNetns(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: makes a network namespace")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs ip (iproute2)")
	}
	name := fmt.Sprintf("pdunit-%d-%d", os.Getpid(), scratchN.Add(1))
	_ = exec.Command("ip", "netns", "del", name).Run()
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", name).Run() })
	return "/run/netns/" + name
}

// inScratch runs fn in the namespace at ns; commands it starts run there
// too (a child inherits its thread's namespace).
func inScratch(t *testing.T, ns string, fn func(ctx context.Context) error) {
	t.Helper()
	if err := inNetns(ns, func() error { return fn(context.Background()) }); err != nil {
		t.Fatal(err)
	}
}

func saveIn(t *testing.T, ns, cmd string) string {
	t.Helper()
	var out []byte
	inScratch(t, ns, func(context.Context) error {
		var err error
		out, err = exec.Command(cmd).CombinedOutput()
		if err != nil {
			return fmt.Errorf("%s: %v: %s", cmd, err, out)
		}
		return nil
	})
	return string(out)
}

// TestIptablesLifecycle drives the iptables backend in a namespace of its
// own: reset, add, repair, remove and close leave exactly the rules they
// should, in both families, with no doubled hook and the DROP last.
func TestIptablesLifecycle(t *testing.T) {
	ns := scratchNetns(t)
	for _, bin := range []string{"iptables-save", "ip6tables-save", "iptables-restore", "ip6tables-restore"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("needs %s (Debian package iptables)", bin)
		}
	}
	f := newIptables("b845", DefaultRange, testPorts)
	if !f.ipv6 {
		t.Skip("the kernel has no IPv6")
	}
	l := testLinks()
	all := func() []Link { return l }
	v4 := func() string { return saveIn(t, ns, "iptables-save") }
	v6 := func() string { return saveIn(t, ns, "ip6tables-save") }
	// chainRules are the lines of one chain, in order.
	chainRules := func(save, chain string) []string {
		var out []string
		for _, line := range strings.Split(save, "\n") {
			if strings.HasPrefix(line, "-A "+chain+" ") {
				out = append(out, line)
			}
		}
		return out
	}
	hookCount := func(save, builtin, chain string) int {
		n := 0
		for _, line := range strings.Split(save, "\n") {
			if strings.HasPrefix(line, "-A "+builtin+" ") && strings.HasSuffix(line, "-j "+chain) {
				n++
			}
		}
		return n
	}
	check := func(step string, sandboxes int) {
		t.Helper()
		s4, s6 := v4(), v6()
		for _, c := range []struct {
			save, builtin, chain string
			hooks, rules         int
		}{
			{s4, "INPUT", f.chainIn, 2, 2*sandboxes + 1},
			{s4, "FORWARD", f.chainFwd, 3, 2*sandboxes + 1},
			{s4, "PREROUTING", f.chainNAT, 1, 4 * sandboxes},
			{s4, "POSTROUTING", f.chainOut, 1, 1},
			{s6, "INPUT", f.chainIn, 1, 1},
			{s6, "FORWARD", f.chainFwd, 2, 1},
		} {
			if n := hookCount(c.save, c.builtin, c.chain); n != c.hooks {
				t.Errorf("%s: %d hooks of %s in %s, want %d", step, n, c.chain, c.builtin, c.hooks)
			}
			rs := chainRules(c.save, c.chain)
			if len(rs) != c.rules {
				t.Errorf("%s: %s has %d rules, want %d:\n%s", step, c.chain, len(rs), c.rules, strings.Join(rs, "\n"))
				continue
			}
			if c.chain != f.chainNAT && c.chain != f.chainOut && rs[len(rs)-1] != "-A "+c.chain+" -j DROP" {
				t.Errorf("%s: %s does not end in DROP:\n%s", step, c.chain, strings.Join(rs, "\n"))
			}
		}
	}
	t.Cleanup(func() {
		_ = inNetns(ns, func() error { return f.close(context.Background()) })
	})

	inScratch(t, ns, f.reset)
	check("reset", 0)
	for range 2 {
		inScratch(t, ns, func(ctx context.Context) error { return f.add(ctx, l[0], all) })
	}
	inScratch(t, ns, func(ctx context.Context) error { return f.add(ctx, l[1], all) })
	check("add", 2)
	if s := v4(); !strings.Contains(s, "-A "+f.chainIn+" -s 100.96.0.2/32 -d 100.96.0.1/32 -i pdb8450 -p tcp -m multiport --dports 3128,3129,53") {
		t.Errorf("sandbox aaa's accept missing:\n%s", s)
	}
	// A restart empties the chains and keeps one hook each.
	inScratch(t, ns, f.reset)
	check("second reset", 0)
	inScratch(t, ns, func(ctx context.Context) error { return f.add(ctx, l[0], all) })
	check("add after reset", 1)

	// Something (an operator, a host firewall reload) tore things down: add
	// repairs them.
	inScratch(t, ns, func(ctx context.Context) error {
		for _, args := range [][]string{
			{"iptables", "-D", f.chainIn, "-j", "DROP"},
			{"iptables", "-D", "INPUT", "-d", "100.96.0.0/11", "-j", f.chainIn},
			{"ip6tables", "-D", "FORWARD", "-o", "pdb845+", "-j", f.chainFwd},
			{"ip6tables", "-F", f.chainIn},
		} {
			if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
				return fmt.Errorf("%v: %v: %s", args, err, out)
			}
		}
		return nil
	})
	inScratch(t, ns, func(ctx context.Context) error { return f.add(ctx, l[0], all) })
	check("repair", 1)

	inScratch(t, ns, func(ctx context.Context) error { return f.remove(ctx, l[0]) })
	check("remove", 0)
	var present bool
	inScratch(t, ns, func(ctx context.Context) error { present = f.present(ctx); return nil })
	if !present {
		t.Error("present() = false with the chains in place")
	}
	inScratch(t, ns, f.close)
	for name, s := range map[string]string{"iptables": v4(), "ip6tables": v6()} {
		if strings.Contains(s, "PADDOCK") || strings.Contains(s, "pdb845") {
			t.Errorf("%s keeps rules after close:\n%s", name, s)
		}
	}
	inScratch(t, ns, func(ctx context.Context) error { present = f.present(ctx); return nil })
	if present {
		t.Error("present() = true after close")
	}
}

// TestNftLifecycle drives the nftables backend in a namespace of its own.
func TestNftLifecycle(t *testing.T) {
	ns := scratchNetns(t)
	if _, err := exec.LookPath("nft"); err != nil {
		t.Skip("needs nft (Debian package nftables)")
	}
	f := newNft("b845", DefaultRange, testPorts)
	l := testLinks()
	all := func() []Link { return l }
	show := func() string {
		t.Helper()
		var out []byte
		inScratch(t, ns, func(context.Context) error {
			out, _ = exec.Command("nft", "list", "ruleset").CombinedOutput()
			return nil
		})
		return string(out)
	}
	inScratch(t, ns, f.reset)
	inScratch(t, ns, func(ctx context.Context) error { return f.add(ctx, l[0], all) })
	s := show()
	for _, want := range []string{
		`iifname "pdb845*" jump sandbox_in`,
		"ip daddr 100.96.0.0/11 jump sandbox_in",
		"ip daddr 100.96.0.0/11 drop",
		`"pdb8450" . 100.96.0.2 . 100.96.0.1 . tcp . 3128`,
	} {
		if !strings.Contains(s, want) {
			t.Errorf("ruleset lacks %q:\n%s", want, s)
		}
	}
	// The table went (an operator's flush): add rebuilds it whole.
	inScratch(t, ns, func(ctx context.Context) error { return nft(ctx, "delete table inet paddock_b845\n") })
	inScratch(t, ns, func(ctx context.Context) error { return f.add(ctx, l[1], all) })
	if s := show(); !strings.Contains(s, `"pdb8450" . 100.96.0.2`) || !strings.Contains(s, `"pdb8451" . 100.96.0.6`) {
		t.Errorf("rebuilt table lacks a sandbox:\n%s", s)
	}
	inScratch(t, ns, func(ctx context.Context) error { return f.remove(ctx, l[0]) })
	inScratch(t, ns, func(ctx context.Context) error { return f.remove(ctx, l[0]) })
	if s := show(); strings.Contains(s, `"pdb8450"`) {
		t.Errorf("removed sandbox's elements left:\n%s", s)
	}
	inScratch(t, ns, f.close)
	if s := show(); strings.Contains(s, "paddock_b845") {
		t.Errorf("table left after close:\n%s", s)
	}
}
