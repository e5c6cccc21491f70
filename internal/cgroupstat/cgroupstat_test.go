package cgroupstat

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

func write(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestV2(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, map[string]string{
		"cgroup.controllers": "cpu memory\n",
		"cpu.stat":           "usage_usec 1500\nuser_usec 1000\nsystem_usec 500\n",
		"memory.current":     "4096\n",
		"memory.max":         "max\n",
		"memory.stat":        "anon 1024\nfile 2048\n",
	})
	if !IsV2(dir) {
		t.Fatal("a directory with cgroup.controllers is v2")
	}
	r, err := V2(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := Reading{CPUNanos: 1_500_000, MemoryBytes: 4096, MemoryCacheBytes: 2048}
	if r != want {
		t.Fatalf("got %+v, want %+v", r, want)
	}
	write(t, dir, map[string]string{"memory.max": "1048576\n"})
	if r, _ = V2(dir); r.MemoryLimitBytes != 1<<20 {
		t.Fatalf("limit %d", r.MemoryLimitBytes)
	}
	if err := os.Remove(filepath.Join(dir, "memory.current")); err != nil {
		t.Fatal(err)
	}
	if _, err := V2(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a missing file: %v", err)
	}
	write(t, dir, map[string]string{"memory.current": ""})
	if _, err := V2(dir); err == nil {
		t.Fatal("an empty file read as a number")
	}
}

func TestV1(t *testing.T) {
	root := t.TempDir()
	write(t, root, map[string]string{
		"cpu,cpuacct/a/cpuacct.usage":          "123456\n",
		"memory/a/memory.usage_in_bytes":       "8192\n",
		"memory/a/memory.limit_in_bytes":       "9223372036854771712\n",
		"memory/a/memory.stat":                 "cache 100\ntotal_cache 300\n",
		"memory/b/memory.usage_in_bytes":       "1\n",
		"memory/b/memory.limit_in_bytes":       "65536\n",
		"cpuacct/b/cpuacct.usage":              "7\n",
		"cpu,cpuacct/b/cpuacct.usage":          "999\n",
		"memory/garbage/memory.usage_in_bytes": "lots\n",
		"cpuacct/garbage/cpuacct.usage":        "1\n",
	})
	if IsV2(root) {
		t.Fatal("a v1 layout read as v2")
	}
	r, err := V1(root, "a")
	if err != nil {
		t.Fatal(err)
	}
	// No limit (the kernel's largest value) reads as 0, as v2's "max".
	want := Reading{CPUNanos: 123456, MemoryBytes: 8192, MemoryCacheBytes: 300}
	if r != want {
		t.Fatalf("got %+v, want %+v", r, want)
	}
	// cpuacct is preferred to the combined cpu,cpuacct mount.
	if r, err = V1(root, "b"); err != nil || r.CPUNanos != 7 || r.MemoryLimitBytes != 65536 {
		t.Fatalf("b: %+v %v", r, err)
	}
	if _, err := V1(root, "garbage"); err == nil {
		t.Fatal("a non-number read as a reading")
	}
	if _, err := V1(root, "gone"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a missing cgroup: %v", err)
	}
}

// Own reads this test's own cgroup from the real kernel.
func TestOwnOnThisKernel(t *testing.T) {
	r, err := Own()
	if err != nil {
		t.Fatal(err)
	}
	if r.MemoryBytes == 0 || r.CPUNanos == 0 {
		t.Fatalf("own cgroup reads empty: %+v", r)
	}
}
