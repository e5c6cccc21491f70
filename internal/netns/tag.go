package netns

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	"github.com/paddock-dev/paddock/internal/lazyre"
)

// A daemon's tag names everything it makes on the host: its namespaces
// (paddock-<tag>-<id>), host veths (pd<tag><n>), nftables table
// (paddock_<tag>) and iptables chains (PADDOCK-IN-<tag>, ...). It is drawn
// at random once per state dir and kept in the state dir, so two daemons
// never share one, whatever their ranges; a daemon removes only what its
// records name or what carries its tag.
//
// Tags are "x" and seven hex digits: the "x" keeps them apart from the
// legacy tags (four hex digits of a hash of the range) of daemons from
// before tags were drawn, whose interface wildcards ("pd<4 hex>*") must
// never match a new daemon's veths. A host veth name is then "pd", 8
// characters of tag and up to 5 hex digits of index: 15, the kernel's
// limit (IFNAMSIZ).
var (
	tagRE       = lazyre.New(`^x[0-9a-f]{7}$`)
	legacyTagRE = lazyre.New(`^[0-9a-f]{4}$`)
)

const tagFile = "tag"

func validTag(s string) bool { return tagRE.MatchString(s) || legacyTagRE.MatchString(s) }

// legacyTag is the tag daemons derived from their range before tags were
// drawn: every daemon on one range had the same.
func legacyTag(rng netip.Prefix) string {
	sum := sha256.Sum256([]byte(rng.Masked().String()))
	return hex.EncodeToString(sum[:2])
}

func newTag() (string, error) {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return "x" + hex.EncodeToString(b[:])[:7], nil
}

// loadTag returns the tag kept in dir (the manager's record directory),
// drawing one on the first start. A state dir from before tags were
// drawn that still has records keeps its legacy tag (its namespaces and
// veths carry it) until a start finds no record left; it then draws a
// tag of its own. legacy says the tag is such a shared one.
func loadTag(dir string, rng netip.Prefix) (tag string, legacy bool, err error) {
	path := filepath.Join(dir, tagFile)
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		tag = strings.TrimSpace(string(b))
		if !validTag(tag) {
			return "", false, fmt.Errorf("network tag file %s is damaged (%q)", path, b)
		}
		if !legacyTagRE.MatchString(tag) {
			return tag, false, nil
		}
		if hasRecords(dir) {
			return tag, true, nil
		}
	case !errors.Is(err, os.ErrNotExist):
		return "", false, err
	case hasRecords(dir):
		// Records without a tag file: written by a daemon from before
		// tags were drawn, whose names derive from the range.
		tag, legacy = legacyTag(rng), true
	}
	if tag == "" || !legacy {
		if tag, err = newTag(); err != nil {
			return "", false, err
		}
		legacy = false
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(tag+"\n"), 0o600); err != nil {
		return "", false, err
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", false, err
	}
	return tag, legacy, nil
}

func hasRecords(dir string) bool {
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if id, ok := strings.CutSuffix(e.Name(), ".json"); ok && idRE.MatchString(id) {
			return true
		}
	}
	return false
}
