package workspace

import (
	"archive/tar"
	"cmp"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/workspace/vfs"
)

// A workspace exported is one tar file: first manifestName, the JSON of
// its history (versions and entry rows), then each content it references
// once, named contents/<sha256>. Import checks all of it (it comes from
// outside): paths, the rows' version ranges, that every entry's directory
// is there for as long as the entry is, every content's hash and size,
// and the bounds below, then lands it in one transaction under a new id.

const (
	manifestName   = "workspace.json"
	manifestFormat = "paddock-workspace/1"
	// maxManifest bounds the manifest an import reads into memory.
	maxManifest = 64 << 20
	// MaxImportBytes bounds the contents of one import (all versions).
	MaxImportBytes = 64 << 30
)

type manifest struct {
	Format   string `json:"format"`
	Name     string `json:"name"`
	MaxBytes int64  `json:"max_bytes"`
	MaxFiles int64  `json:"max_files"`
	Head     int64  `json:"head"`
	// Oldest is the oldest version kept, 0 for all: the first listed.
	Oldest   int64             `json:"oldest,omitempty"`
	Versions []manifestVersion `json:"versions"`
	Entries  []manifestEntry   `json:"entries"`
}

type manifestVersion struct {
	Version   int64     `json:"version"`
	CreatedAt time.Time `json:"created_at"`
	Caller    string    `json:"caller,omitempty"`
	Executor  string    `json:"executor,omitempty"`
	Command   string    `json:"command"`
	ExitCode  int       `json:"exit_code"`
	Added     int       `json:"added"`
	Modified  int       `json:"modified"`
	Removed   int       `json:"removed"`
}

type manifestEntry struct {
	Path  string `json:"path"`
	Since int64  `json:"since"`
	// Until is 0 while the entry is current.
	Until int64  `json:"until,omitempty"`
	Dir   bool   `json:"dir,omitempty"`
	Mode  uint32 `json:"mode"`
	Size  int64  `json:"size,omitempty"`
	MTime int64  `json:"mtime"`
	Hash  string `json:"hash,omitempty"`
}

