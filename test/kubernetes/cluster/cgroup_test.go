package cluster

import (
	"bufio"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestCgroupHierarchiesCovered checks that every cgroup hierarchy mounted
// below /sys/fs/cgroup is one the harness makes, removes and checks its
// cgroup root in: runc puts a container's cgroup in each of them (on a
// hybrid host, the v2 "unified" one too), so one missing from the list
// would be left behind unseen. It only reads /proc/self/mountinfo.
func TestCgroupHierarchiesCovered(t *testing.T) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 64*1024), 1024*1024)
	for s.Scan() {
		// mountinfo: ... mount-point ... - fstype source options
		fields := strings.Fields(s.Text())
		sep := slices.Index(fields, "-")
		if len(fields) < 5 || sep < 0 || sep+1 >= len(fields) {
			continue
		}
		mp, fstype := unescapeMount(fields[4]), fields[sep+1]
		if (fstype != "cgroup" && fstype != "cgroup2") || filepath.Dir(mp) != "/sys/fs/cgroup" {
			continue
		}
		// A joint mount such as "cpu,cpuacct" is reached through each
		// name's link.
		for _, name := range strings.Split(filepath.Base(mp), ",") {
			if !slices.Contains(cgroupV1Controllers, name) {
				t.Errorf("cgroup hierarchy %s (%s) is not in cgroupV1Controllers: the cluster's cgroups there would be left behind", mp, fstype)
			}
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
}
