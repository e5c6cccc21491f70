package oci

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestContainerArg(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"create", "--bundle", "/x/bundle", "abc123"}, "abc123"},
		{[]string{"start", "abc123"}, "abc123"},
		{[]string{"kill", "abc123", "KILL"}, "abc123"},
		{[]string{"delete", "--force", "abc123"}, "abc123"},
		{[]string{"state", "abc123"}, "abc123"},
		{[]string{"list", "--format", "json"}, ""},
		{[]string{"list"}, ""},
		{[]string{"start", "../etc"}, ""},
		{nil, ""},
	}
	for _, c := range cases {
		if got := containerArg(c.args); got != c.want {
			t.Errorf("containerArg(%q) = %q, want %q", c.args, got, c.want)
		}
	}
}

// TestRunscNetworkArgs: a container's network flag follows its bundle, on
// every command, and a container without a bundle gets none.
func TestRunscNetworkArgs(t *testing.T) {
	root := t.TempDir()
	r := &Runtime{kind: KindRunsc, root: root}
	write := func(id, cfg string) {
		t.Helper()
		dir := filepath.Join(root, "sandboxes", id, "bundle")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("egress1", `{"linux":{"namespaces":[{"type":"pid"},{"type":"network","path":"/run/netns/paddock-x-egress1"}]}}`)
	write("none1", `{"linux":{"namespaces":[{"type":"pid"},{"type":"network"}]}}`)
	write("broken1", `{"linux":`)
	cases := []struct {
		args []string
		want []string
	}{
		{[]string{"create", "--bundle", "b", "egress1"}, []string{"--network=sandbox"}},
		{[]string{"kill", "egress1", "KILL"}, []string{"--network=sandbox"}},
		{[]string{"delete", "--force", "egress1"}, []string{"--network=sandbox"}},
		{[]string{"start", "none1"}, []string{"--network=none"}},
		{[]string{"state", "broken1"}, []string{"--network=none"}},
		{[]string{"state", "gone1"}, []string{"--network=none"}},
		{[]string{"list", "--format", "json"}, []string{"--network=none"}},
	}
	for _, c := range cases {
		got := r.globalArgs(c.args)
		tail := got[len(got)-len(c.want):]
		if !slices.Equal(tail, c.want) {
			t.Errorf("%q: flags %q, want them to end with %q", c.args, got, c.want)
		}
		if n := slices.IndexFunc(got, func(s string) bool { return len(s) > 10 && s[:10] == "--network=" }); n != len(got)-len(c.want) {
			t.Errorf("%q: more than one network flag: %q", c.args, got)
		}
	}
	rc := &Runtime{kind: KindRunc, root: root}
	if got := rc.globalArgs([]string{"start", "egress1"}); len(got) != 2 {
		t.Errorf("runc got runsc flags: %q", got)
	}
}

// TestSeccompProfileByRuntime: runsc's profile lacks only the clone3 rule.
func TestSeccompProfileByRuntime(t *testing.T) {
	has := func(sc []string, name string) bool { return slices.Contains(sc, name) }
	for _, c := range []struct {
		kind       string
		wantClone3 bool
	}{{KindRunc, true}, {KindCrun, true}, {KindRunsc, false}} {
		r := &Runtime{kind: c.kind}
		got := r.seccompProfile()
		var names []string
		for _, s := range got.Syscalls {
			names = append(names, s.Names...)
		}
		if has(names, "clone3") != c.wantClone3 {
			t.Errorf("%s: clone3 rule present %v, want %v", c.kind, has(names, "clone3"), c.wantClone3)
		}
		if !has(names, "clone") || !has(names, "unshare") {
			t.Errorf("%s: namespace rules missing: %v", c.kind, names)
		}
		want := len(defaultSeccomp().Syscalls)
		if !c.wantClone3 {
			want--
		}
		if len(got.Syscalls) != want {
			t.Errorf("%s: %d rules, want %d", c.kind, len(got.Syscalls), want)
		}
	}
}
