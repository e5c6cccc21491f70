package agentbin

import (
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/paddock-dev/paddock/internal/sealfile"
)

// Seal writes the agent binary sandboxes run as PID 1 to
// dir/paddock-<sha256 prefix>, read-only, and returns its path: the small
// agent this build embeds, or else the running executable itself.
// Sandboxes get that copy bind-mounted read-only: never the live binary,
// which a container could otherwise overwrite through /proc/self/exe (runc
// CVE-2019-5736's lesson).
func Seal(dir string) (string, error) {
	src, embedded, err := Open()
	if err != nil {
		return "", fmt.Errorf("embedded agent: %w", err)
	}
	if !embedded {
		self, err := os.Executable()
		if err != nil {
			return "", err
		}
		f, err := os.Open(self)
		if err != nil {
			return "", err
		}
		defer f.Close()
		src = f
	}
	if err := os.MkdirAll(dir, 0o711); err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(dir, ".paddock-*")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name())
	h := sha256.New()
	if _, err := io.Copy(io.MultiWriter(tmp, h), src); err != nil {
		tmp.Close()
		return "", err
	}
	if err := checkStatic(tmp); err != nil {
		tmp.Close()
		return "", err
	}
	return sealfile.Install(tmp, filepath.Join(dir, "paddock-"+hex.EncodeToString(h.Sum(nil))[:24]))
}

// checkStatic refuses a dynamically linked paddock: as a sandbox's PID 1 it
// runs in the image's root, where the host's loader and libc are not.
func checkStatic(f *os.File) error {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	ef, err := elf.NewFile(f)
	if err != nil {
		return fmt.Errorf("read the agent binary: %w", err)
	}
	for _, p := range ef.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("this paddock binary is dynamically linked; build it with CGO_ENABLED=0 (make build does)")
		}
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	return nil
}
