package netns

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// DefaultClaimDir is where daemons on one host claim their network
// ranges: a lock file per range, held with flock for the daemon's life.
// It lives on /run, so claims end with the boot, as the namespaces and
// links they protect do.
const DefaultClaimDir = "/run/paddock/ranges"

// ErrRangeTaken is returned when another daemon holds (or left sandbox
// networks on) a range that overlaps the one asked for.
var ErrRangeTaken = errors.New("network range taken")

// claimRecord is what a claim file says about its holder.
type claimRecord struct {
	Range    string `json:"range"`
	StateDir string `json:"state_dir"`
	Tag      string `json:"tag"`
	PID      int    `json:"pid"`
}

// Claim is a daemon's hold on its range; Release (or the process's end)
// lets it go.
type Claim struct {
	f    *os.File
	path string
	// live are the tags of the daemons that held a claim when this one
	// was made (this daemon's among them): their firewall rules are theirs.
	live map[string]bool
}

// Release drops the hold. The file stays: a later claimant finds it
// unheld and replaces it, unless its holder left sandbox networks behind.
func (c *Claim) Release() {
	if c != nil && c.f != nil {
		c.f.Close()
		c.f = nil
	}
}

// claimFile names the lock file of a range: "100.96.0.0_11.lock".
func claimFile(rng netip.Prefix) string {
	return strings.Replace(rng.Masked().String(), "/", "_", 1) + ".lock"
}

// parseClaimFile is claimFile's inverse; ok is false for any other name.
func parseClaimFile(name string) (netip.Prefix, bool) {
	s, ok := strings.CutSuffix(name, ".lock")
	if !ok || strings.Count(s, "_") != 1 {
		return netip.Prefix{}, false
	}
	p, err := netip.ParsePrefix(strings.Replace(s, "_", "/", 1))
	if err != nil || !p.Addr().Is4() || p != p.Masked() {
		return netip.Prefix{}, false
	}
	return p, true
}

