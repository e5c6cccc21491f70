package netns

import (
	"context"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
)

var testPorts = Ports{Proxy: 3128, Transparent: 3129, DNS: 53}

func testLinks() []Link {
	m := &Manager{opts: Options{Range: DefaultRange}, ifPrefix: "pdb845", nsPrefix: "paddock-b845-"}
	return []Link{m.linkFor("aaa", 0), m.linkFor("bbb", 1)}
}

// directLinks are testLinks with address rules on the second.
func directLinks() []Link {
	l := testLinks()
	l[1].Direct = []netip.Prefix{netip.MustParsePrefix("198.19.0.0/30"), netip.MustParsePrefix("8.8.8.8/32")}
	return l
}

func TestNftScript(t *testing.T) {
	f := newNft("b845", DefaultRange, testPorts)
	s := f.script(directLinks())
	// Each line must appear, in this order: the table is replaced whole,
	// base chains hook ahead of the host's own, only Paddock's interfaces
	// are matched, and the policy ends in drop.
	want := []string{
		"add table inet paddock_b845\n",
		"delete table inet paddock_b845\n",
		"table inet paddock_b845 {",
		"type ifname . ipv4_addr . ipv4_addr . inet_proto . inet_service",
		"type ifname : ipv4_addr",
		"type ifname . ipv4_addr . ipv4_addr\n\t\tflags interval",
		"type filter hook input priority -10; policy accept;",
		`iifname "pdb845*" jump sandbox_in`,
		"ip daddr 100.96.0.0/11 jump sandbox_in",
		"iifname . ip saddr . ip daddr . meta l4proto . th dport @allow accept\n\t\tdrop\n",
		"type filter hook forward priority -10; policy accept;",
		"iifname . ip saddr . ip daddr @direct accept",
		"ct direction reply oifname . ip daddr . ip saddr @direct accept",
		`iifname "pdb845*" drop`,
		`oifname "pdb845*" drop`,
		"ip daddr 100.96.0.0/11 drop",
		"type nat hook postrouting priority 90; policy accept;",
		`ip saddr 100.96.0.0/11 oifname != "pdb845*" masquerade`,
		"type nat hook prerouting priority -110; policy accept;",
		`iifname "pdb845*" jump sandbox_nat`,
		"iifname . ip saddr . ip daddr @direct accept",
		"tcp dport { 80, 443 } dnat ip to iifname map @gateways : 3129",
		"meta l4proto { tcp, udp } th dport 53 dnat ip to iifname map @gateways : 53",
		"}\nadd element inet paddock_b845 allow { ",
		`"pdb8450" . 100.96.0.2 . 100.96.0.1 . tcp . 3128 comment "paddock:aaa"`,
		`"pdb8450" . 100.96.0.2 . 100.96.0.1 . tcp . 3129 comment "paddock:aaa"`,
		`"pdb8450" . 100.96.0.2 . 100.96.0.1 . tcp . 53 comment "paddock:aaa"`,
		`"pdb8450" . 100.96.0.2 . 100.96.0.1 . udp . 53 comment "paddock:aaa"`,
		`add element inet paddock_b845 gateways { "pdb8450" comment "paddock:aaa" : 100.96.0.1 }`,
		`"pdb8451" . 100.96.0.6 . 100.96.0.5 . udp . 53 comment "paddock:bbb"`,
		`add element inet paddock_b845 gateways { "pdb8451" comment "paddock:bbb" : 100.96.0.5 }`,
		`add element inet paddock_b845 direct { "pdb8451" . 100.96.0.6 . 198.19.0.0/30 comment "paddock:bbb", "pdb8451" . 100.96.0.6 . 8.8.8.8/32 comment "paddock:bbb" }`,
	}
	rest := s
	for _, w := range want {
		i := strings.Index(rest, w)
		if i < 0 {
			t.Fatalf("script lacks %q after the previous line:\n%s", w, s)
		}
		rest = rest[i+len(w):]
	}
	// Nothing accepts but the allow and direct sets; the only verdicts
	// are the sets' accepts, jumps to our own chains, masquerade and
	// drops.
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		if strings.Contains(line, "accept") && !strings.Contains(line, "policy accept;") && !strings.HasSuffix(line, "@allow accept") && !strings.HasSuffix(line, "@direct accept") {
			t.Errorf("unexpected accept: %q", line)
		}
	}
	if n := strings.Count(s, "comment \"paddock:aaa\""); n != 5 {
		t.Errorf("%d elements of sandbox aaa, want 5", n)
	}
	if strings.Contains(f.script(nil), "element") {
		t.Error("an empty table has elements")
	}
}

