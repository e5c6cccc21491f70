package wjs

import (
	"bytes"
	"context"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/internal/workspace/vfs"
)

// TestMain makes the test binary the executor's child when started as
// one, as the daemon's binary is.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[len(os.Args)-1] == ChildArg {
		ChildMain()
	}
	os.Exit(m.Run())
}

var childCommand = []string{"/proc/self/exe", ChildArg}

func sample(t testing.TB, lim vfs.Limits) *vfs.Tree {
	t.Helper()
	tr, err := vfs.New(nil, nil, lim)
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
	put("src/a.js", "module = 1\n")
	put("data.json", `{"n": 41}`)
	put("notes.txt", "banana\napple\n")
	return tr
}

type ran struct {
	Result
	out, err string
}

func js(t testing.TB, fsys vfs.FS, opts Options) ran {
	t.Helper()
	var out, errb bytes.Buffer
	opts.Command, opts.Stdout, opts.Stderr = childCommand, &out, &errb
	if opts.Timeout == 0 {
		opts.Timeout = 20 * time.Second
	}
	res := Run(context.Background(), fsys, opts)
	return ran{res, out.String(), errb.String()}
}

func TestFilesConsoleProcess(t *testing.T) {
	tr := sample(t, vfs.Limits{})
	r := js(t, tr, Options{Source: `
const fs = require('fs'), path = require('node:path');
const d = JSON.parse(fs.readFileSync('data.json', 'utf8'));
d.n += 1;
fs.mkdirSync('out/deep', {recursive: true});
fs.writeFileSync(path.join('out', 'deep', 'd.json'), JSON.stringify(d));
fs.appendFileSync('notes.txt', 'cherry\n');
fs.renameSync('src/a.js', 'src/b.js');
fs.copyFileSync('src/b.js', '/workspace/src/c.js');
fs.rmSync('src/b.js');
console.log(fs.readdirSync('src'), fs.existsSync('src/b.js'), fs.statSync('out').isDirectory(), fs.statSync('notes.txt').size);
console.log('args', process.argv.slice(1).join(','), process.env.GREETING, process.cwd());
console.error(new Error('to stderr').message, {a: [1, 2]}, null, undefined, 3);
fs.readFile('notes.txt', 'utf8', (err, s) => console.log('cb', err, s.split('\n').length));
fs.readFile('missing', (err) => console.log('cb err', err.code));
const bytes = fs.readFileSync('data.json', null);
console.log(bytes.length, bytes[0]);
fs.writeFileSync('bin', new Uint8Array([0, 255, 10]));
console.log(fs.readFileSync(0, 'utf8').trim());
process.exitCode = 3;
`, Args: []string{"a", "b"}, Env: map[string]string{"GREETING": "hi"}, Stdin: []byte("from stdin\n")})
	if r.Stopped != "" || r.ExitCode != 3 {
		t.Fatalf("%+v\nstdout %s\nstderr %s", r.Result, r.out, r.err)
	}
	// The callbacks run after the program's top level, as in Node.
	want := `["c.js"] false true 20
args a,b hi /workspace
9 123
from stdin
cb null 4
cb err ENOENT
`
	if r.out != want {
		t.Errorf("stdout:\n%s\nwant:\n%s", r.out, want)
	}
	if r.err != "to stderr {\"a\":[1,2]} null undefined 3\n" {
		t.Errorf("stderr %q", r.err)
	}
	got := map[string]bool{}
	for _, c := range tr.Changes() {
		got[c.Path] = true
	}
	if _, err := tr.Stat("src/a.js"); err == nil {
		t.Error("src/a.js is still there after its rename")
	}
	for _, p := range []string{"out/deep/d.json", "notes.txt", "src/c.js", "bin"} {
		if !got[p] {
			t.Errorf("no change of %s in %v", p, got)
		}
	}
	if b, _ := tr.ReadFile("out/deep/d.json"); string(b) != `{"n":42}` {
		t.Errorf("d.json %q", b)
	}
	if b, _ := tr.ReadFile("bin"); !bytes.Equal(b, []byte{0, 255, 10}) {
		t.Errorf("bin %v", b)
	}
}

func TestProgramFileAndErrors(t *testing.T) {
	tr := sample(t, vfs.Limits{})
	tr.Mkdir("tools", 0o755)
	f, _ := tr.OpenFile("tools/count.js", os.O_WRONLY|os.O_CREATE, 0o644)
	io.WriteString(f, "console.log(process.argv[1], process.argv[2], require('fs').readFileSync('../notes.txt', 'utf8').split('\\n').length)\n")
	f.Close()
	if r := js(t, tr, Options{File: "count.js", Dir: "tools", Args: []string{"x"}}); r.ExitCode != 0 || r.out != "/workspace/tools/count.js x 3\n" {
		t.Fatalf("a program from a file: %+v %q %q", r.Result, r.out, r.err)
	}
	for _, c := range []struct{ src, stderr string }{
		{"throw new Error('boom')", "Uncaught Error: boom"},
		{"function f() { return f() + 1 } f()", "Maximum call stack size exceeded"},
		{"require('child_process')", "Cannot find module 'child_process'"},
		{"this is not javascript", "SyntaxError"},
		{"fs.readFileSync('nope')", "ENOENT: no such file or directory, read '/workspace/nope'"},
		{"fs.rmdirSync('notes.txt')", "ENOTDIR"},
		{"fs.rmSync('src')", "EISDIR"},
		{"fs.rmdirSync('src')", "ENOTEMPTY"},
		{"fs.mkdirSync('src')", "EEXIST"},
	} {
		r := js(t, tr, Options{Source: c.src})
		if r.ExitCode != 1 || r.Stopped != "" || !strings.Contains(r.err, c.stderr) {
			t.Errorf("%s: exit %d stopped %q stderr %q, want 1 and %q", c.src, r.ExitCode, r.Stopped, r.err, c.stderr)
		}
	}
	if r := js(t, tr, Options{Source: "process.exit(7); console.log('not reached')"}); r.ExitCode != 7 || r.out != "" {
		t.Errorf("process.exit: %+v %q", r.Result, r.out)
	}
	if r := js(t, tr, Options{File: "nope.js"}); r.ExitCode != 2 || !strings.Contains(r.err, "nope.js") {
		t.Errorf("a missing program file: %+v %q", r.Result, r.err)
	}
}

