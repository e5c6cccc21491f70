package oci

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/paddock-dev/paddock/internal/errdefs"
)

// netnsRecordName is the file, in the sandbox's directory, keeping the
// prepared namespace's eth0 configuration across gVisor runs.
const netnsRecordName = "netns-eth0.json"

// netnsEth0 is eth0's IPv4 configuration inside a prepared namespace.
type netnsEth0 struct {
	Addr    string `json:"addr"`    // address/prefix
	Gateway string `json:"gateway"` // default route
}

func (n netnsEth0) valid() bool {
	p, err := netip.ParsePrefix(n.Addr)
	if err != nil || !p.Addr().Is4() {
		return false
	}
	g, err := netip.ParseAddr(n.Gateway)
	return err == nil && g.Is4() && p.Contains(g)
}

// handOverNetNS readies a prepared namespace for a gVisor sandbox. With
// --network=sandbox, runsc copies eth0's addresses and routes into its
// netstack and removes them from the namespace, so that the host kernel
// does not answer the sandbox's packets; the namespace is left bare when
// the sandbox stops. The first run records the configuration; later runs
// (a stop and start keeps the namespace) put it back before runsc looks.
func handOverNetNS(ctx context.Context, nsPath, record string) error {
	cur, err := readNetNSEth0(ctx, nsPath)
	if err != nil {
		return err
	}
	if cur.Addr != "" {
		if !cur.valid() {
			return fmt.Errorf("oci: sandbox namespace eth0 has %+v, want an IPv4 /30 and a default route: %w", cur, errdefs.ErrFailedPrecondition)
		}
		b, _ := json.Marshal(cur)
		return writeFileAtomic(record, b, 0o600)
	}
	b, err := os.ReadFile(record)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("oci: sandbox namespace has no address on eth0 and none recorded: %w", errdefs.ErrFailedPrecondition)
	}
	if err != nil {
		return fmt.Errorf("oci: read namespace record: %w", err)
	}
	var want netnsEth0
	if err := json.Unmarshal(b, &want); err != nil || !want.valid() {
		return fmt.Errorf("oci: namespace record %s is damaged: %w", record, errdefs.ErrFailedPrecondition)
	}
	for _, step := range [][]string{
		{"addr", "replace", want.Addr, "dev", "eth0"},
		{"route", "replace", "default", "via", want.Gateway, "dev", "eth0"},
	} {
		if _, err := nsIP(ctx, nsPath, step...); err != nil {
			return err
		}
	}
	return nil
}

// readNetNSEth0 reads eth0's first IPv4 address and the default gateway.
func readNetNSEth0(ctx context.Context, nsPath string) (netnsEth0, error) {
	var n netnsEth0
	out, err := nsIP(ctx, nsPath, "-j", "-4", "addr", "show", "dev", "eth0")
	if err != nil {
		return n, err
	}
	var links []struct {
		AddrInfo []struct {
			Local     string `json:"local"`
			PrefixLen int    `json:"prefixlen"`
		} `json:"addr_info"`
	}
	if err := json.Unmarshal(out, &links); err != nil {
		return n, fmt.Errorf("oci: parse ip addr: %w", err)
	}
	for _, l := range links {
		for _, a := range l.AddrInfo {
			if n.Addr == "" && a.Local != "" {
				n.Addr = fmt.Sprintf("%s/%d", a.Local, a.PrefixLen)
			}
		}
	}
	if n.Addr == "" {
		return n, nil
	}
	out, err = nsIP(ctx, nsPath, "-j", "-4", "route", "show", "default")
	if err != nil {
		return n, err
	}
	var routes []struct {
		Gateway string `json:"gateway"`
	}
	if err := json.Unmarshal(out, &routes); err != nil {
		return n, fmt.Errorf("oci: parse ip route: %w", err)
	}
	if len(routes) > 0 {
		n.Gateway = routes[0].Gateway
	}
	return n, nil
}

// nsIP runs iproute2's ip inside the network namespace at nsPath.
func nsIP(ctx context.Context, nsPath string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "nsenter", append([]string{"--net=" + nsPath, "--", "ip"}, args...)...).Output()
	if err != nil {
		var ee *exec.ExitError
		msg := err.Error()
		if errors.As(err, &ee) {
			msg = firstLine(ee.Stderr)
		}
		return nil, fmt.Errorf("oci: ip %v in the sandbox namespace: %s: %w", args, msg, errdefs.ErrUnavailable)
	}
	return out, nil
}

// runscNullNetNS is where runsc releases since 2025 bind-mount the empty
// network namespace they start every gofer in (below --root), so later
// gofers join it instead of making a new one. The mount outlives every
// container; it is dropped when the backend closes (the daemon stops), so
// nothing stays mounted under the state dir. Running gofers keep their
// namespace; the next start pins a new one.
const runscNullNetNS = "null-netns"

// unpinNullNetNS unmounts runscNullNetNS; concurrent runsc invocations
// may have stacked several mounts there.
func (r *Runtime) unpinNullNetNS() {
	if r.kind != KindRunsc {
		return
	}
	path := filepath.Join(r.stateDir(), runscNullNetNS)
	for i := 0; i < 64 && unix.Unmount(path, unix.MNT_DETACH) == nil; i++ {
	}
}