func TestNftElements(t *testing.T) {
	f := newNft("b845", DefaultRange, testPorts)
	l := directLinks()[1]
	tests := []struct {
		op      string
		want    []string
		notWant []string
	}{
		{"add", []string{
			`add element inet paddock_b845 allow { "pdb8451" . 100.96.0.6 . 100.96.0.5 . tcp . 3128 comment "paddock:bbb", `,
			`add element inet paddock_b845 gateways { "pdb8451" comment "paddock:bbb" : 100.96.0.5 }`,
			`add element inet paddock_b845 direct { "pdb8451" . 100.96.0.6 . 198.19.0.0/30 comment "paddock:bbb", `,
		}, nil},
		// A delete names keys only: no comment, no map value.
		{"delete", []string{
			`delete element inet paddock_b845 allow { "pdb8451" . 100.96.0.6 . 100.96.0.5 . tcp . 3128, `,
			`delete element inet paddock_b845 gateways { "pdb8451" }`,
			`delete element inet paddock_b845 direct { "pdb8451" . 100.96.0.6 . 198.19.0.0/30, "pdb8451" . 100.96.0.6 . 8.8.8.8/32 }`,
		}, []string{"comment", ": 100.96.0.5"}},
	}
	for _, tt := range tests {
		t.Run(tt.op, func(t *testing.T) {
			s := f.elements(tt.op, l)
			for _, w := range tt.want {
				if !strings.Contains(s, w) {
					t.Errorf("lacks %q:\n%s", w, s)
				}
			}
			for _, w := range tt.notWant {
				if strings.Contains(s, w) {
					t.Errorf("has %q:\n%s", w, s)
				}
			}
			if got := strings.Count(s, "\n"); got != 3 {
				t.Errorf("%d commands, want 3:\n%s", got, s)
			}
		})
	}
}

// TestNftScriptAccepted has the kernel check the generated scripts
// (nft -c: parsed and validated, never committed).
func TestNftScriptAccepted(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: nft -c talks to the kernel")
	}
	if _, err := exec.LookPath("nft"); err != nil {
		t.Skip("needs nft (Debian package nftables)")
	}
	f := newNft("fffe", DefaultRange, testPorts)
	l := directLinks()
	for name, s := range map[string]string{
		"table":   f.script(l),
		"element": f.script(nil) + f.elements("add", l[0]) + f.elements("delete", l[0]),
		"direct":  f.script(nil) + f.elements("add", l[1]) + f.elements("delete", l[1]),
		"change":  f.script(l) + f.directElements("add", l[1], l[1].Direct) + f.directElements("delete", l[1], l[1].Direct) + f.directElements("add", l[1], l[1].Direct[:1]),
	} {
		cmd := exec.Command("nft", "-c", "-f", "-")
		cmd.Stdin = strings.NewReader(s)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("%s: %v: %s\n%s", name, err, out, s)
		}
	}
}

func TestSelectFirewall(t *testing.T) {
	yes := func(context.Context) bool { return true }
	no := func(context.Context) bool { return false }
	tests := []struct {
		want      string
		nft, ipt  bool
		got, fail string
	}{
		{"", true, true, FirewallNftables, ""},
		{"auto", true, true, FirewallNftables, ""},
		{"auto", false, true, FirewallIptables, ""},
		{"auto", true, false, FirewallNftables, ""},
		{"auto", false, false, "", "needs nftables (nft) or iptables"},
		{"nftables", true, false, FirewallNftables, ""},
		{"nftables", false, true, "", "nft list tables"},
		{"iptables", true, true, FirewallIptables, ""},
		{"iptables", true, false, "", "iptables not found"},
		{"pf", true, true, "", "want auto, nftables or iptables"},
		{"NFTABLES", true, true, "", "want auto, nftables or iptables"},
	}
	for _, tt := range tests {
		p := probe{nftWorks: no, iptFound: func() bool { return tt.ipt }}
		if tt.nft {
			p.nftWorks = yes
		}
		got, err := selectFirewall(context.Background(), tt.want, p)
		if tt.fail != "" {
			if err == nil || !strings.Contains(err.Error(), tt.fail) {
				t.Errorf("%q nft=%v ipt=%v: err %v, want %q", tt.want, tt.nft, tt.ipt, err, tt.fail)
			}
			continue
		}
		if err != nil || got != tt.got {
			t.Errorf("%q nft=%v ipt=%v: %q %v, want %q", tt.want, tt.nft, tt.ipt, got, err, tt.got)
		}
	}
}

func TestManagerNames(t *testing.T) {
	m := &Manager{opts: Options{Range: netip.MustParsePrefix("100.96.0.0/11"), Ports: testPorts}, tag: "b845"}
	if got := m.Table(); got != "inet paddock_b845" {
		t.Errorf("Table() = %q", got)
	}
	if got := m.Chains(); got[0][1] != "PADDOCK-IN-b845" || got[2] != [2]string{"nat", "PADDOCK-PRE-b845"} {
		t.Errorf("Chains() = %v", got)
	}
}

func FuzzParseFirewall(f *testing.F) {
	for _, s := range []string{"", "auto", "nftables", "iptables", "nft", "iptables\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseFirewall(s)
		if err != nil {
			return
		}
		if got != FirewallAuto && got != FirewallNftables && got != FirewallIptables {
			t.Fatalf("ParseFirewall(%q) = %q", s, got)
		}
		if s != "" && got != s {
			t.Fatalf("ParseFirewall(%q) = %q", s, got)
		}
	})
}
