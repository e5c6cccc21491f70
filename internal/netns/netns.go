// Package netns gives a networked sandbox its plumbing: a named network
// namespace, a veth pair on a /30 carved from a range Paddock owns, and
// host firewall rules (nftables or iptables) that let the sandbox reach only the
// egress proxy and DNS resolver on its gateway address, and, forwarded,
// the destination prefixes its address rules allow (Link.Direct); nothing
// else is forwarded.
package netns

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/paddock-dev/paddock/internal/lazyre"
)

// iptables chain names. Every Paddock rule lives in these chains (or, with
// nftables, in the table inet paddock_<tag>), so a restart can flush them
// without touching anyone else's rules.
// Each is suffixed with the daemon's tag (tag.go), its own, so daemons on
// one host never touch each other's.
const (
	chainInput   = "PADDOCK-IN-"
	chainForward = "PADDOCK-FWD-"
	chainNAT     = "PADDOCK-PRE-"
	chainPost    = "PADDOCK-POST-"
	// chainDirect + a sandbox's veth name less "pd" (tag and index): its
	// address rules, in filter and nat.
	chainDirect = "PADDOCK-DIR-"
	nsDir       = "/run/netns"
)

// Ports the sandbox may reach on its gateway; set by the egress package's
// listeners.
type Ports struct {
	Proxy, Transparent, DNS int
}

// DefaultRange is the private range sandboxes' /30s come from (part of
// 100.64.0.0/10, which the egress proxy never connects to).
var DefaultRange = netip.MustParsePrefix("100.96.0.0/11")

// Options configure a Manager.
type Options struct {
	// StateDir keeps one record per networked sandbox (its /30).
	StateDir string
	Range    netip.Prefix
	Ports    Ports
	Logger   *slog.Logger
	// Firewall is auto (the default), nftables or iptables.
	Firewall string
	// Owner is the daemon's state dir, written into its range claim so
	// that a daemon refused the range can say whose it is.
	Owner string
	// ClaimDir is where ranges are claimed (DefaultClaimDir when empty).
	ClaimDir string
}

// Link is one sandbox's plumbing.
type Link struct {
	ID      string     `json:"id"`
	Index   int        `json:"index"`
	Gateway netip.Addr `json:"gateway"`
	Addr    netip.Addr `json:"addr"`
	// NetNS is the namespace's bind-mount path, for the runtime.
	NetNS  string `json:"netns"`
	HostIf string `json:"host_if"`
	// Direct are the destination prefixes the sandbox reaches directly
	// (forwarded, any port), disjoint; empty: none, and the host end of
	// the veth does not forward.
	Direct []netip.Prefix `json:"direct,omitempty"`
}

// Manager is safe for concurrent use.
type Manager struct {
	opts Options
	log  *slog.Logger
	mu   sync.Mutex

	tag                string
	ifPrefix, nsPrefix string
	// legacy is set while the tag is the range-derived one of a daemon
	// from before tags were drawn (tag.go): other daemons may have had
	// the same, so namespaces are found by record only, never by name.
	legacy bool
	fw     firewall
	claim  *Claim
}

// Tag is this daemon's tag, which names its namespaces, veths and rules.
func (m *Manager) Tag() string { return m.tag }

// Chains returns the iptables chains of this manager's tag ({table,
// chain}); they exist only with the iptables backend.
func (m *Manager) Chains() [][2]string {
	return newIptables(m.tag, m.opts.Range, m.opts.Ports).chains()
}

// Table is the nftables table of this manager's tag ("inet paddock_<tag>");
// it exists only with the nftables backend.
func (m *Manager) Table() string { return "inet " + newNft(m.tag, m.opts.Range, m.opts.Ports).table }

// Firewall names the backend in use: nftables or iptables.
func (m *Manager) Firewall() string { return m.fw.Name() }

// Close removes this manager's firewall rules when no sandbox uses them,
// and gives up the range.
func (m *Manager) Close(ctx context.Context) error {
	defer m.claim.Release()
	if len(m.List()) > 0 {
		return nil
	}
	return m.fw.close(ctx)
}

var idRE = lazyre.New(`^[a-z0-9]{1,32}$`)

// Available reports whether the host has what the plumbing needs with
// the given firewall backend (auto, nftables or iptables).
func Available(ctx context.Context, firewall string) error {
	if _, err := exec.LookPath("ip"); err != nil {
		return errors.New("ip not found: networking needs iproute2")
	}
	if os.Geteuid() != 0 {
		return errors.New("networking needs root")
	}
	_, err := selectFirewall(ctx, firewall, hostProbe)
	return err
}

