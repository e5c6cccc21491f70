package wsh

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/internal/workspace/vfs"
)

// sample is a small workspace: src/ with two files, notes.txt.
func sample(t testing.TB) *vfs.Tree {
	t.Helper()
	tr, err := vfs.New(nil, nil, vfs.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	put := func(name, data string) {
		f, err := tr.OpenFile(name, os.O_WRONLY|os.O_CREATE, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(f, data)
		f.Close()
	}
	tr.Mkdir("src", 0o755)
	put("src/a.go", "package a\n\nfunc A() int { return 1 }\n// TODO: more\n")
	put("src/b.go", "package a\n\nfunc B() int { return 2 }\n")
	put("notes.txt", "banana\napple\ncherry\napple\n")
	return tr
}

func sh(t testing.TB, tr vfs.FS, script string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	res := Run(context.Background(), tr, Options{Script: script, Stdout: &out, Stderr: &errb, Timeout: 10 * time.Second})
	return out.String(), errb.String(), res.ExitCode
}

func TestTools(t *testing.T) {
	for _, c := range []struct{ script, want string }{
		{"cat notes.txt | sort | uniq -c", "      2 apple\n      1 banana\n      1 cherry\n"},
		{"sort -r notes.txt | head -n 2", "cherry\nbanana\n"},
		{"sort -u notes.txt", "apple\nbanana\ncherry\n"},
		{"grep -rn TODO .", "./src/a.go:4:// TODO: more\n"},
		{"grep -rl 'func [AB]' src", "src/a.go\nsrc/b.go\n"},
		{"grep -c apple notes.txt", "2\n"},
		{"grep -v -e apple -e cherry notes.txt", "banana\n"},
		{"grep -E 'ban|che' notes.txt", "banana\ncherry\n"},
		{"grep 'a\\(pp\\)' notes.txt | wc -l", "2\n"},
		{"grep -o 'an' notes.txt", "an\nan\n"},
		{"grep -rh --include='*.go' package .", "package a\npackage a\n"},
		{"wc -l notes.txt", "4 notes.txt\n"},
		{"wc -l < notes.txt", "4\n"},
		{"echo hi | wc -c", "3\n"},
		{"ls", "notes.txt\nsrc\n"},
		{"ls src", "a.go\nb.go\n"},
		{"find . -name '*.go' | sort", "./src/a.go\n./src/b.go\n"},
		{"find . -type d", ".\n./src\n"},
		{"find src -maxdepth 0", "src\n"},
		{"head -n 1 src/a.go; tail -n 1 notes.txt", "package a\napple\n"},
		{"tail -n +3 notes.txt", "cherry\napple\n"},
		{"sed -n '2p' notes.txt", "apple\n"},
		{"sed 's/a/A/g' notes.txt | head -n 1", "bAnAnA\n"},
		{"sed -e '/apple/d' notes.txt", "banana\ncherry\n"},
		{"sed -E 's/(b)(an)/\\2\\1/' notes.txt | head -n 1", "anbana\n"},
		{"sed '1,2d' notes.txt", "cherry\napple\n"},
		{"sed -n '/banana/,/cherry/p' notes.txt", "banana\napple\ncherry\n"},
		{"sed '$a\\\nend' notes.txt | tail -n 1", "end\n"},
		{"printf 'a,b,c\\n1,2,3\\n' | cut -d, -f2", "b\n2\n"},
		{"echo hello | tr a-z A-Z", "HELLO\n"},
		{"echo 'a  b' | tr -s ' '", "a b\n"},
		{"echo hello | tr -d l", "heo\n"},
		{"seq 3", "1\n2\n3\n"},
		{"seq 2 2 6 | paste -s -d+", "2+4+6\n"},
		{"basename /x/y/z.go .go; dirname /x/y/z.go", "z\n/x/y\n"},
		{"echo abc | rev", "cba\n"},
		{"printf 'src/a.go\\nsrc/b.go\\n' | xargs grep -l 'B()'", "src/b.go\n"},
		{"ls src | xargs -I{} echo file {}", "file a.go\nfile b.go\n"},
		{"for f in src/*.go; do echo $f; done", "src/a.go\nsrc/b.go\n"},
		{"cd src && pwd && ls", "/workspace/src\na.go\nb.go\n"},
		{"x=$(cat notes.txt | wc -l); echo $((x * 2))", "8\n"},
		{"test -f notes.txt && echo yes; [ -d src ] && echo dir", "yes\ndir\n"},
		{"command -v grep; type cd", "grep\ncd is a shell builtin\n"},
		{"cat <<EOF\nhere $((1+1))\nEOF", "here 2\n"},
		{"f() { echo \"f:$1\"; }; f one", "f:one\n"},
	} {
		out, errOut, code := sh(t, sample(t), c.script)
		if out != c.want || code != 0 {
			t.Errorf("%s\n got %q (exit %d, stderr %q)\nwant %q", c.script, out, code, errOut, c.want)
		}
	}
}

func TestChanges(t *testing.T) {
	tr := sample(t)
	script := `mkdir -p out/deep && echo x > out/deep/x.txt && sed -i 's/return 1/return 10/' src/a.go &&
		mv notes.txt out/ && cp -r src copy && rm src/b.go && touch empty && chmod +x copy/a.go`
	if _, errOut, code := sh(t, tr, script); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	out, _, _ := sh(t, tr, "find . -type f | sort; grep -h return src/a.go; ls -l copy/a.go | cut -c1-10")
	want := "./copy/a.go\n./copy/b.go\n./empty\n./out/deep/x.txt\n./out/notes.txt\n./src/a.go\nfunc A() int { return 10 }\n-rwxr-xr-x\n"
	if out != want {
		t.Fatalf("after the script:\n%s\nwant\n%s", out, want)
	}
	var got []string
	for _, c := range tr.Changes() {
		got = append(got, fmt.Sprintf("%s:%v", c.Path, c.Removed))
	}
	if len(got) != 10 {
		t.Fatalf("changes %v", got)
	}
}

func TestExitCodes(t *testing.T) {
	tr := sample(t)
	for script, want := range map[string]int{
		"grep nothing notes.txt":     1,
		"grep x missing.txt":         2,
		"python3 -c 'print(1)'":      127,
		"cat missing":                1,
		"diff notes.txt notes.txt":   0,
		"diff notes.txt src/a.go":    1,
		"exit 7":                     7,
		"false || exit 3":            3,
		"ls nowhere":                 2,
		"rm src":                     1,
		"cat <(echo hi)":             2,
		"sed -i 's/x/y/' notes.txt ": 0,
	} {
		_, errOut, code := sh(t, tr, script)
		if code != want {
			t.Errorf("%s: exit %d, want %d (stderr %q)", script, code, want, errOut)
		}
	}
	_, errOut, _ := sh(t, tr, "python3 -c 'print(1)'")
	if !strings.Contains(errOut, "python3: command not found (the shell executor has no python3") {
		t.Fatalf("unknown command says %q", errOut)
	}
}

// TestNoHostAccess: nothing of the host is visible or reachable.
func TestNoHostAccess(t *testing.T) {
	t.Setenv("PADDOCK_SECRET_OF_THE_HOST", "s3cr3t")
	tr := sample(t)
	leaks := []string{"root:x", "s3cr3t"}
	if h, err := os.Hostname(); err == nil && len(h) > 3 {
		leaks = append(leaks, h)
	}
	hostRoot := map[string]bool{}
	ents, _ := os.ReadDir("/")
	for _, e := range ents {
		hostRoot[e.Name()] = true
	}
	for _, script := range []string{
		"cat /etc/passwd", "test -e /etc/passwd && echo exists", "ls /", "echo /*", "echo /e*/*",
		"cd /etc && ls", "cd .. && ls", "cd /workspace/.. && pwd", "type cat", "command -v python3 sh ls",
		"type /bin/sh", "source /etc/profile", ". /etc/profile", "env", "export -p", "echo $PADDOCK_SECRET_OF_THE_HOST",
		"pwd -P", "cat ../../etc/passwd", "grep -r root /etc", "find / -maxdepth 1", "cp /etc/passwd x; cat x",
		"echo hi > /tmp/x; cat /tmp/x", "ls -la /proc/self", "test -O notes.txt && echo mine", "exec /bin/ls",
		"cat < /etc/hostname", "source profile", "while read l; do echo $l; done < /etc/passwd",
	} {
		out, errOut, _ := sh(t, tr, script)
		all := out + errOut
		for _, leak := range leaks {
			if strings.Contains(all, leak) {
				t.Errorf("%s: output shows %q of the host:\n%s", script, leak, all)
			}
		}
		for _, l := range strings.Split(out, "\n") {
			if hostRoot[strings.Trim(l, "/")] || hostRoot[strings.TrimPrefix(l, "/workspace/../")] {
				t.Errorf("%s: output lists the host's /%s:\n%s", script, l, out)
			}
		}
	}
	if _, err := os.Stat("/tmp/x"); err == nil {
		data, _ := os.ReadFile("/tmp/x")
		if string(data) == "hi\n" {
			t.Fatal("the shell wrote a host file")
		}
	}
}

// TestNoHostWrites: a host file, named by its absolute path and through
// "..", survives every way the shell has to remove, move, overwrite,
// truncate, append to or change it. The file is the test's own, so a
// failure harms nothing else of the host.
func TestNoHostWrites(t *testing.T) {
	dir := t.TempDir()
	host := dir + "/sentinel"
	const content = "host file\n"
	if err := os.WriteFile(host, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	up := strings.Repeat("../", strings.Count(dir, "/")+2) + strings.TrimPrefix(host, "/")
	for _, p := range []string{host, up} {
		for _, script := range []string{
			"rm -f " + p, "rm -rf " + p, "rm -rf " + dir, "mv " + p + " moved", "mv notes.txt " + p,
			"cp notes.txt " + p, "echo x > " + p, ": > " + p, "echo x >> " + p, "truncate -s 0 " + p,
			"chmod 000 " + p, "touch " + p, "sed -i s/host/gone/ " + p, "ln -sf notes.txt " + p,
			"cd / && rm -f " + strings.TrimPrefix(p, "/"), "tee " + p + " < notes.txt", "mkdir -p " + p + "/x",
		} {
			sh(t, sample(t), script)
			fi, err := os.Lstat(host)
			if err != nil {
				t.Fatalf("%s: the host file is gone: %v", script, err)
			}
			if data, _ := os.ReadFile(host); string(data) != content || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o644 {
				t.Fatalf("%s: the host file changed: %q %v", script, data, fi.Mode())
			}
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("the shell made host files: %v", ents)
	}
}

// TestNoHostFIFOOpen: the interpreter opens paths named like its FIFOs
// in its temporary directory on the host without the open handler; that
// directory is one no host has, whatever TMPDIR a caller gives.
func TestNoHostFIFOOpen(t *testing.T) {
	f, err := os.CreateTemp("", "sh-interp-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(f.Name())
	f.WriteString("s3cr3t-of-the-host")
	f.Close()
	for _, env := range []map[string]string{nil, {"TMPDIR": os.TempDir()}} {
		var out, errb bytes.Buffer
		Run(context.Background(), sample(t), Options{Script: "cat < " + f.Name() + "; read l < " + f.Name() + "; echo $l", Env: env, Stdout: &out, Stderr: &errb})
		if strings.Contains(out.String()+errb.String(), "s3cr3t") {
			t.Fatalf("with env %v the shell read a host file: %s", env, out.String())
		}
	}
}

func TestBounds(t *testing.T) {
	tr := sample(t)
	var out bytes.Buffer
	res := Run(context.Background(), tr, Options{Script: "while :; do :; done", Timeout: 200 * time.Millisecond, Stdout: &out})
	if res.Stopped != StoppedTimeout || res.ExitCode != 124 {
		t.Fatalf("endless loop: %+v", res)
	}
	out.Reset()
	res = Run(context.Background(), tr, Options{Script: "while :; do echo aaaaaaaaaa; done", MaxOutput: 1000, Stdout: &out})
	if res.Stopped != StoppedOutput || out.Len() > 1000+200 {
		t.Fatalf("endless output: %+v, %d bytes", res, out.Len())
	}
	res = Run(context.Background(), tr, Options{Script: "x=aaaaaaaaaaaaaaaa; while :; do x=$x$x; done", MaxMemory: 16 << 20})
	if res.Stopped != StoppedMemory {
		t.Fatalf("doubling variable: %+v", res)
	}
	res = Run(context.Background(), tr, Options{Script: "x=$(seq 1 100000000)", MaxMemory: 16 << 20, Timeout: 2 * time.Minute})
	if res.Stopped != StoppedMemory {
		t.Fatalf("huge command substitution: %+v", res)
	}
	res = Run(context.Background(), tr, Options{Script: "sleep 30", Timeout: 100 * time.Millisecond})
	if res.Stopped != StoppedTimeout || res.Duration > 5*time.Second {
		t.Fatalf("sleep past the timeout: %+v", res)
	}
}

func TestQuotaInsideTheShell(t *testing.T) {
	tr, _ := vfs.New(nil, nil, vfs.Limits{MaxBytes: 100})
	_, errOut, code := sh(t, tr, "seq 1 1000 > big")
	if code == 0 || !strings.Contains(errOut, "quota") {
		t.Fatalf("writing past the quota: exit %d, %q", code, errOut)
	}
}

func TestNeeds(t *testing.T) {
	for script, want := range map[string]string{
		"grep -r x . | wc -l":              "[]",
		"python3 main.py && git status":    "[git python3]",
		"f() { ls; }; f":                   "[]",
		"xargs -n 1 node < list":           "[node]",
		"$tool --version":                  "[$tool]",
		"if [ -f x ]; then make; fi":       "[make]",
		"echo $(uname -a)":                 "[uname]",
		"env FOO=1 npm test":               "[npm]",
		"cat x | sed 's/a/b/' | sort -u":   "[]",
		"for i in 1 2; do cargo b; done":   "[cargo]",
		"command -v go >/dev/null || true": "[]",
	} {
		got, err := Needs(script)
		if err != nil || fmt.Sprint(got) != want {
			t.Errorf("Needs(%q) = %v, %v; want %s", script, got, err, want)
		}
	}
}

func BenchmarkSmallCommand(b *testing.B) {
	tr := sample(b)
	for b.Loop() {
		Run(context.Background(), tr, Options{Script: "cat notes.txt"})
	}
}

func BenchmarkGrepTwoThousandFiles(b *testing.B) {
	tr, _ := vfs.New(nil, nil, vfs.Limits{})
	for d := range 20 {
		tr.Mkdir(fmt.Sprintf("d%d", d), 0o755)
		for i := range 100 {
			f, _ := tr.OpenFile(fmt.Sprintf("d%d/f%d.txt", d, i), os.O_WRONLY|os.O_CREATE, 0o644)
			fmt.Fprintf(f, "file %d\nthe quick brown fox\njumps over the lazy dog\n", i)
			f.Close()
		}
	}
	for b.Loop() {
		Run(context.Background(), tr, Options{Script: "grep -r needle ."})
	}
}
