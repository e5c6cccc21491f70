package osproc

import (
	"maps"
	"os"
	"slices"
	"testing"
)

func TestBelow(t *testing.T) {
	// 1 ─ 2 ─ 4 ─ 6
	//   └ 3   └ 5      7 (another tree), and a loop 8 ⇄ 9 read mid-change.
	list := []Stat{{Pid: 1}, {Pid: 2, PPid: 1}, {Pid: 3, PPid: 1}, {Pid: 4, PPid: 2}, {Pid: 5, PPid: 4},
		{Pid: 6, PPid: 4}, {Pid: 7, PPid: 0}, {Pid: 8, PPid: 9}, {Pid: 9, PPid: 8}}
	for _, tc := range []struct {
		pid  int
		want []int
	}{{1, []int{2, 3, 4, 5, 6}}, {2, []int{4, 5, 6}}, {6, nil}, {8, []int{9}}, {42, nil}} {
		got := slices.Sorted(maps.Keys(Below(list, tc.pid)))
		if !slices.Equal(got, tc.want) {
			t.Errorf("Below(%d) = %v, want %v", tc.pid, got, tc.want)
		}
	}
}

// TestAllSeesThisProcess: the scan of the real /proc finds the test
// itself, parsed, with its parent.
func TestAllSeesThisProcess(t *testing.T) {
	var self *Stat
	all := All("/proc")
	for i := range all {
		if all[i].Pid == os.Getpid() {
			self = &all[i]
		}
	}
	if self == nil || self.PPid != os.Getppid() {
		t.Fatalf("this process in a scan of %d: %+v", len(all), self)
	}
}