// New claims the range, builds a Manager and resets this daemon's firewall
// rules; call Setup again for every sandbox that keeps its network
// (reconcile). It fails with ErrRangeTaken when another daemon's range
// overlaps.
func New(ctx context.Context, opts Options) (m *Manager, err error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if !opts.Range.IsValid() {
		opts.Range = DefaultRange
	}
	if !opts.Range.Addr().Is4() || opts.Range.Bits() > 28 {
		return nil, fmt.Errorf("network range %s: want an IPv4 prefix of /28 or wider", opts.Range)
	}
	if err := os.MkdirAll(opts.StateDir, 0o700); err != nil {
		return nil, err
	}
	if opts.ClaimDir == "" {
		opts.ClaimDir = DefaultClaimDir
	}
	tag, legacy, err := loadTag(opts.StateDir, opts.Range)
	if err != nil {
		return nil, err
	}
	backend, err := selectFirewall(ctx, opts.Firewall, hostProbe)
	if err != nil {
		return nil, err
	}
	found := firewallTags(ctx) // before the claim: orphans.go
	claim, err := claimRange(opts.ClaimDir, nsDir, opts.Range, opts.Owner, tag)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			claim.Release()
		}
	}()
	m = &Manager{
		opts: opts, log: opts.Logger, tag: tag, legacy: legacy, claim: claim,
		// Interface names have 15 bytes: "pd", up to 8 of tag, up to 5 of index.
		ifPrefix: "pd" + tag, nsPrefix: "paddock-" + tag + "-",
	}
	if legacy {
		m.log.Warn("network names carry the range's shared tag of an older paddock until this daemon has no networked sandbox left", "tag", tag)
	}
	ipf, nf := newIptables(tag, opts.Range, opts.Ports), newNft(tag, opts.Range, opts.Ports)
	m.fw = ipf
	if backend == FirewallNftables {
		m.fw = nf
	}
	if err := m.fw.reset(ctx); err != nil {
		return nil, err
	}
	// The other backend's rules of this tag are left over from before the
	// host (or PADDOCK_FIREWALL) switched. Removed only now that the new
	// backend's drops are in place, so no sandbox packet passes unfiltered
	// in between.
	if backend == FirewallNftables {
		if hostProbe.iptFound() && ipf.present(ctx) {
			if err := ipf.close(ctx); err != nil {
				m.log.Warn("remove leftover iptables chains", "err", err)
			}
		}
	} else if _, err := exec.LookPath("nft"); err == nil {
		if err := nf.close(ctx); err != nil {
			m.log.Warn("remove leftover nftables table", "err", err)
		}
	}
	m.removeOrphanRules(ctx, found)
	where := m.Table()
	if backend == FirewallIptables {
		where = ipf.chainIn + "," + ipf.chainFwd + "," + ipf.chainNAT
	}
	m.log.Info("network firewall", "backend", backend, "rules", where, "tag", tag, "range", opts.Range, "claim", claim.path)
	return m, nil
}

// links returns every recorded link; the caller holds m.mu.
func (m *Manager) links() []Link {
	var out []Link
	ents, _ := os.ReadDir(m.opts.StateDir)
	for _, e := range ents {
		if id, ok := strings.CutSuffix(e.Name(), ".json"); ok {
			if l, ok := m.Get(id); ok {
				out = append(out, l)
			}
		}
	}
	return out
}

func run(ctx context.Context, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return nil
}

func (m *Manager) recordPath(id string) string { return filepath.Join(m.opts.StateDir, id+".json") }

func (m *Manager) nsName(id string) string { return m.nsPrefix + id }

// recordedNS is the namespace name a record names, checked to be a
// sandbox namespace's.
func (m *Manager) recordedNS(l Link) (string, error) {
	name := filepath.Base(l.NetNS)
	if filepath.Dir(l.NetNS) != nsDir || !strings.HasPrefix(name, "paddock-") || !strings.HasSuffix(name, "-"+l.ID) {
		return "", fmt.Errorf("netns: record of %s names a namespace %q that is not a sandbox's", l.ID, l.NetNS)
	}
	return name, nil
}

// NSPath is where a sandbox's namespace is bind-mounted.
func (m *Manager) NSPath(id string) string { return filepath.Join(nsDir, m.nsName(id)) }

