package adversarial

import (
	"errors"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/sdk/go/paddock"
)

// TestDiskAdmissionAgainstHost: a disk larger than the state dir's file
// system can hold (times the overcommit ratio, 0.5 here) is refused with
// the numbers; one that fits is created.
func TestDiskAdmissionAgainstHost(t *testing.T) {
	d := startDaemon(t, daemonOpts{env: []string{"PADDOCK_DISK_OVERCOMMIT=0.5"}})
	var st unix.Statfs_t
	if err := unix.Statfs(d.stateDir, &st); err != nil {
		t.Fatal(err)
	}
	freeMB := int64(st.Bavail * uint64(st.Bsize) >> 20)
	tooBig := freeMB/2 + 5<<10
	if tooBig > 200<<10 {
		t.Fatalf("the state dir's file system has %d MiB free: too much for this test's 200 GiB disk ceiling", freeMB)
	}
	_, err := d.client.Create(ctxT(t, 2*time.Minute), api.CreateSandboxRequest{Image: "busybox", Resources: api.Resources{DiskMB: tooBig}})
	if !errors.Is(err, paddock.ErrResourceExhausted) || !strings.Contains(err.Error(), "refused") || !strings.Contains(err.Error(), "available (overcommit 0.5") {
		t.Fatalf("create with a %d MiB disk on %d MiB free: %v, want resource exhausted with the numbers", tooBig, freeMB, err)
	}
	t.Logf("refused: %v", err)
	sb := create(t, d, api.CreateSandboxRequest{Image: "busybox", Resources: api.Resources{DiskMB: 1 << 10}})
	// What is granted counts: a second disk that would pass the rest is
	// refused now that the first holds its share.
	_, err = d.client.Create(ctxT(t, 2*time.Minute), api.CreateSandboxRequest{Image: "busybox", Resources: api.Resources{DiskMB: freeMB/2 - 512}})
	if !errors.Is(err, paddock.ErrResourceExhausted) || !strings.Contains(err.Error(), "1.0 GiB granted") {
		t.Fatalf("second create past what is left: %v, want resource exhausted counting the first sandbox's 1 GiB", err)
	}
	if err := d.client.Delete(ctxT(t, time.Minute), sb.ID); err != nil {
		t.Fatal(err)
	}
}