// TestNoHostAccess: every path outside the workspace is refused, a host
// file of the test's own survives every way fs has to change it, and the
// engine offers nothing else that reaches the host.
func TestNoHostAccess(t *testing.T) {
	dir := t.TempDir()
	host := dir + "/sentinel"
	if err := os.WriteFile(host, []byte("host file\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	up := strings.Repeat("../", strings.Count(dir, "/")+2) + strings.TrimPrefix(host, "/")
	for _, p := range []string{host, up, "/etc/passwd", "/workspace/../etc/passwd", "/proc/self/environ"} {
		for _, src := range []string{
			"fs.readFileSync(%q)", "fs.writeFileSync(%q, 'x')", "fs.appendFileSync(%q, 'x')", "fs.rmSync(%q, {force: true})",
			"fs.unlinkSync(%q)", "fs.renameSync(%q, 'x')", "fs.renameSync('notes.txt', %q)", "fs.copyFileSync('notes.txt', %q)",
			"fs.chmodSync(%q, 0)", "fs.mkdirSync(%q + '.d', {recursive: true})", "fs.readdirSync(%q + '/..')", "fs.statSync(%q)",
			"process.chdir(%q + '/..')",
		} {
			code := strings.ReplaceAll(src, "%q", "'"+p+"'")
			r := js(t, sample(t, vfs.Limits{}), Options{Source: code})
			if r.ExitCode != 1 || !strings.Contains(r.err, "EACCES") {
				t.Errorf("%s: exit %d, stderr %q; want EACCES", code, r.ExitCode, r.err)
			}
			if data, err := os.ReadFile(host); err != nil || string(data) != "host file\n" {
				t.Fatalf("%s: the host file changed: %q %v", code, data, err)
			}
		}
	}
	if r := js(t, sample(t, vfs.Limits{}), Options{Source: "console.log(fs.existsSync('/etc/passwd'), typeof require('fs').openSync, typeof process.binding, typeof Java, Object.keys(process.env).length)"}); r.out != "false undefined undefined undefined 0\n" {
		t.Errorf("what the engine offers: %q %q", r.out, r.err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("the engine made host files: %v", ents)
	}
}

func TestBounds(t *testing.T) {
	for _, c := range []struct {
		name, src, stopped string
	}{
		{"loop", "for (;;) {}", StoppedTimeout},
		{"output", "for (;;) console.log('x'.repeat(1000))", StoppedOutput},
		{"memory", "const a = []; for (;;) a.push(new Uint8Array(1 << 20))", StoppedMemory},
		{"deep native", "let a = []; for (let i = 0; i < 3000000; i++) a = [a]; JSON.stringify(a)", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			start := time.Now()
			r := js(t, sample(t, vfs.Limits{}), Options{Source: c.src, Timeout: 3 * time.Second, MaxOutput: 1 << 20, MaxMemory: 64 << 20})
			took := time.Since(start)
			if c.stopped != "" && r.Stopped != c.stopped {
				t.Fatalf("stopped %q (exit %d, stderr %q), want %q", r.Stopped, r.ExitCode, r.err, c.stopped)
			}
			if r.Stopped == "" {
				t.Fatalf("not stopped: exit %d, stderr %q", r.ExitCode, r.err)
			}
			if took > 8*time.Second {
				t.Fatalf("stopped after %s", took)
			}
			if r.ExitCode != 124 && r.ExitCode != 125 {
				t.Fatalf("exit %d", r.ExitCode)
			}
			if c.stopped == StoppedOutput && len(r.out) > 1<<20 {
				t.Fatalf("%d bytes of output kept, bound 1 MiB", len(r.out))
			}
		})
	}
}

func TestQuota(t *testing.T) {
	tr := sample(t, vfs.Limits{MaxBytes: 1 << 10})
	r := js(t, tr, Options{Source: "try { fs.writeFileSync('big', 'x'.repeat(4096)) } catch (e) { console.log(e.code) }"})
	if r.out != "EDQUOT\n" {
		t.Fatalf("%q %q", r.out, r.err)
	}
}

func BenchmarkSmallProgram(b *testing.B) {
	tr := sample(b, vfs.Limits{})
	for b.Loop() {
		if r := js(b, tr, Options{Source: "console.log(fs.readFileSync('notes.txt', 'utf8').length)"}); r.ExitCode != 0 {
			b.Fatal(r.err)
		}
	}
}

// FuzzReadFrame: a frame of any bytes is read whole or refused, never
// past its bounds.
func FuzzReadFrame(f *testing.F) {
	var good bytes.Buffer
	writeFrame(&good, request{Op: opWrite, Path: "/workspace/x"}, []byte("data"))
	f.Add(good.Bytes())
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0})
	f.Add([]byte{0, 0, 0, 2, 0xff, 0xff, 0xff, 0xff, '{', '}'})
	f.Fuzz(func(t *testing.T, b []byte) {
		var c request
		data, err := readFrame(bytes.NewReader(b), &c)
		if err == nil && len(data)+8 > len(b) {
			t.Fatalf("%d bytes of data from a %d-byte frame", len(data), len(b))
		}
	})
}