// Get returns a sandbox's recorded link.
func (m *Manager) Get(id string) (Link, bool) {
	b, err := os.ReadFile(m.recordPath(id))
	if err != nil {
		return Link{}, false
	}
	var l Link
	if json.Unmarshal(b, &l) != nil || l.ID != id {
		return Link{}, false
	}
	return l, true
}

// allocate picks the lowest free /30; the caller holds m.mu.
func (m *Manager) allocate() (int, error) {
	used := map[int]bool{}
	ents, _ := os.ReadDir(m.opts.StateDir)
	for _, e := range ents {
		if id, ok := strings.CutSuffix(e.Name(), ".json"); ok {
			if l, ok := m.Get(id); ok {
				used[l.Index] = true
			}
		}
	}
	max := 1 << (32 - m.opts.Range.Bits() - 2)
	for i := 0; i < max && i < 1<<20; i++ {
		if !used[i] {
			return i, nil
		}
	}
	return 0, errors.New("network range exhausted")
}

func (m *Manager) linkFor(id string, idx int) Link {
	base := m.opts.Range.Masked().Addr().As4()
	n := uint32(base[0])<<24 | uint32(base[1])<<16 | uint32(base[2])<<8 | uint32(base[3])
	n += uint32(idx) * 4
	at := func(off uint32) netip.Addr {
		v := n + off
		return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
	}
	return Link{ID: id, Index: idx, Gateway: at(1), Addr: at(2), NetNS: m.NSPath(id), HostIf: m.ifPrefix + strconv.FormatInt(int64(idx), 16)}
}

// Setup creates (or restores after a restart) a sandbox's namespace, veth
// and firewall rules, with direct the destination prefixes it reaches
// directly (disjoint). It is idempotent.
func (m *Manager) Setup(ctx context.Context, id string, direct []netip.Prefix) (Link, error) {
	if !idRE.MatchString(id) {
		return Link{}, fmt.Errorf("netns: bad sandbox id %q", id)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	l, ok := m.Get(id)
	if !ok {
		idx, err := m.allocate()
		if err != nil {
			return Link{}, err
		}
		l = m.linkFor(id, idx)
		l.Direct = direct
		if err := m.writeRecord(l); err != nil {
			return Link{}, err
		}
	}
	if old := l.Direct; !slices.Equal(old, direct) {
		// Recorded first: the firewall never holds rules no record names,
		// so a teardown after a crash removes them all.
		l.Direct = direct
		if err := m.writeRecord(l); err != nil {
			return Link{}, err
		}
		if err := m.fw.setDirect(ctx, l, old, m.links); err != nil {
			return Link{}, err
		}
	}
	if err := m.plumb(ctx, l); err != nil {
		m.teardownLocked(context.WithoutCancel(ctx), id)
		return Link{}, err
	}
	return l, nil
}

func (m *Manager) plumb(ctx context.Context, l Link) error {
	ns, err := m.recordedNS(l)
	if err != nil {
		return err
	}
	if _, err := os.Stat(l.NetNS); err != nil {
		if err := run(ctx, "ip", "netns", "add", ns); err != nil {
			return err
		}
	}
	_, err = os.Stat(filepath.Join("/sys/class/net", l.HostIf))
	created := err != nil
	if created {
		if err := run(ctx, "ip", "link", "add", l.HostIf, "type", "veth", "peer", "name", "eth0", "netns", ns); err != nil {
			return err
		}
	}
	// Before either end is up, so neither ever has an IPv6 address; again
	// at every setup, so a restart finds out if something turned it back
	// on.
	if err := ipv6Off(l.NetNS, l.HostIf); err != nil {
		return err
	}
	if created {
		steps := [][]string{
			{"addr", "add", l.Gateway.String() + "/30", "dev", l.HostIf},
			{"link", "set", l.HostIf, "up"},
			{"-n", ns, "link", "set", "lo", "up"},
			{"-n", ns, "addr", "add", l.Addr.String() + "/30", "dev", "eth0"},
			{"-n", ns, "link", "set", "eth0", "up"},
			{"-n", ns, "route", "add", "default", "via", l.Gateway.String()},
		}
		for _, s := range steps {
			if err := run(ctx, "ip", s...); err != nil {
				return err
			}
		}
	}
	if err := m.fw.add(ctx, l, m.links); err != nil {
		return err
	}
	if len(l.Direct) == 0 {
		return nil // left as the host has it (SetDirect turns it off)
	}
	return setForwarding(l)
}

// SetDirect replaces the destination prefixes a sandbox reaches directly;
// open direct connections to a prefix no longer listed stop at once.
func (m *Manager) SetDirect(ctx context.Context, id string, direct []netip.Prefix) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	l, ok := m.Get(id)
	if !ok {
		return fmt.Errorf("netns: sandbox %s has no network record", id)
	}
	old := l.Direct
	if slices.Equal(old, direct) {
		return nil
	}
	l.Direct = direct
	// Recorded before the firewall changes: the record always names
	// every element the firewall may hold (old ones included, since
	// setDirect removes them whether or not they are there).
	if err := m.writeRecord(l); err != nil {
		return err
	}
	if len(direct) > 0 {
		if err := m.fw.setDirect(ctx, l, old, m.links); err != nil {
			return err
		}
		return setForwarding(l)
	}
	// Forwarding off first, then the rules.
	if err := setForwarding(l); err != nil {
		return err
	}
	return m.fw.setDirect(ctx, l, old, m.links)
}

