package wjs

import (
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/internal/workspace/vfs"
)

// TestEventLoop: timers run by when they are due, after the top level and
// the immediates, with their arguments; intervals repeat until cleared;
// promise jobs run between callbacks; async functions await fs.promises;
// a callback that throws ends the program with its error, as does a
// rejection nothing handles.
func TestEventLoop(t *testing.T) {
	tr := sample(t, vfs.Limits{})
	start := time.Now()
	r := js(t, tr, Options{Source: `
const out = [];
setTimeout((a, b) => out.push('t300 ' + a + b), 300, 'x', 'y');
setTimeout(() => out.push('t10'), 10);
const never = setTimeout(() => out.push('never'), 5);
clearTimeout(never);
setImmediate(() => out.push('immediate'));
Promise.resolve().then(() => out.push('micro'));
queueMicrotask(() => out.push('queued'));
let n = 0;
const iv = setInterval(() => { out.push('iv' + (++n)); if (n === 3) clearInterval(iv); }, 5);
async function main() {
  const s = await fs.promises.readFile('notes.txt', 'utf8');
  out.push('awaited ' + s.split('\n')[0]);
  try { await fs.promises.readFile('missing'); } catch (e) { out.push('caught ' + e.code); }
  await new Promise((resolve) => setTimeout(resolve, 400));
  await fs.promises.writeFile('late.txt', 'done');
  console.log(out.join(','));
}
main();
out.push('top');
`})
	if r.Stopped != "" || r.ExitCode != 0 {
		t.Fatalf("%+v\nstdout %s\nstderr %s", r.Result, r.out, r.err)
	}
	got := strings.TrimSpace(r.out)
	for _, order := range [][2]string{
		{"top", "micro"}, {"micro", "queued"}, {"queued", "immediate"},
		{"immediate", "iv1"}, {"iv1", "t10"}, {"t10", "t300 xy"}, {"iv3", "t300 xy"},
	} {
		i, j := strings.Index(got, order[0]), strings.Index(got, order[1])
		if i < 0 || j < 0 || i > j {
			t.Fatalf("%q before %q expected in %s", order[0], order[1], got)
		}
	}
	if strings.Contains(got, "never") || strings.Contains(got, "iv4") || !strings.Contains(got, "caught ENOENT") {
		t.Fatalf("events: %s", got)
	}
	if d := time.Since(start); d < 400*time.Millisecond {
		t.Fatalf("the program ended after %s, before its 400 ms timer", d)
	}
	if b, err := tr.ReadFile("late.txt"); err != nil || string(b) != "done" {
		t.Fatalf("a write after an await: %q, %v", b, err)
	}

	// A throw in a timer ends the program with exit code 1 and its error.
	r = js(t, sample(t, vfs.Limits{}), Options{Source: `setTimeout(() => { throw new Error('boom in a timer'); }, 1); setTimeout(() => console.log('not reached'), 20);`})
	if r.ExitCode != 1 || !strings.Contains(r.err, "boom in a timer") || strings.Contains(r.out, "not reached") {
		t.Fatalf("a throwing timer: %+v %q %q", r.Result, r.out, r.err)
	}
	// So does a rejection nothing handles; one handled later in the same
	// turn is fine.
	r = js(t, sample(t, vfs.Limits{}), Options{Source: `const p = Promise.reject(new Error('handled')); p.catch(() => {}); Promise.reject(new Error('nobody handles this'));`})
	if r.ExitCode != 1 || !strings.Contains(r.err, "Uncaught (in promise)") || !strings.Contains(r.err, "nobody handles this") || strings.Contains(r.err, "handled'") {
		t.Fatalf("an unhandled rejection: %+v %q", r.Result, r.err)
	}
	// An interval that never ends is stopped by the command's timeout,
	// and what it printed before reaches the caller.
	r = js(t, sample(t, vfs.Limits{}), Options{Timeout: 500 * time.Millisecond, Source: `setInterval(() => console.log('tick'), 20);`})
	if r.Stopped != "timeout" || !strings.Contains(r.out, "tick") {
		t.Fatalf("an endless interval: %+v %q", r.Result, r.out)
	}
}
