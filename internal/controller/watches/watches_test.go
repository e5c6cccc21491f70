package watches

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/controller"
	"github.com/paddock-dev/paddock/internal/controller/controllertest"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/runtime/processbackend"
)

func TestMatchGlob(t *testing.T) {
	cases := []struct {
		glob, rel string
		want      bool
	}{
		{"*.pyc", "a.pyc", true},
		{"*.pyc", "src/deep/a.pyc", true},
		{"*.pyc", "src/a.py", false},
		{"node_modules", "node_modules", true},
		{"node_modules", "web/node_modules/x/y.js", true},
		{"node_modules", "web/node_modules_old/y.js", false},
		{"build/*", "build/out", true},
		{"build/*", "build/out/deep/file", true},
		{"build/*", "src/build/out", false},
		{"src/*.go", "src/a.go", true},
		{"src/*.go", "src/sub/a.go", false},
		{"[ab].txt", "b.txt", true},
	}
	for _, tc := range cases {
		if got := MatchGlob(tc.glob, tc.rel); got != tc.want {
			t.Errorf("MatchGlob(%q, %q) = %v, want %v", tc.glob, tc.rel, got, tc.want)
		}
	}
}

func TestKeepWatched(t *testing.T) {
	o := &Options{Include: []string{"*.py", "docs"}, Exclude: []string{"test_*"}}
	cases := map[string]bool{
		"a.py":          true,
		"pkg/b.py":      true,
		"pkg/test_b.py": false,
		"docs/x.md":     true,
		"README.md":     false,
	}
	for rel, want := range cases {
		if got := keepWatched(o, rel); got != want {
			t.Errorf("keepWatched(%q) = %v, want %v", rel, got, want)
		}
	}
}

func TestValidateWatch(t *testing.T) {
	cases := []struct {
		name string
		o    Options
		ok   bool
	}{
		{"plain", Options{Path: "/tmp"}, true},
		{"no path", Options{}, false},
		{"nul", Options{Path: "/tmp/\x00"}, false},
		{"bad glob", Options{Path: "/tmp", Include: []string{"[a"}}, false},
		{"empty glob", Options{Path: "/tmp", Exclude: []string{""}}, false},
		{"long glob", Options{Path: "/tmp", Exclude: []string{strings.Repeat("a", 300)}}, false},
		{"too many globs", Options{Path: "/tmp", Exclude: make([]string, 40)}, false},
		{"bad user", Options{Path: "/tmp", User: "Root!"}, false},
	}
	for _, tc := range cases {
		if err := validateWatch(&tc.o); (err == nil) != tc.ok {
			t.Errorf("%s: err = %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
}

func FuzzMatchGlob(f *testing.F) {
	f.Add("*.pyc", "a/b.pyc")
	f.Add("a/[", "a/b")
	f.Fuzz(func(t *testing.T, glob, rel string) {
		_ = MatchGlob(glob, rel) // must not panic or loop on any input
	})
}

func TestMain(m *testing.M) {
	processbackend.RunAgentIfChild()
	os.Exit(m.Run())
}

// TestWatchStream: a watch streams the changes its globs keep, another key
// cannot watch the sandbox, a bad request is refused before the agent, and
// the stream ends when its caller goes away. No root: the process backend.
func TestWatchStream(t *testing.T) {
	env := controllertest.New(t, controllertest.Options{})
	c := env.Controller
	s := New(c)
	base, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	a := controller.WithCaller(base, "aaaaaaaaaaaaaaaa", api.KeyScopeOwn)
	b := controller.WithCaller(base, "bbbbbbbbbbbbbbbb", api.KeyScopeOwn)
	sb, err := c.Create(a, api.CreateSandboxRequest{Name: "w", Image: controllertest.Image})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.MakeDir(a, controller.FileRef{Sandbox: "w", Path: "dir"}); err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(a)
	events := make(chan api.WatchEvent, 64)
	done := make(chan error, 1)
	go func() {
		done <- s.Watch(wctx, "w", Options{Path: "dir", Recursive: true, Include: []string{"*.txt"}}, func(ev api.WatchEvent) error {
			events <- ev
			return nil
		})
	}()
	if ev := <-events; ev.Type != api.WatchStart {
		t.Fatalf("first event %+v", ev)
	}
	for _, p := range []string{"dir/skip.log", "dir/keep.txt"} {
		if _, err := c.WriteFile(a, controller.FileRef{Sandbox: "w", Path: p}, 0o644, strings.NewReader("x")); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case ev := <-events:
		if ev.Path != "keep.txt" {
			t.Errorf("event %+v, want keep.txt only", ev)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no event for keep.txt")
	}
	stop()
	if err := <-done; err != nil {
		t.Errorf("a watch its caller left: %v", err)
	}
	if err := s.Watch(b, sb.ID, Options{Path: "dir"}, func(api.WatchEvent) error { return nil }); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("b watches a's sandbox: %v", err)
	}
	if err := s.Watch(a, "w", Options{Path: "dir", Include: []string{"[a"}}, nil); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("a malformed glob: %v", err)
	}
}
