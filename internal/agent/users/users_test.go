package users

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock/internal/errdefs"
)

func writeEtc(t *testing.T, passwd, group string) DB {
	t.Helper()
	dir := t.TempDir()
	if passwd != "" {
		os.WriteFile(filepath.Join(dir, "passwd"), []byte(passwd), 0o644)
	}
	if group != "" {
		os.WriteFile(filepath.Join(dir, "group"), []byte(group), 0o644)
	}
	return NewDB(dir)
}

func TestUserLookup(t *testing.T) {
	db := writeEtc(t,
		"# comment\nroot:x:0:0:root:/root:/bin/bash\nuser:x:1001:1002:User:/home/u:/bin/sh\nbroken:x:nan:1::/:/bin/sh\nrel:x:5:5::relative:/bin/sh\n",
		"root:x:0:\nusers:x:1002:\ndocker:x:999:alice,user\nwheel:x:10:user\nother:x:20:alice\n")
	empty := writeEtc(t, "", "")
	tests := []struct {
		name    string
		db      DB
		user    string
		want    *User
		wantErr error
	}{
		{name: "default", db: db, user: "", want: &User{Name: "user", UID: 1001, GID: 1002, Groups: []uint32{1002, 999, 10}, Home: "/home/u", Shell: "/bin/sh"}},
		{name: "root", db: db, user: "root", want: &User{Name: "root", Home: "/root", Shell: "/bin/bash", Groups: []uint32{0}}},
		{name: "relative home becomes /", db: db, user: "rel", want: &User{Name: "rel", UID: 5, GID: 5, Home: "/", Shell: "/bin/sh", Groups: []uint32{5}}},
		{name: "unparsable entry", db: db, user: "broken", wantErr: errdefs.ErrNotFound},
		{name: "unknown", db: db, user: "nobody", wantErr: errdefs.ErrNotFound},
		{name: "invalid name", db: db, user: "a b", wantErr: errdefs.ErrInvalidArgument},
		{name: "invalid group", db: db, user: "user:a/b", wantErr: errdefs.ErrInvalidArgument},
		{name: "two colons", db: db, user: "user:users:x", wantErr: errdefs.ErrInvalidArgument},
		{name: "uid in passwd", db: db, user: "1001", want: &User{Name: "user", UID: 1001, GID: 1002, Groups: []uint32{1002, 999, 10}, Home: "/home/u", Shell: "/bin/sh"}},
		{name: "uid not in passwd", db: db, user: "4321", want: &User{Name: "4321", UID: 4321, GID: 4321, Home: "/", Groups: []uint32{4321}}},
		{name: "uid:gid", db: empty, user: "4321:77", want: &User{Name: "4321", UID: 4321, GID: 77, Home: "/", Groups: []uint32{77}}},
		{name: "name:group", db: db, user: "user:docker", want: &User{Name: "user", UID: 1001, GID: 999, Groups: []uint32{999, 10}, Home: "/home/u", Shell: "/bin/sh"}},
		{name: "unknown group", db: db, user: "user:nogroup", wantErr: errdefs.ErrNotFound},
		{name: "uid out of range", db: db, user: "99999999999", wantErr: errdefs.ErrNotFound},
		{name: "fallback default user", db: empty, user: "user", want: &User{Name: "user", UID: 1000, GID: 1000, Home: "/home/user", Groups: []uint32{1000}}},
		{name: "fallback root", db: empty, user: "root", want: &User{Name: "root", Home: "/root", Groups: []uint32{0}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.db.Lookup(tt.user)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
	if n := db.UserName(1001); n != "user" {
		t.Errorf("name of 1001 = %q", n)
	}
	if n := db.GroupName(4242); n != "4242" {
		t.Errorf("unknown gid shown as %q, want the number", n)
	}
}

func TestResolvePath(t *testing.T) {
	u := &User{Name: "user", Home: "/home/user"}
	tests := []struct {
		in, want string
		wantErr  bool
	}{
		{in: "", want: "/home/user"},
		{in: "~", want: "/home/user"},
		{in: "~/a/../b", want: "/home/user/b"},
		{in: "rel/x", want: "/home/user/rel/x"},
		{in: "../../../etc", want: "/etc"},
		{in: "/abs//x/", want: "/abs/x"},
		{in: "a\x00b", wantErr: true},
		{in: strings.Repeat("a", MaxPathLen+1), wantErr: true},
	}
	for _, tt := range tests {
		got, err := ResolvePath(u, tt.in)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("ResolvePath(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

func FuzzPasswdLine(f *testing.F) {
	f.Add("user:x:1000:1000::/home/user:/bin/sh")
	f.Add("a:b:c")
	f.Fuzz(func(t *testing.T, line string) {
		u, ok := parsePasswdFields(strings.Split(line, ":"))
		if ok && (u.Name == "" || !filepath.IsAbs(u.Home)) {
			t.Fatalf("parsed %q into %+v", line, u)
		}
	})
}

func FuzzResolvePath(f *testing.F) {
	f.Add("~/x")
	f.Add("../..")
	f.Fuzz(func(t *testing.T, p string) {
		got, err := ResolvePath(&User{Home: "/home/user"}, p)
		if err != nil {
			return
		}
		if !filepath.IsAbs(got) || filepath.Clean(got) != got || strings.IndexByte(got, 0) >= 0 {
			t.Fatalf("ResolvePath(%q) = %q", p, got)
		}
	})
}
