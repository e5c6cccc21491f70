package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// RemoveAllUnmounted removes dir unless something is still mounted below
// it: deleting through a leftover mount (a sandbox's root filesystem, a
// bind mount) would delete files that are not the harness's own.
func RemoveAllUnmounted(dir string) error {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return fmt.Errorf("cannot check mounts under %s, leaving it: %w", dir, err)
	}
	clean := filepath.Clean(dir)
	if mps := mountsUnder(string(data), clean); len(mps) > 0 {
		return fmt.Errorf("leaving %s in place: still mounted below it: %s", clean, strings.Join(mps, ", "))
	}
	return os.RemoveAll(clean)
}

// mountsUnder lists the mount points in a mountinfo text that are dir or
// below it.
func mountsUnder(mountinfo, dir string) []string {
	var out []string
	for _, line := range strings.Split(mountinfo, "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		mp := unescapeMountinfo(f[4])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			out = append(out, mp)
		}
	}
	return out
}

// unescapeMountinfo undoes the kernel's octal escapes (\040 for a space).
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
