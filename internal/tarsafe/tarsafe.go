// Package tarsafe holds the checks every reader of an untrusted tar stream
// in Paddock applies before it writes anything an entry describes.
package tarsafe

import (
	"archive/tar"
	"strings"
)

// sparsePrefix starts every PAX record of the GNU sparse formats (0.0,
// 0.1 and 1.0): GNU.sparse.map, GNU.sparse.realsize, GNU.sparse.major...
const sparsePrefix = "GNU.sparse."

// Sparse reports whether hdr describes a sparse file: the old GNU type 'S'
// or any GNU.sparse.* PAX record. archive/tar expands such an entry to its
// logical size, filling the holes with zeros, so a few bytes of archive
// read as gigabytes of file; nothing in Paddock needs them, and every
// importer refuses them before writing.
func Sparse(hdr *tar.Header) bool {
	if hdr.Typeflag == tar.TypeGNUSparse {
		return true
	}
	for k := range hdr.PAXRecords {
		if strings.HasPrefix(k, sparsePrefix) {
			return true
		}
	}
	return false
}
