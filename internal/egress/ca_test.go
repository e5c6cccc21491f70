package egress

import (
	"bytes"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// TestCAConcurrentCreate: daemons creating the CA in one directory at the
// same time all end with the same CA, the one on disk.
func TestCAConcurrentCreate(t *testing.T) {
	for round := range 20 {
		dir := t.TempDir()
		const n = 8
		cas := make([]*CA, n)
		errs := make([]error, n)
		var start, wg sync.WaitGroup
		start.Add(1)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				start.Wait()
				cas[i], errs[i] = LoadOrCreateCA(dir)
			}()
		}
		start.Done()
		wg.Wait()
		for i := range n {
			if errs[i] != nil {
				t.Fatalf("round %d creator %d: %v", round, i, errs[i])
			}
			if !bytes.Equal(cas[i].CertPEM(), cas[0].CertPEM()) {
				t.Fatalf("round %d: creators %d and 0 got different CAs", round, i)
			}
		}
		onDisk, err := LoadOrCreateCA(dir)
		if err != nil || !bytes.Equal(onDisk.CertPEM(), cas[0].CertPEM()) || !onDisk.key.Equal(cas[0].key) {
			t.Fatalf("round %d: the CA on disk is not the one returned: %v", round, err)
		}
		cert, _ := os.ReadFile(filepath.Join(dir, CACertFile))
		if !bytes.Equal(cert, cas[0].CertPEM()) {
			t.Fatalf("round %d: certificate file differs", round)
		}
		ents, _ := os.ReadDir(dir)
		if len(ents) != 2 {
			t.Fatalf("round %d: files left: %v", round, ents)
		}
	}
}

func TestCAFileLayouts(t *testing.T) {
	dir := t.TempDir()
	ca, err := LoadOrCreateCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	keyPath, certPath := filepath.Join(dir, caKeyFile), filepath.Join(dir, CACertFile)
	keyFile, _ := os.ReadFile(keyPath)
	keyBlock, _ := pem.Decode(keyFile)
	if keyBlock == nil || keyBlock.Type != "EC PRIVATE KEY" {
		t.Fatalf("key file starts with %v", keyBlock)
	}
	if fi, _ := os.Stat(keyPath); fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %v", fi.Mode())
	}

	// A missing or foreign certificate file is written again from the key file.
	for _, damage := range []func(){
		func() { os.Remove(certPath) },
		func() { os.WriteFile(certPath, []byte("not a certificate"), 0o644) },
	} {
		damage()
		again, err := LoadOrCreateCA(dir)
		if err != nil || !bytes.Equal(again.CertPEM(), ca.CertPEM()) {
			t.Fatalf("reload: %v", err)
		}
		if b, _ := os.ReadFile(certPath); !bytes.Equal(b, ca.CertPEM()) {
			t.Fatal("certificate file not restored")
		}
	}

	// The older layout: the key alone, the certificate in its own file.
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(keyBlock), 0o600); err != nil {
		t.Fatal(err)
	}
	if again, err := LoadOrCreateCA(dir); err != nil || !bytes.Equal(again.CertPEM(), ca.CertPEM()) {
		t.Fatalf("older layout: %v", err)
	}
	os.Remove(certPath)
	if _, err := LoadOrCreateCA(dir); err == nil || !strings.Contains(err.Error(), "remove the key file") {
		t.Fatalf("a lone key of the older layout: %v", err)
	}
}
