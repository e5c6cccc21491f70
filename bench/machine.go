package bench

import (
	"context"
	"os"
	"os/exec"
	goruntime "runtime"
	"strings"
	"time"

	"github.com/paddock-dev/paddock/internal/config"
)

// Machine describes where a run happened, so figures from different
// machines are never compared by mistake.
type Machine struct {
	CPU        string `json:"cpu"`
	Cores      int    `json:"cores"`
	MemoryMiB  int64  `json:"memory_mib"`
	Kernel     string `json:"kernel"`
	Cgroup     string `json:"cgroup"`
	Runc       string `json:"runc"`
	Runsc      string `json:"runsc"`
	Podman     string `json:"podman"`
	Go         string `json:"go"`
	Commit     string `json:"commit"`
	Paddock    string `json:"paddock_version,omitempty"`
	Hostname   string `json:"-"`
	RecordedAt string `json:"recorded_at"`
}

// ProbeMachine gathers the machine description. repoDir is the source
// tree whose commit is recorded; missing tools are recorded as such.
func ProbeMachine(ctx context.Context, repoDir string) Machine {
	m := Machine{Cores: goruntime.NumCPU(), RecordedAt: time.Now().UTC().Format(time.RFC3339)}
	if b, err := readBounded("/proc/cpuinfo"); err == nil {
		if v, err := parseStringField(b, "model name"); err == nil {
			m.CPU = strings.TrimSpace(strings.TrimPrefix(v, ":"))
		}
	}
	if b, err := readBounded("/proc/meminfo"); err == nil {
		if kb, err := parseKiBField(b, "MemTotal:"); err == nil {
			m.MemoryMiB = kb / 1024
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	m.Cgroup = "v1"
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		m.Cgroup = "v2"
	}
	m.Runc = toolVersion(ctx, "runc", "--version")
	m.Runsc = toolVersion(ctx, config.RunscFromEnv(os.Getenv), "--version")
	if deb := toolVersion(ctx, "runsc", "--version"); deb != m.Runsc {
		m.Runsc += " (PATH: " + deb + ")"
	}
	m.Podman = toolVersion(ctx, "podman", "--version")
	m.Go = toolVersion(ctx, "go", "version")
	if m.Go == "not installed" {
		m.Go = goruntime.Version() + " (harness build)"
	}
	m.Commit = gitCommit(ctx, repoDir)
	return m
}

func toolVersion(ctx context.Context, bin string, args ...string) string {
	if _, err := exec.LookPath(bin); err != nil {
		return "not installed"
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(cctx, bin, args...).Output()
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	return firstLines(string(out), 2)
}

func firstLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[:n]
	}
	for i := range lines {
		lines[i] = strings.TrimSpace(lines[i])
	}
	return strings.Join(lines, "; ")
}

// gitCommit reads (never changes) the tree's commit, marking uncommitted
// changes: figures measured on a dirty tree belong to no commit exactly.
func gitCommit(ctx context.Context, dir string) string {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(cctx, "git", "-C", dir, "rev-parse", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	commit := strings.TrimSpace(string(out))
	st, err := exec.CommandContext(cctx, "git", "-C", dir, "status", "--porcelain").Output()
	if err == nil {
		if dirs := changedTopDirs(string(st)); len(dirs) > 0 {
			commit += " (uncommitted changes in: " + strings.Join(dirs, ", ") + ")"
		}
	}
	return commit
}

// changedTopDirs names the top-level entries that `git status --porcelain`
// reports as changed, so a reader can tell whether the changes touch the
// measured code or only the harness.
func changedTopDirs(porcelain string) []string {
	seen := map[string]bool{}
	var out []string
	for _, line := range strings.Split(porcelain, "\n") {
		if len(line) < 4 {
			continue
		}
		p := strings.Trim(line[3:], `"`)
		if _, to, ok := strings.Cut(p, " -> "); ok {
			p = to
		}
		top, _, isDir := strings.Cut(p, "/")
		if isDir {
			top += "/"
		}
		if top != "" && !seen[top] {
			seen[top] = true
			out = append(out, top)
		}
	}
	if len(out) > 8 {
		out = append(out[:8], "...")
	}
	return out
}
