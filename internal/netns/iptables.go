package netns

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os/exec"
	"strconv"
	"strings"
)

// iptablesFirewall keeps every Paddock rule in chains of its own, hooked
// first into INPUT, FORWARD and PREROUTING, so a restart can empty them
// without touching anyone else's rules. IPv4 has the policy; IPv6 gets
// input and forward chains that drop everything from Paddock's
// interfaces (a sandbox has no IPv6, and nothing v6 of it may pass if a
// host ever gave it some).
type iptablesFirewall struct {
	ifPrefix                              string
	rng                                   netip.Prefix
	chainIn, chainFwd, chainNAT, chainOut string
	ports                                 Ports
	v4, v6                                iptFamily
	// ipv6 is whether the kernel has IPv6 (and so the v6 chains matter).
	ipv6 bool
}

// iptFamily is one of iptables and ip6tables, with the base chains
// Paddock keeps in it.
type iptFamily struct {
	cmd, restore string
	base         []baseChain
}

// baseChain is a chain of Paddock's, the hooks that send packets to it
// (a built-in chain, then match arguments) and the rule it ends in, if
// any (DROP for the filter chains).
type baseChain struct {
	table, chain string
	hooks        [][]string
	tail         []string
}

// drop is the rule the filter chains end in.
var drop = []string{"-j", "DROP"}

func newIptables(tag string, rng netip.Prefix, ports Ports) *iptablesFirewall {
	f := &iptablesFirewall{
		ifPrefix: "pd" + tag, rng: rng.Masked(),
		chainIn: chainInput + tag, chainFwd: chainForward + tag, chainNAT: chainNAT + tag, chainOut: chainPost + tag,
		ports: ports, ipv6: kernelIPv6(),
	}
	ifs := f.ifPrefix + "+"
	dst := f.rng.String()
	f.v4 = iptFamily{cmd: "iptables", restore: "iptables-restore", base: []baseChain{
		// From Paddock's interfaces, and to Paddock's range from anywhere
		// (the host itself over lo, a LAN neighbour routing the range
		// here): the sandboxes' accept rules name their own veth, so
		// whatever does not come in on it drops.
		{"filter", f.chainIn, [][]string{{"INPUT", "-i", ifs}, {"INPUT", "-d", dst}}, drop},
		{"filter", f.chainFwd, [][]string{{"FORWARD", "-i", ifs}, {"FORWARD", "-o", ifs}, {"FORWARD", "-d", dst}}, drop},
		{"nat", f.chainNAT, [][]string{{"PREROUTING", "-i", ifs}}, nil},
		// What address rules let through is forwarded, and leaves with
		// the host's address: nobody outside routes the range back.
		{"nat", f.chainOut, [][]string{{"POSTROUTING", "-s", dst}}, []string{"!", "-o", ifs, "-j", "MASQUERADE"}},
	}}
	f.v6 = iptFamily{cmd: "ip6tables", restore: "ip6tables-restore", base: []baseChain{
		{"filter", f.chainIn, [][]string{{"INPUT", "-i", ifs}}, drop},
		{"filter", f.chainFwd, [][]string{{"FORWARD", "-i", ifs}, {"FORWARD", "-o", ifs}}, drop},
	}}
	return f
}

func (f *iptablesFirewall) Name() string { return FirewallIptables }

// chains are the IPv4 chains ({table, chain}); the IPv6 ones have the
// names of the two filter chains.
func (f *iptablesFirewall) chains() [][2]string {
	return [][2]string{{"filter", f.chainIn}, {"filter", f.chainFwd}, {"nat", f.chainNAT}, {"nat", f.chainOut}}
}

// families are the families whose rules must be in place.
func (f *iptablesFirewall) families() []iptFamily {
	if f.ipv6 {
		return []iptFamily{f.v4, f.v6}
	}
	return []iptFamily{f.v4}
}

func (f *iptablesFirewall) reset(ctx context.Context) error {
	for _, fam := range f.families() {
		if err := f.ensureBase(ctx, fam, true); err != nil {
			return err
		}
	}
	return nil
}