// Export writes the workspace r, all its history, as one tar.
func (s *Store) Export(ctx context.Context, r Record, w io.Writer) error {
	tx, err := s.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true}) // one consistent view
	if err != nil {
		return err
	}
	defer tx.Rollback()
	m := manifest{Format: manifestFormat, Name: r.Name, MaxBytes: r.MaxBytes, MaxFiles: r.MaxFiles, Head: r.Head}
	if err := tx.QueryRowContext(ctx, "SELECT head, oldest FROM workspaces WHERE id = ?", r.ID).Scan(&m.Head, &m.Oldest); err != nil {
		return err
	}
	rows, err := tx.QueryContext(ctx, `SELECT version, created_at, caller, executor, command, exit_code, added, modified, removed
		FROM versions WHERE workspace = ? AND version <= ? ORDER BY version`, r.ID, m.Head)
	if err != nil {
		return err
	}
	for rows.Next() {
		var v manifestVersion
		var at int64
		if err := rows.Scan(&v.Version, &at, &v.Caller, &v.Executor, &v.Command, &v.ExitCode, &v.Added, &v.Modified, &v.Removed); err != nil {
			rows.Close()
			return err
		}
		v.CreatedAt = time.Unix(0, at).UTC()
		m.Versions = append(m.Versions, v)
	}
	rows.Close()
	rows, err = tx.QueryContext(ctx, `SELECT path, since, COALESCE(until, 0), dir, mode, size, mtime, COALESCE(hash, '')
		FROM entries WHERE workspace = ? AND since <= ? ORDER BY path, since`, r.ID, m.Head)
	if err != nil {
		return err
	}
	var hashes []string
	for rows.Next() {
		var e manifestEntry
		if err := rows.Scan(&e.Path, &e.Since, &e.Until, &e.Dir, &e.Mode, &e.Size, &e.MTime, &e.Hash); err != nil {
			rows.Close()
			return err
		}
		if e.Until > m.Head {
			e.Until = 0
		}
		// What lived before the oldest version kept starts with it.
		e.Since = max(e.Since, m.Oldest)
		if e.Hash != "" {
			hashes = append(hashes, e.Hash)
		}
		m.Entries = append(m.Entries, e)
	}
	rows.Close()
	body, err := json.Marshal(m)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(w)
	if err := tw.WriteHeader(&tar.Header{Name: manifestName, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	if _, err := tw.Write(body); err != nil {
		return err
	}
	slices.Sort(hashes)
	for _, h := range slices.Compact(hashes) {
		var data []byte
		if err := tx.QueryRowContext(ctx, "SELECT data FROM blobs WHERE hash = ?", h).Scan(&data); err != nil {
			return fmt.Errorf("workspaces: content %s: %w", h, err)
		}
		if err := tw.WriteHeader(&tar.Header{Name: "contents/" + h, Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		if _, err := tw.Write(data); err != nil {
			return err
		}
	}
	return tw.Close()
}

func errImport(format string, args ...any) error {
	return fmt.Errorf("not a workspace export: "+format+": %w", append(args, errdefs.ErrInvalidArgument)...)
}

// Import reads an export (untrusted) into a new workspace rec (its ID,
// Name, Owner and quotas; the export's name and quotas are not used),
// whole or not at all.
func (s *Store) Import(ctx context.Context, rec Record, r io.Reader) (Record, error) {
	tr := tar.NewReader(r)
	hdr, err := tr.Next()
	if err != nil || hdr.Name != manifestName || hdr.Typeflag != tar.TypeReg {
		return Record{}, errImport("it must start with %s", manifestName)
	}
	if hdr.Size > maxManifest {
		return Record{}, errImport("%s is %d bytes, at most %d", manifestName, hdr.Size, maxManifest)
	}
	var m manifest
	dec := json.NewDecoder(io.LimitReader(tr, maxManifest))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return Record{}, errImport("%s: %v", manifestName, err)
	}
	if m.Format != manifestFormat {
		return Record{}, errImport("format %q, want %q", truncate(m.Format, 64), manifestFormat)
	}
	need, bytes, files, err := checkManifest(&m)
	if err != nil {
		return Record{}, err
	}
	if rec.MaxBytes > 0 && bytes > rec.MaxBytes || rec.MaxFiles > 0 && files > rec.MaxFiles {
		return Record{}, fmt.Errorf("the export's last version holds %d bytes in %d files and directories, past the quota of %d bytes and %d: %w",
			bytes, files, rec.MaxBytes, rec.MaxFiles, errdefs.ErrResourceExhausted)
	}

	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return Record{}, err
	}
	defer tx.Rollback()
	var total int64
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return Record{}, errImport("%v", err)
		}
		h, ok := strings.CutPrefix(hdr.Name, "contents/")
		size, wanted := need[h]
		switch {
		case !ok || hdr.Typeflag != tar.TypeReg:
			return Record{}, errImport("unexpected member %q", truncate(hdr.Name, 128))
		case !wanted:
			return Record{}, errImport("%q is no content of its entries, or comes twice", truncate(hdr.Name, 128))
		case hdr.Size != size:
			return Record{}, errImport("content %s is %d bytes, its entries say %d", h, hdr.Size, size)
		}
		total += size
		if total > MaxImportBytes {
			return Record{}, fmt.Errorf("the export holds more than %d bytes of contents: %w", int64(MaxImportBytes), errdefs.ErrResourceExhausted)
		}
		data, err := io.ReadAll(io.LimitReader(tr, size))
		if err != nil {
			return Record{}, errImport("content %s: %v", h, err)
		}
		if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != h || int64(len(data)) != size {
			return Record{}, errImport("content %s does not match its name", h)
		}
		if _, err := tx.ExecContext(ctx, "INSERT OR IGNORE INTO blobs (hash, size, data) VALUES (?,?,?)", h, size, data); err != nil {
			return Record{}, err
		}
		delete(need, h)
	}
	for h := range need {
		return Record{}, errImport("content %s is missing", h)
	}
	now := time.Now().UTC()
	rec.CreatedAt, rec.UpdatedAt, rec.Head, rec.Bytes, rec.Files, rec.Oldest = now, now, m.Head, bytes, files, m.Oldest
	if _, err := tx.ExecContext(ctx, "INSERT INTO workspaces ("+recordCols+") VALUES (?,?,?,?,?,?,?,?,?,?,?)",
		rec.ID, rec.Name, rec.Owner, now.UnixNano(), now.UnixNano(), rec.Head, rec.Bytes, rec.Files, rec.MaxBytes, rec.MaxFiles, rec.Oldest); err != nil {
		if isUnique(err) {
			return Record{}, fmt.Errorf("you already have a workspace named %q: %w", rec.Name, errdefs.ErrConflict)
		}
		return Record{}, err
	}
	for _, v := range m.Versions {
		if _, err := tx.ExecContext(ctx, `INSERT INTO versions (workspace, version, created_at, caller, executor, command, exit_code, added, modified, removed)
			VALUES (?,?,?,?,?,?,?,?,?,?)`, rec.ID, v.Version, v.CreatedAt.UnixNano(), truncate(v.Caller, 64), truncate(v.Executor, 32),
			truncate(v.Command, 4096), v.ExitCode, v.Added, v.Modified, v.Removed); err != nil {
			return Record{}, err
		}
	}
	for _, e := range m.Entries {
		var until, hash any
		if e.Until > 0 {
			until = e.Until
		}
		if !e.Dir {
			hash = e.Hash
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO entries (workspace, path, since, until, dir, mode, size, mtime, hash) VALUES (?,?,?,?,?,?,?,?,?)",
			rec.ID, e.Path, e.Since, until, e.Dir, e.Mode&uint32(fs.ModePerm), e.Size, e.MTime, hash); err != nil {
			return Record{}, err
		}
	}
	if err := tx.Commit(); err != nil {
		return Record{}, err
	}
	return rec, nil
}