// setForwarding lets the host end of l's veth forward while l has address
// rules, and turns forwarding off when they go: then a packet from the
// sandbox is not forwarded even if a firewall rule went missing. A veth
// that never had address rules keeps the host's default (the firewall
// drops what it would forward).
func setForwarding(l Link) error {
	v := "0"
	if len(l.Direct) > 0 {
		v = "1"
	}
	path := filepath.Join("/proc/sys/net/ipv4/conf", l.HostIf, "forwarding")
	if err := os.WriteFile(path, []byte(v), 0o644); err != nil {
		if os.IsNotExist(err) {
			return nil // no veth yet: set when it is made (plumb)
		}
		return fmt.Errorf("netns: forwarding on %s: %w", l.HostIf, err)
	}
	return nil
}

func (m *Manager) writeRecord(l Link) error {
	b, err := json.Marshal(l)
	if err != nil {
		return err
	}
	tmp := m.recordPath(l.ID) + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, m.recordPath(l.ID))
}

// Teardown removes a sandbox's rules, veth, namespace and record.
// Idempotent.
func (m *Manager) Teardown(ctx context.Context, id string) error {
	if !idRE.MatchString(id) {
		return fmt.Errorf("netns: bad sandbox id %q", id)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.teardownLocked(ctx, id)
}

// teardownLocked removes what the sandbox's record names, or, without a
// record, the namespace of this daemon's tag; the caller holds m.mu.
func (m *Manager) teardownLocked(ctx context.Context, id string) error {
	var errs []error
	ns := m.nsName(id)
	if l, ok := m.Get(id); ok {
		if err := m.fw.remove(ctx, l); err != nil {
			errs = append(errs, err)
		}
		if !strings.HasPrefix(l.HostIf, "pd") || len(l.HostIf) > 15 || strings.ContainsAny(l.HostIf, "/ ") {
			errs = append(errs, fmt.Errorf("netns: record of %s names a link %q that is not a sandbox's", id, l.HostIf))
		} else if _, err := os.Stat(filepath.Join("/sys/class/net", l.HostIf)); err == nil {
			if err := run(ctx, "ip", "link", "del", l.HostIf); err != nil {
				errs = append(errs, err)
			}
		}
		var err error
		if ns, err = m.recordedNS(l); err != nil {
			errs = append(errs, err)
		}
	} else if m.legacy {
		// A shared tag: a namespace of that name without a record may be
		// another daemon's.
		ns = ""
	}
	if ns != "" {
		if _, err := os.Stat(filepath.Join(nsDir, ns)); err == nil {
			if err := run(ctx, "ip", "netns", "del", ns); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if err := os.Remove(m.recordPath(id)); err != nil && !os.IsNotExist(err) {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// List returns the ids of every sandbox with a record or a namespace.
func (m *Manager) List() []string {
	seen := map[string]bool{}
	ents, _ := os.ReadDir(m.opts.StateDir)
	for _, e := range ents {
		if id, ok := strings.CutSuffix(e.Name(), ".json"); ok && idRE.MatchString(id) {
			seen[id] = true
		}
	}
	// A namespace without a record (the daemon died between making it and
	// removing it) is found by this daemon's own tag; never by a shared
	// legacy one, which another daemon's namespaces may carry.
	var nss []os.DirEntry
	if !m.legacy {
		nss, _ = os.ReadDir(nsDir)
	}
	for _, e := range nss {
		if id, ok := strings.CutPrefix(e.Name(), m.nsPrefix); ok && idRE.MatchString(id) {
			seen[id] = true
		}
	}
	out := make([]string, 0, len(seen))
	for id := range seen {
		out = append(out, id)
	}
	return out
}