func (f *iptablesFirewall) add(ctx context.Context, l Link, _ func() []Link) error {
	for _, fam := range f.families() {
		if err := f.ensureBase(ctx, fam, false); err != nil {
			return err
		}
	}
	// The sandbox's direct chains first: the jumps below name them.
	if err := f.v4.apply(ctx, f.directScript(l)); err != nil {
		return err
	}
	// Only the rules that are missing, all in one commit per table; each
	// goes to the top of its chain, ahead of the chain's final DROP.
	var missing [][]string
	for _, r := range f.rules(l) {
		if f.v4.run(ctx, append([]string{"-t", r[0], "-C"}, r[1:]...)...) != nil {
			missing = append(missing, r)
		}
	}
	var b strings.Builder
	for _, table := range []string{"filter", "nat"} {
		var lines []string
		for _, r := range missing {
			if r[0] == table {
				lines = append(lines, "-I "+strings.Join(r[1:], " "))
			}
		}
		writeTable(&b, table, lines)
	}
	return f.v4.apply(ctx, b.String())
}

func (f *iptablesFirewall) remove(ctx context.Context, l Link) error {
	for _, r := range f.rules(l) {
		for f.v4.run(ctx, append([]string{"-t", r[0], "-D"}, r[1:]...)...) == nil {
		}
	}
	f.removeDirect(ctx, l)
	return nil
}

// present reports whether any of this daemon's chains exist, in either
// family (a host that switched backends may have them left over).
func (f *iptablesFirewall) present(ctx context.Context) bool {
	for _, fam := range []iptFamily{f.v4, f.v6} {
		for _, c := range fam.base {
			if fam.run(ctx, "-t", c.table, "-S", c.chain) == nil {
				return true
			}
		}
	}
	return false
}

