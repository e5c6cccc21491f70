package kubernetes_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"testing"
	"time"
)

// TestUsageOnKubernetes reads a pod's usage through the daemon's event
// stream (`paddock events --usage`): the figures are the pod container's
// cgroup as its agent reads it, so the limit is the sandbox's memory and
// memory written by the sandbox is counted.
func TestUsageOnKubernetes(t *testing.T) {
	c := clusterFor(t)
	d := startPaddock(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	importImage(ctx, t, d, "busybox")
	var sb struct{ ID string }
	if err := json.Unmarshal([]byte(d.must("--json", "create", "--image", "busybox", "--memory", "256M")), &sb); err != nil {
		t.Fatal(err)
	}
	defer d.run("rm", "-f", sb.ID)
	// 48 MiB in a tmpfs is memory charged to the container's cgroup.
	d.must("exec", sb.ID, "--", "sh", "-c", "dd if=/dev/zero of=/dev/shm/fill bs=1M count=48 2>/dev/null && sync")

	sctx, scancel := context.WithTimeout(ctx, 60*time.Second)
	defer scancel()
	cmd := exec.CommandContext(sctx, d.bin, "--json", "events", "--usage")
	cmd.Env = append(cmd.Environ(), "PADDOCK_SOCKET="+d.socket)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { scancel(); _ = cmd.Wait() }()
	type usage struct {
		ID               string   `json:"id"`
		CPUPercent       *float64 `json:"cpu_percent"`
		MemoryBytes      uint64   `json:"memory_bytes"`
		MemoryLimitBytes uint64   `json:"memory_limit_bytes"`
		DiskUsedBytes    uint64   `json:"disk_used_bytes"`
		DiskTotalBytes   uint64   `json:"disk_total_bytes"`
	}
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	samples := 0
	for sc.Scan() {
		var ev struct {
			Type  string  `json:"type"`
			Usage []usage `json:"usage"`
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("event line %q: %v", sc.Text(), err)
		}
		for _, u := range ev.Usage {
			if u.ID != sb.ID {
				continue
			}
			cpu := "not yet"
			if u.CPUPercent != nil {
				cpu = fmt.Sprintf("%.1f%%", *u.CPUPercent)
			}
			t.Logf("figure: pod usage: memory %d MiB of %d MiB, disk %d of %d MiB, cpu %s",
				u.MemoryBytes>>20, u.MemoryLimitBytes>>20, u.DiskUsedBytes>>20, u.DiskTotalBytes>>20, cpu)
			if u.MemoryLimitBytes != 256<<20 {
				t.Fatalf("memory limit %d: want the sandbox's 256 MiB (the pod container's cgroup)", u.MemoryLimitBytes)
			}
			if u.MemoryBytes < 48<<20 || u.MemoryBytes > u.MemoryLimitBytes {
				t.Fatalf("memory %d: want at least the 48 MiB written to /dev/shm and at most the limit", u.MemoryBytes)
			}
			if u.DiskTotalBytes == 0 || u.DiskUsedBytes > u.DiskTotalBytes {
				t.Fatalf("disk: %d of %d", u.DiskUsedBytes, u.DiskTotalBytes)
			}
			samples++
			// The second sample has the CPU used between the two.
			if samples == 2 {
				if u.CPUPercent == nil {
					t.Fatal("a second sample without CPU use")
				}
				return
			}
		}
	}
	t.Fatalf("the event stream ended after %d samples of %s: %v", samples, sb.ID, sc.Err())
}