// checkManifest checks an export's history and returns the contents it
// needs (hash to size) and what its last version holds.
func checkManifest(m *manifest) (need map[string]int64, bytes, files int64, err error) {
	first := max(m.Oldest, 1)
	if m.Head < 0 || m.Oldest < 0 || m.Oldest > m.Head || int64(len(m.Versions)) != m.Head-first+1 && m.Head > 0 || m.Head == 0 && len(m.Versions) > 0 {
		return nil, 0, 0, errImport("head %d, oldest %d, with %d versions", m.Head, m.Oldest, len(m.Versions))
	}
	for i, v := range m.Versions {
		if v.Version != first+int64(i) {
			return nil, 0, 0, errImport("version %d is listed where %d belongs", v.Version, first+int64(i))
		}
	}
	need = map[string]int64{}
	byPath := map[string][]manifestEntry{}
	for i := range m.Entries {
		e := &m.Entries[i]
		if e.Until == 0 {
			e.Until = m.Head + 1 // alive to the end, for the checks below
		}
		switch {
		case !fs.ValidPath(e.Path) || e.Path == "." || len(e.Path) > 4096:
			return nil, 0, 0, errImport("entry path %q", truncate(e.Path, 128))
		case e.Since < first || e.Since > m.Head || e.Until <= e.Since || e.Until > m.Head+1:
			return nil, 0, 0, errImport("entry %s lives from version %d to %d, outside %d..%d", e.Path, e.Since, e.Until, first, m.Head)
		case e.Dir && (e.Hash != "" || e.Size != 0):
			return nil, 0, 0, errImport("directory %s has content", e.Path)
		case !e.Dir && (len(e.Hash) != 64 || strings.Trim(e.Hash, "0123456789abcdef") != "" || e.Size < 0 || e.Size > vfs.MaxFileSize):
			return nil, 0, 0, errImport("file %s has no valid content hash", e.Path)
		}
		if !e.Dir {
			if old, ok := need[e.Hash]; ok && old != e.Size {
				return nil, 0, 0, errImport("content %s has two sizes", e.Hash)
			}
			need[e.Hash] = e.Size
		}
		byPath[e.Path] = append(byPath[e.Path], *e)
	}
	for p, rows := range byPath {
		slices.SortFunc(rows, func(a, b manifestEntry) int { return cmp.Compare(a.Since, b.Since) })
		for i := 1; i < len(rows); i++ {
			if rows[i].Since < rows[i-1].Until {
				return nil, 0, 0, errImport("entry %s is two things at version %d", p, rows[i].Since)
			}
		}
	}
	for _, e := range m.Entries {
		if dir := path.Dir(e.Path); dir != "." && !coveredByDir(byPath[dir], e.Since, e.Until) {
			return nil, 0, 0, errImport("entry %s outlives its directory %s", e.Path, dir)
		}
		if e.Until == m.Head+1 {
			files++
			bytes += e.Size
		}
	}
	for i := range m.Entries {
		if m.Entries[i].Until == m.Head+1 {
			m.Entries[i].Until = 0
		}
	}
	return need, bytes, files, nil
}

// coveredByDir reports whether directory rows (sorted, disjoint) cover
// [since, until) without a gap.
func coveredByDir(rows []manifestEntry, since, until int64) bool {
	at := since
	for _, r := range rows {
		if r.Since > at {
			break
		}
		if !r.Dir {
			if r.Until > at {
				return false
			}
			continue
		}
		if r.Until > at {
			at = r.Until
		}
		if at >= until {
			return true
		}
	}
	return at >= until
}