// close unhooks and deletes the chains of both families. Called only when
// no sandbox of this daemon is left, or for the rules of a backend the
// host switched away from once the new backend's drops are in place.
func (f *iptablesFirewall) close(ctx context.Context) error {
	var errs []error
	for _, fam := range []iptFamily{f.v4, f.v6} {
		if fam.cmd == "ip6tables" && !f.ipv6 {
			continue
		}
		for _, c := range fam.base {
			if fam.run(ctx, "-t", c.table, "-S", c.chain) != nil {
				continue
			}
			for _, h := range c.hooks {
				for fam.run(ctx, hookArgs(c, h, "-D")...) == nil {
				}
			}
			_ = fam.run(ctx, "-t", c.table, "-F", c.chain)
			if err := fam.run(ctx, "-t", c.table, "-X", c.chain); err != nil {
				errs = append(errs, err)
			}
		}
	}
	// Sandboxes' direct chains left over (a reset empties the base chains
	// that jump to them, and a sandbox gone since has no teardown).
	for _, table := range []string{"filter", "nat"} {
		for _, c := range f.directChains(ctx, table) {
			_ = f.v4.run(ctx, "-t", table, "-F", c)
			if err := f.v4.run(ctx, "-t", table, "-X", c); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

func (fam iptFamily) run(ctx context.Context, args ...string) error {
	return run(ctx, fam.cmd, append([]string{"-w", "5"}, args...)...)
}

// apply commits an iptables-restore script without flushing anything it
// does not name; each table's part is one commit, so no packet sees it
// half done.
func (fam iptFamily) apply(ctx context.Context, script string) error {
	if script == "" {
		return nil
	}
	cmd := exec.CommandContext(ctx, fam.restore, "-w", "5", "--noflush")
	cmd.Stdin = strings.NewReader(script)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s --noflush: %v: %s", fam.restore, err, strings.TrimSpace(out.String()))
	}
	return nil
}

// hookArgs is the command line that checks (-C), deletes (-D) or inserts
// (-I) hook h of chain c.
func hookArgs(c baseChain, h []string, op string) []string {
	args := []string{"-t", c.table, op, h[0]}
	if op == "-I" {
		args = append(args, "1")
	}
	args = append(args, h[1:]...)
	return append(args, "-j", c.chain)
}

// baseState is what the host has of one family's base chains, in the
// order of iptFamily.base.
type baseState []chainState

type chainState struct {
	exists, hasDrop bool
	hooked          []bool // per hook
}

func (f *iptablesFirewall) state(ctx context.Context, fam iptFamily) baseState {
	st := make(baseState, len(fam.base))
	for i, c := range fam.base {
		st[i].exists = fam.run(ctx, "-t", c.table, "-S", c.chain) == nil
		st[i].hasDrop = st[i].exists && c.tail != nil && fam.run(ctx, append([]string{"-t", c.table, "-C", c.chain}, c.tail...)...) == nil
		st[i].hooked = make([]bool, len(c.hooks))
		for j, h := range c.hooks {
			st[i].hooked[j] = st[i].exists && fam.run(ctx, hookArgs(c, h, "-C")...) == nil
		}
	}
	return st
}

// ensureBase makes fam's base chains whole in one iptables-restore run.
// With flush (a new daemon) every chain is emptied and refilled with its
// final DROP in the same commit: there is no instant at which a hooked
// chain is empty and a sandbox's packet falls through it to the host's
// own rules. Without flush it only adds what is missing (an operator or a
// host firewall reload may have removed it).
func (f *iptablesFirewall) ensureBase(ctx context.Context, fam iptFamily, flush bool) error {
	return fam.apply(ctx, baseScript(fam, f.state(ctx, fam), flush))
}

// baseScript is the iptables-restore input (for --noflush) that brings the
// chains from st to whole. Declaring a chain creates it, or empties it if
// it exists; hooks are checked, never doubled.
func baseScript(fam iptFamily, st baseState, flush bool) string {
	var b strings.Builder
	for _, table := range []string{"filter", "nat"} {
		var lines []string
		for i, c := range fam.base {
			if c.table != table {
				continue
			}
			s := st[i]
			declare := flush || !s.exists
			if declare {
				lines = append(lines, ":"+c.chain+" - [0:0]")
			}
			// Whatever a sandbox's own rules do not accept ends here;
			// they are inserted above it.
			if c.tail != nil && (declare || !s.hasDrop) {
				lines = append(lines, "-A "+c.chain+" "+strings.Join(c.tail, " "))
			}
			// Emptying a chain keeps the hooks that jump to it (they are
			// in the built-in chains), so only absent hooks are added.
			for j, h := range c.hooks {
				if !s.hooked[j] {
					lines = append(lines, strings.Join(hookArgs(c, h, "-I")[2:], " "))
				}
			}
		}
		writeTable(&b, table, lines)
	}
	return b.String()
}

// writeTable adds one table's commit to an iptables-restore script; a
// table with nothing to change is left out.
func writeTable(b *strings.Builder, table string, lines []string) {
	if len(lines) == 0 {
		return
	}
	fmt.Fprintf(b, "*%s\n", table)
	for _, l := range lines {
		b.WriteString(l + "\n")
	}
	b.WriteString("COMMIT\n")
}

// rules are the sandbox's own rules: {table, chain, spec...}. Inserted at
// the top of their chain, ahead of the chain's final DROP. They are
// written both as command lines and into iptables-restore scripts, so no
// argument may contain a space (all are generated here from checked
// values).
func (f *iptablesFirewall) rules(l Link) [][]string {
	src, gw := l.Addr.String()+"/32", l.Gateway.String()+"/32"
	p := f.ports
	tag := []string{"-m", "comment", "--comment", "paddock:" + l.ID}
	tcpPorts := fmt.Sprintf("%d,%d,%d", p.Proxy, p.Transparent, p.DNS)
	to := func(port int) string { return fmt.Sprintf("%s:%d", l.Gateway, port) }
	rs := [][]string{
		append([]string{"filter", f.chainIn, "-i", l.HostIf, "-s", src, "-d", gw, "-p", "tcp", "-m", "multiport", "--dports", tcpPorts, "-j", "ACCEPT"}, tag...),
		append([]string{"filter", f.chainIn, "-i", l.HostIf, "-s", src, "-d", gw, "-p", "udp", "--dport", strconv.Itoa(p.DNS), "-j", "ACCEPT"}, tag...),
		// Programs that ignore HTTP_PROXY and connect straight out on
		// 80/443 land on the transparent proxy; any DNS server they name
		// is answered by Paddock's.
		append([]string{"nat", f.chainNAT, "-i", l.HostIf, "-p", "tcp", "-m", "multiport", "--dports", "80,443", "-j", "DNAT", "--to-destination", to(p.Transparent)}, tag...),
		append([]string{"nat", f.chainNAT, "-i", l.HostIf, "-p", "udp", "--dport", "53", "-j", "DNAT", "--to-destination", to(p.DNS)}, tag...),
		append([]string{"nat", f.chainNAT, "-i", l.HostIf, "-p", "tcp", "--dport", "53", "-j", "DNAT", "--to-destination", to(p.DNS)}, tag...),
	}
	return append(rs, f.directJumps(l)...)
}

// directChain is the chain (in both filter and nat) of a sandbox's
// address rules. A chain per sandbox makes a change one commit per table
// whatever the number of prefixes, rather than a command per rule.
func (f *iptablesFirewall) directChain(l Link) string {
	return chainDirect + strings.TrimPrefix(l.HostIf, f.ifPrefix) + "-" + strings.TrimPrefix(f.ifPrefix, "pd")
}

// directJumps send a sandbox's forwarded packets, both ways, and its NAT
// prerouting to its direct chain (empty: nothing happens there).
func (f *iptablesFirewall) directJumps(l Link) [][]string {
	src := l.Addr.String() + "/32"
	c := f.directChain(l)
	tag := []string{"-m", "comment", "--comment", "paddock:" + l.ID}
	return [][]string{
		append([]string{"filter", f.chainFwd, "-i", l.HostIf, "-s", src, "-j", c}, tag...),
		append([]string{"filter", f.chainFwd, "-o", l.HostIf, "-d", src, "-j", c}, tag...),
		append([]string{"nat", f.chainNAT, "-i", l.HostIf, "-s", src, "-j", c}, tag...),
	}
}

// directScript declares (creating or emptying) and fills a sandbox's
// direct chains in one iptables-restore input: per prefix, the sandbox's
// packets out (checked on every packet, so a removed rule stops an open
// connection too), the replies of those connections back, and in NAT an
// accept that keeps them from the transparent proxy and resolver.
func (f *iptablesFirewall) directScript(l Link) string {
	src := l.Addr.String() + "/32"
	c := f.directChain(l)
	filter := []string{":" + c + " - [0:0]"}
	nat := []string{":" + c + " - [0:0]"}
	for _, p := range l.Direct {
		dst := p.Masked().String()
		filter = append(filter,
			"-A "+c+" -s "+src+" -d "+dst+" -j ACCEPT",
			"-A "+c+" -s "+dst+" -d "+src+" -m conntrack --ctstate ESTABLISHED,RELATED --ctdir REPLY -j ACCEPT")
		nat = append(nat, "-A "+c+" -s "+src+" -d "+dst+" -j ACCEPT")
	}
	var b strings.Builder
	writeTable(&b, "filter", filter)
	writeTable(&b, "nat", nat)
	return b.String()
}

// setDirect replaces a sandbox's address rules with l.Direct: its
// chains are emptied and refilled in one commit per table.
func (f *iptablesFirewall) setDirect(ctx context.Context, l Link, _ []netip.Prefix, all func() []Link) error {
	return f.add(ctx, l, all)
}

// directChains lists this daemon's direct chains in table.
func (f *iptablesFirewall) directChains(ctx context.Context, table string) []string {
	out, err := exec.CommandContext(ctx, f.v4.cmd, "-w", "5", "-t", table, "-S").Output()
	if err != nil {
		return nil
	}
	var cs []string
	suffix := "-" + strings.TrimPrefix(f.ifPrefix, "pd")
	for _, line := range strings.Split(string(out), "\n") {
		if c, ok := strings.CutPrefix(line, "-N "+chainDirect); ok && strings.HasSuffix(c, suffix) {
			cs = append(cs, chainDirect+c)
		}
	}
	return cs
}

// removeDirect deletes a sandbox's direct chains once nothing jumps to
// them.
func (f *iptablesFirewall) removeDirect(ctx context.Context, l Link) {
	c := f.directChain(l)
	for _, table := range []string{"filter", "nat"} {
		if f.v4.run(ctx, "-t", table, "-S", c) != nil {
			continue
		}
		_ = f.v4.run(ctx, "-t", table, "-F", c)
		_ = f.v4.run(ctx, "-t", table, "-X", c)
	}
}