// ensureClaimDir makes dir (0700) and checks that it and its parent are
// root's (the daemon's user's) and writable by nobody else: whoever could
// write there could hold a range against every daemon, or swap a claim
// file for a link.
func ensureClaimDir(dir string) error {
	// The parent is the daemon's socket directory by default, which
	// users of the socket's group must be able to enter.
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return fmt.Errorf("network range claims: %w", err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("network range claims: %w", err)
	}
	for _, d := range []string{filepath.Dir(dir), dir} {
		fi, err := os.Lstat(d)
		if err != nil {
			return fmt.Errorf("network range claims: %w", err)
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !fi.IsDir() || !ok || int(st.Uid) != os.Geteuid() || fi.Mode().Perm()&0o022 != 0 {
			return fmt.Errorf("network range claims: %s must be a directory of uid %d that only it can write (found %v, uid %v)", d, os.Geteuid(), fi.Mode(), uidOf(st))
		}
	}
	// The claims dir itself is nobody else's business at all.
	return os.Chmod(dir, 0o700)
}

func uidOf(st *syscall.Stat_t) any {
	if st == nil {
		return "?"
	}
	return st.Uid
}

// lockWait takes an exclusive flock on f, retrying until the deadline:
// the directory's lock is only held for the few file operations of a
// claim.
func lockWait(f *os.File, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil || !errors.Is(err, unix.EWOULDBLOCK) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// openClaim opens a claim file without following links, and checks it is
// a regular file.
func openClaim(path string, flag int) (*os.File, error) {
	f, err := os.OpenFile(path, flag|os.O_RDWR|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, err
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	return f, nil
}

func readClaim(f *os.File) claimRecord {
	var r claimRecord
	b, _ := io.ReadAll(io.LimitReader(f, 4096))
	_ = json.Unmarshal(b, &r)
	return r
}

// leftoverNamespaces counts the namespaces in nsDir named with tag's
// prefix: sandbox networks a stopped daemon left on the host.
func leftoverNamespaces(netnsDir, tag string) int {
	if !validTag(tag) {
		return 0
	}
	n := 0
	ents, _ := os.ReadDir(netnsDir)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "paddock-"+tag+"-") {
			n++
		}
	}
	return n
}

// claimRange takes rng for the daemon of stateDir (tag is its network
// tag) in dir. It refuses when another daemon's claim overlaps rng and
// that daemon runs (its flock is held), or is stopped but left sandbox
// namespaces on the host (their addresses are in its range), or when
// another state dir has the same tag (a copied state dir): two daemons
// would then take each other's namespaces for their own. Unheld claims
// of other daemons that overlap and left nothing are removed.
func claimRange(dir, netnsDir string, rng netip.Prefix, stateDir, tag string) (*Claim, error) {
	rng = rng.Masked()
	if err := ensureClaimDir(dir); err != nil {
		return nil, err
	}
	// One claim at a time on the host: the overlap check and the new
	// claim are one step.
	dl, err := openClaim(filepath.Join(dir, ".lock"), os.O_CREATE)
	if err != nil {
		return nil, fmt.Errorf("network range claims: %w", err)
	}
	defer dl.Close()
	if err := lockWait(dl, 10*time.Second); err != nil {
		return nil, fmt.Errorf("network range claims: lock %s: %w", dl.Name(), err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("network range claims: %w", err)
	}
	sort.Slice(ents, func(i, j int) bool { return ents[i].Name() < ents[j].Name() })
	live := map[string]bool{tag: true}
	for _, e := range ents {
		theirs, ok := parseClaimFile(e.Name())
		if !ok {
			continue
		}
		overlap := theirs.Overlaps(rng)
		if err := checkClaim(filepath.Join(dir, e.Name()), netnsDir, theirs, rng, overlap, stateDir, tag, live); err != nil {
			return nil, err
		}
	}
	path := filepath.Join(dir, claimFile(rng))
	f, err := openClaim(path, os.O_CREATE)
	if err != nil {
		return nil, fmt.Errorf("network range claims: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("network range claims: lock %s: %w", path, err)
	}
	b, _ := json.Marshal(claimRecord{Range: rng.String(), StateDir: stateDir, Tag: tag, PID: os.Getpid()})
	err = f.Truncate(0)
	if err == nil {
		_, err = f.WriteAt(append(b, '\n'), 0)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("network range claims: write %s: %w", path, err)
	}
	return &Claim{f: f, path: path, live: live}, nil
}

// checkClaim decides about one existing claim file (the caller holds the
// directory's lock): nil lets the new claim go ahead. The tag of a daemon
// that holds the claim goes into live.
func checkClaim(path, netnsDir string, theirs, ours netip.Prefix, overlap bool, stateDir, tag string, live map[string]bool) error {
	f, err := openClaim(path, 0)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("network range claims: %w", err)
	}
	defer f.Close()
	held := false
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		if !errors.Is(err, unix.EWOULDBLOCK) {
			return fmt.Errorf("network range claims: lock %s: %w", path, err)
		}
		held = true
	}
	r := readClaim(f)
	if held && validTag(r.Tag) {
		live[r.Tag] = true
	}
	if r.StateDir == stateDir {
		// Our own, from an earlier start (maybe with another range): the
		// state dir's lock says no other daemon runs on it.
		if !held && theirs != ours && leftoverNamespaces(netnsDir, r.Tag) == 0 {
			_ = os.Remove(path)
		}
		return nil
	}
	who := fmt.Sprintf("state dir %s", r.StateDir)
	if r.StateDir == "" {
		who = "an unreadable claim " + path
	}
	left := 0
	if !held {
		left = leftoverNamespaces(netnsDir, r.Tag)
	}
	if r.Tag != "" && r.Tag == tag && (held || left > 0) {
		return fmt.Errorf("%w: the paddock daemon of %s uses this daemon's network tag %s (a copied state dir?): give one of them a fresh state dir", ErrRangeTaken, who, tag)
	}
	if !overlap {
		return nil
	}
	switch {
	case held:
		return fmt.Errorf("%w: network range %s overlaps %s, held by the running paddock daemon with %s (pid %d): give each daemon on this host its own range with PADDOCK_NETWORK_RANGE", ErrRangeTaken, ours, theirs, who, r.PID)
	case left > 0:
		return fmt.Errorf("%w: network range %s overlaps %s of the stopped paddock daemon with %s, whose %d sandbox networks (namespaces %s/paddock-%s-*) are still on this host: start that daemon and remove its sandboxes, or give this daemon another range with PADDOCK_NETWORK_RANGE", ErrRangeTaken, ours, theirs, who, left, netnsDir, r.Tag)
	}
	// A stopped daemon's claim with nothing left behind: gone.
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("network range claims: %w", err)
	}
	return nil
}
