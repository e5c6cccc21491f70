package netns

import (
	"context"
	"net/netip"
	"os/exec"
	"strings"
)

// A daemon removes its firewall rules when it closes with no sandbox
// left. One that is killed (kill -9, a crash, a test's end) leaves them,
// and if its state dir goes too, nobody ever resets them: its drops for
// its range then drop the traffic of the next daemon that claims an
// overlapping range, which draws a tag of its own. A new daemon therefore
// removes, once it has claimed its range, the rules of every tag that no
// running daemon holds a claim for and that has no sandbox network
// namespace left: rules that protect nothing.
//
// The rules are listed before the claim is made: a daemon makes its
// rules only after its claim, so a tag seen before the claim step whose
// claim is not held then belongs to a daemon that is gone.

// firewallTags lists the tags of the Paddock firewall rules on the host:
// nftables tables "paddock_<tag>" and iptables chains "PADDOCK-IN-<tag>"
// or "PADDOCK-FWD-<tag>" (IPv4 or IPv6).
func firewallTags(ctx context.Context) map[string]bool {
	tags := map[string]bool{}
	if out, err := exec.CommandContext(ctx, "nft", "list", "tables").Output(); err == nil {
		for _, line := range strings.Split(string(out), "\n") {
			if t, ok := strings.CutPrefix(strings.TrimSpace(line), "table inet paddock_"); ok && validTag(t) {
				tags[t] = true
			}
		}
	}
	for _, cmd := range []string{"iptables", "ip6tables"} {
		out, err := exec.CommandContext(ctx, cmd, "-w", "5", "-t", "filter", "-S").Output()
		if err != nil {
			continue
		}
		for t := range iptablesTags(string(out)) {
			tags[t] = true
		}
	}
	return tags
}

// iptablesTags reads the tags of Paddock's base chains from `iptables -S`.
func iptablesTags(rules string) map[string]bool {
	tags := map[string]bool{}
	for _, line := range strings.Split(rules, "\n") {
		c, ok := strings.CutPrefix(strings.TrimSpace(line), "-N ")
		if !ok {
			continue
		}
		for _, p := range []string{chainInput, chainForward} {
			if t, ok := strings.CutPrefix(c, p); ok && validTag(t) {
				tags[t] = true
			}
		}
	}
	return tags
}

// hookedRange finds the range an iptables INPUT hook of tag names
// ("-A INPUT -d <range> -j PADDOCK-IN-<tag>"); ok is false when none does.
func hookedRange(rules, tag string) (netip.Prefix, bool) {
	for _, line := range strings.Split(rules, "\n") {
		f := strings.Fields(line)
		if len(f) == 6 && f[0] == "-A" && f[1] == "INPUT" && f[2] == "-d" && f[4] == "-j" && f[5] == chainInput+tag {
			if p, err := netip.ParsePrefix(f[3]); err == nil && p.Addr().Is4() {
				return p, true
			}
		}
	}
	return netip.Prefix{}, false
}

// orphanTags are the tags of found whose daemon is gone (no held claim,
// not in live) and left no sandbox namespace in netnsDir.
func orphanTags(found, live map[string]bool, netnsDir string) []string {
	var out []string
	for t := range found {
		if live[t] || leftoverNamespaces(netnsDir, t) > 0 {
			continue
		}
		out = append(out, t)
	}
	return out
}

// removeOrphanRules removes the firewall rules of the orphan tags.
func (m *Manager) removeOrphanRules(ctx context.Context, found map[string]bool) {
	for _, tag := range orphanTags(found, m.claim.live, nsDir) {
		var errs []string
		if _, err := exec.LookPath("nft"); err == nil {
			if err := newNft(tag, m.opts.Range, m.opts.Ports).close(ctx); err != nil {
				errs = append(errs, err.Error())
			}
		}
		if hostProbe.iptFound() {
			rng := m.opts.Range
			if out, err := exec.CommandContext(ctx, "iptables", "-w", "5", "-t", "filter", "-S", "INPUT").Output(); err == nil {
				if p, ok := hookedRange(string(out), tag); ok {
					rng = p
				}
			}
			f := newIptables(tag, rng, m.opts.Ports)
			if f.present(ctx) {
				if err := f.close(ctx); err != nil {
					errs = append(errs, err.Error())
				}
			}
		}
		if len(errs) > 0 {
			m.log.Warn("remove the firewall rules a gone paddock daemon left", "tag", tag, "err", strings.Join(errs, "; "))
			continue
		}
		m.log.Info("removed the firewall rules a gone paddock daemon left", "tag", tag)
	}
}
