package oci

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock/internal/errdefs"
)

// testNetNS makes a named network namespace with an eth0 (one end of a veth pair kept inside)
// configured as the daemon's netns package does, and returns its path.
func testNetNS(t *testing.T, name string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates a network namespace")
	}
	for _, bin := range []string{"ip", "nsenter"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("needs %s (iproute2, util-linux)", bin)
		}
	}
	_ = exec.Command("ip", "netns", "del", name).Run()
	ipRun(t, "netns", "add", name)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", name).Run() })
	ipRun(t, "-n", name, "link", "add", "eth0", "type", "veth", "peer", "name", "peer0")
	ipRun(t, "-n", name, "addr", "add", "100.127.236.250/30", "dev", "eth0")
	ipRun(t, "-n", name, "link", "set", "eth0", "up")
	ipRun(t, "-n", name, "route", "add", "default", "via", "100.127.236.249")
	return "/run/netns/" + name
}

func ipRun(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestHandOverNetNS: the first start records eth0, a start after gVisor
// stripped it puts it back, and a bare namespace with no usable record is
// refused rather than started without a network.
func TestHandOverNetNS(t *testing.T) {
	ctx := context.Background()
	ns := testNetNS(t, "pdtest-handover")
	name := filepath.Base(ns)
	record := filepath.Join(t.TempDir(), netnsRecordName)
	strip := func() { ipRun(t, "-n", name, "addr", "flush", "dev", "eth0") }

	if err := handOverNetNS(ctx, ns, record); err != nil {
		t.Fatalf("first start: %v", err)
	}
	strip()
	if err := handOverNetNS(ctx, ns, record); err != nil {
		t.Fatalf("after strip: %v", err)
	}
	if got := ipRun(t, "-n", name, "-4", "addr", "show", "dev", "eth0"); !strings.Contains(got, "100.127.236.250/30") {
		t.Fatalf("address not restored: %s", got)
	}
	if got := ipRun(t, "-n", name, "-4", "route", "show", "default"); !strings.Contains(got, "via 100.127.236.249") {
		t.Fatalf("route not restored: %s", got)
	}

	cases := []struct {
		name   string
		record string // "" = none
	}{
		{"no record", ""},
		{"damaged record", `{"addr":"100.127.236.250/30"`},
		{"gateway outside the prefix", `{"addr":"100.127.236.250/30","gateway":"10.0.0.1"}`},
		{"not an address", `{"addr":"eth0; rm -rf /","gateway":"100.127.236.249"}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec := filepath.Join(t.TempDir(), netnsRecordName)
			if c.record != "" {
				if err := os.WriteFile(rec, []byte(c.record), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			strip()
			err := handOverNetNS(ctx, ns, rec)
			if !errors.Is(err, errdefs.ErrFailedPrecondition) {
				t.Fatalf("got %v, want a failed precondition", err)
			}
		})
	}
}

func TestCheckNotHostNetNS(t *testing.T) {
	ns := testNetNS(t, "pdtest-hostcheck")
	cases := []struct {
		path string
		ok   bool
	}{
		{ns, true},
		{"/proc/self/ns/net", false},
		{"/proc/1/ns/net", false},
		{"/nonexistent/ns", false},
	}
	for _, c := range cases {
		if err := checkNotHostNetNS(c.path); (err == nil) != c.ok {
			t.Errorf("%s: err %v, want ok=%v", c.path, err, c.ok)
		}
	}
}
