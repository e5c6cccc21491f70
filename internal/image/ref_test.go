package image

import (
	"errors"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock/internal/errdefs"
)

func TestParseRef(t *testing.T) {
	hex64 := strings.Repeat("ab", 32)
	tests := []struct {
		ref     string
		want    Ref
		wantErr bool
	}{
		{ref: "base", want: Ref{Name: "base"}},
		{ref: "busybox", want: Ref{Name: "busybox"}},
		{ref: "sha256:" + hex64, want: Ref{Digest: "sha256:" + hex64}},
		{ref: "", wantErr: true},
		{ref: "ubuntu", wantErr: true},
		{ref: "BASE", wantErr: true},
		{ref: "base ", wantErr: true},
		{ref: "../base", wantErr: true},
		{ref: "sha256:" + strings.ToUpper(hex64), wantErr: true},
		{ref: "sha256:" + hex64[:63], wantErr: true},
		{ref: "sha256:" + hex64 + "0", wantErr: true},
		{ref: "sha512:" + hex64, wantErr: true},
		{ref: "sha256:" + hex64[:62] + "zz", wantErr: true},
		{ref: "busybox:latest", wantErr: true},
		{ref: strings.Repeat("a", 200), wantErr: true},
		{ref: "base\x00", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(printable(tt.ref), func(t *testing.T) {
			got, err := ParseRef(tt.ref)
			if tt.wantErr {
				if !errors.Is(err, errdefs.ErrInvalidArgument) {
					t.Fatalf("ParseRef(%q) = %+v, %v; want ErrInvalidArgument", tt.ref, got, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ParseRef(%q) = %+v, %v; want %+v", tt.ref, got, err, tt.want)
			}
		})
	}
}

func FuzzParseRef(f *testing.F) {
	for _, s := range []string{"base", "busybox", "sha256:" + strings.Repeat("0", 64), "", "sha256:", "x:y", "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, ref string) {
		r, err := ParseRef(ref)
		if err != nil {
			if !errors.Is(err, errdefs.ErrInvalidArgument) {
				t.Fatalf("error %v does not wrap ErrInvalidArgument", err)
			}
			if len(err.Error()) > 400 {
				t.Fatalf("error message of %d bytes", len(err.Error()))
			}
			return
		}
		if (r.Name == "") == (r.Digest == "") {
			t.Fatalf("ParseRef(%q) = %+v: want exactly one of name and digest", ref, r)
		}
		if r.Name != "" && !isBuiltin(r.Name) {
			t.Fatalf("accepted unknown name %q", r.Name)
		}
		if r.Digest != "" && !validDigest(r.Digest) {
			t.Fatalf("accepted bad digest %q", r.Digest)
		}
		if r.Name+r.Digest != ref {
			t.Fatalf("ParseRef(%q) changed the reference to %+v", ref, r)
		}
	})
}

func TestParseApplets(t *testing.T) {
	tests := []struct {
		name    string
		out     string
		prefix  string
		want    []string
		wantErr bool
	}{
		{name: "full", out: "bin/sh\nusr/bin/[\nbin/ls\nbin/busybox\nbin/sh\n", want: []string{"bin/sh", "usr/bin/[", "bin/ls"}},
		{name: "short list", out: "sh\nls\n\n", prefix: "bin/", want: []string{"bin/sh", "bin/ls"}},
		{name: "no sh", out: "bin/ls\n", wantErr: true},
		{name: "escape", out: "bin/sh\n../../etc/passwd\n", wantErr: true},
		{name: "absolute", out: "bin/sh\n/etc/passwd\n", wantErr: true},
		{name: "dot dot inside", out: "bin/sh\nbin/../../x\n", wantErr: true},
		{name: "top level", out: "linuxrc\nbin/sh\n", want: []string{"linuxrc", "bin/sh"}},
		{name: "dot", out: "bin/sh\n.\n", wantErr: true},
		{name: "nul", out: "bin/sh\nbin/a\x00b\n", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseApplets([]byte(tt.out), tt.prefix)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("parseApplets = %q; want an error", got)
				}
				return
			}
			if err != nil || strings.Join(got, ",") != strings.Join(tt.want, ",") {
				t.Fatalf("parseApplets = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func FuzzParseApplets(f *testing.F) {
	f.Add([]byte("bin/sh\nusr/bin/[\n"), "")
	f.Add([]byte("sh\nls\n"), "bin/")
	f.Fuzz(func(t *testing.T, out []byte, prefix string) {
		got, err := parseApplets(out, prefix)
		if err != nil {
			return
		}
		for _, p := range got {
			if strings.HasPrefix(p, "/") || strings.HasPrefix(p, "../") || strings.Contains(p, "/../") || p == "bin/busybox" {
				t.Fatalf("accepted applet path %q", p)
			}
		}
	})
}

func TestReadLinesAndTail(t *testing.T) {
	long := strings.Repeat("x", maxLineLen+50)
	var got []string
	readLines(strings.NewReader("a\r\nb\rc \n\n"+long+"\nlast"), func(l string) { got = append(got, l) })
	want := []string{"a", "b", "c", long[:maxLineLen], "last"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("readLines = %q; want %q", got, want)
	}
	tail := newLineTail(3)
	for _, l := range []string{"1", "2", "3", "4", "5"} {
		tail.add(l)
	}
	if g := strings.Join(tail.lines(), ","); g != "3,4,5" {
		t.Fatalf("tail = %s; want 3,4,5", g)
	}
	short := newLineTail(3)
	short.add("1")
	if g := strings.Join(short.lines(), ","); g != "1" {
		t.Fatalf("tail = %s; want 1", g)
	}
}

func TestUnescapeOctal(t *testing.T) {
	for in, want := range map[string]string{
		`/a/b`:          "/a/b",
		`/a\040b`:       "/a b",
		`/a\011b\134c`:  "/a\tb\\c",
		`/trailing\04`:  `/trailing\04`,
		`/not\999octal`: `/not\999octal`,
	} {
		if got := unescapeOctal(in); got != want {
			t.Errorf("unescapeOctal(%q) = %q; want %q", in, got, want)
		}
	}
}

func TestValidateMirrorAndSuite(t *testing.T) {
	for _, m := range []string{"http://deb.debian.org/debian", "https://mirror.example/debian", "file:///srv/debian"} {
		if err := validateMirror(m); err != nil {
			t.Errorf("validateMirror(%q) = %v", m, err)
		}
	}
	for _, m := range []string{"", "ftp://x", "deb.debian.org", "http://x/ y", "http://x\nbad"} {
		if err := validateMirror(m); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("validateMirror(%q) = %v; want ErrInvalidArgument", m, err)
		}
	}
	for _, s := range []string{"bookworm", "trixie", "bookworm-updates", "12"} {
		if err := validateSuite(s); err != nil {
			t.Errorf("validateSuite(%q) = %v", s, err)
		}
	}
	for _, s := range []string{"", "-x", "Bookworm", "a b", "a/b", strings.Repeat("a", 33)} {
		if err := validateSuite(s); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("validateSuite(%q) = %v; want ErrInvalidArgument", s, err)
		}
	}
}
