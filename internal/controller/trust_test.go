package controller

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestComposeTrustBundle(t *testing.T) {
	const ca = "-----BEGIN CERTIFICATE-----\nCA\n-----END CERTIFICATE-----\n"
	hostSecret := filepath.Join(t.TempDir(), "host-secret")
	if err := os.WriteFile(hostSecret, []byte("HOST FILE"), 0o600); err != nil {
		t.Fatal(err)
	}
	layer := func(t *testing.T, setup func(root string)) string {
		root := t.TempDir()
		if err := os.MkdirAll(filepath.Join(root, "etc/ssl/certs"), 0o755); err != nil {
			t.Fatal(err)
		}
		setup(root)
		return root
	}
	write := func(root, rel, body string) {
		if err := os.WriteFile(filepath.Join(root, rel), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name   string
		layers func(t *testing.T) []string
		want   string // the bundle's image part
	}{
		{"image bundle first, then the CA", func(t *testing.T) []string {
			return []string{layer(t, func(r string) { write(r, "etc/ssl/certs/ca-certificates.crt", "ROOTS\n") })}
		}, "ROOTS\n"},
		{"the topmost layer wins", func(t *testing.T) []string {
			return []string{
				layer(t, func(r string) { write(r, "etc/ssl/certs/ca-certificates.crt", "OLD\n") }),
				layer(t, func(r string) { write(r, "etc/ssl/certs/ca-certificates.crt", "NEW") }),
			}
		}, "NEW\n"},
		{"a whiteout hides lower layers", func(t *testing.T) []string {
			return []string{
				layer(t, func(r string) { write(r, "etc/ssl/certs/ca-certificates.crt", "OLD\n") }),
				layer(t, func(r string) { write(r, "etc/ssl/certs/.wh.ca-certificates.crt", "") }),
			}
		}, ""},
		{"a symlink to a host file is not followed", func(t *testing.T) []string {
			return []string{layer(t, func(r string) {
				if err := os.Symlink(hostSecret, filepath.Join(r, "etc/ssl/certs/ca-certificates.crt")); err != nil {
					t.Fatal(err)
				}
			})}
		}, ""},
		{"a symlinked directory is not followed", func(t *testing.T) []string {
			return []string{layer(t, func(r string) {
				dir := t.TempDir() // a host directory holding a file of the bundle's name
				write(dir, "ca-certificates.crt", "HOST FILE")
				os.RemoveAll(filepath.Join(r, "etc/ssl/certs"))
				if err := os.Symlink(dir, filepath.Join(r, "etc/ssl/certs")); err != nil {
					t.Fatal(err)
				}
			})}
		}, ""},
		{"no bundle in the image", func(t *testing.T) []string {
			return []string{layer(t, func(string) {})}
		}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "bundle.pem")
			got, err := composeTrustBundle(tc.layers(t), NetSetup{CACert: []byte(ca), TrustBundle: out})
			if err != nil || got != out {
				t.Fatalf("compose: %q %v", got, err)
			}
			b, _ := os.ReadFile(out)
			if !strings.HasPrefix(string(b), tc.want) || !strings.HasSuffix(string(b), ca) || strings.Contains(string(b), "HOST FILE") {
				t.Fatalf("bundle %q, want %q then the CA", b, tc.want)
			}
		})
	}
	if got, err := composeTrustBundle(nil, NetSetup{}); got != "" || err != nil {
		t.Fatalf("no CA: %q %v", got, err)
	}
}
