// Package tree is the agent's tree stream: a directory's entries, each
// file with its inode and change time, and the content of only the files
// changed since a time the reader gives. The workspaces' container
// executor reads its copy back this way after every command: a tar of
// the whole copy costs a header of about a kilobyte and the content of
// every file, where most commands change a handful.
//
// A program cannot set a file's change time (only the clock moves it, on
// every write, chmod or rename), so a reader that saw a file with the same
// inode and change time in an earlier read, begun after that time, holds
// its content already.
//
// The stream is Magic, then records, then an end record with the number
// of records before it (a stream cut short is an error, never a short
// tree). A record is its kind (one byte), its path's length (uint16) and
// path (relative, slash-separated), then for a directory its mode
// (uint32) and modification time (int64, nanoseconds since 1970), for a
// file its mode, modification time, inode (uint64), change time (int64)
// and size (uint64), followed by that many bytes of content for KindFile
// and none for KindUnchanged. Numbers are little-endian.
package tree

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
)

// Magic starts every stream.
const Magic = "PDKTREE1"

// Kinds of record.
const (
	KindDir       = 'd'
	KindFile      = 'f' // a file with its content
	KindUnchanged = 'u' // a file changed before the asked time: no content
	KindOther     = 'o' // a symlink, socket, device or fifo: its path only
	kindEnd       = 'E'
)

// MaxPath bounds a record's path.
const MaxPath = 4096

// Path is the agent's route that serves a directory (query: path,
// username, unchanged_before: the time in nanoseconds since 1970 before
// which a file's change time makes it KindUnchanged; 0 sends every
// content) as a tree stream.
const Path = "/paddock/v1/tree"

// WalkStartHeader is the agent's clock, in nanoseconds since 1970, when
// it began a walk: the next read's time to ask for, less a margin for the
// coarser clock of change times.
const WalkStartHeader = "X-Paddock-Walk-Start"

// Record is one entry of the tree.
type Record struct {
	Kind  byte
	Path  string
	Mode  fs.FileMode // permission bits
	Mtime int64       // nanoseconds since 1970
	Ino   uint64
	Ctime int64
	Size  int64
}

// Writer writes a stream.
type Writer struct {
	w *bufio.Writer
	n uint64
}

// NewWriter starts a stream on w.
func NewWriter(w io.Writer) (*Writer, error) {
	bw := bufio.NewWriterSize(w, 64<<10)
	if _, err := bw.WriteString(Magic); err != nil {
		return nil, err
	}
	return &Writer{w: bw}, nil
}

// Write writes a record; for KindFile, content gives exactly r.Size bytes
// (a shorter content is padded with zeros, a longer one cut).
func (t *Writer) Write(r Record, content io.Reader) error {
	if len(r.Path) == 0 || len(r.Path) > MaxPath {
		return fmt.Errorf("tree: path of %d bytes", len(r.Path))
	}
	var hdr [4 + 8 + 8 + 8 + 8]byte
	hdr[0] = r.Kind
	binary.LittleEndian.PutUint16(hdr[1:], uint16(len(r.Path)))
	if _, err := t.w.Write(hdr[:3]); err != nil {
		return err
	}
	if _, err := t.w.WriteString(r.Path); err != nil {
		return err
	}
	t.n++
	switch r.Kind {
	case KindOther:
		return nil
	case KindDir:
		binary.LittleEndian.PutUint32(hdr[:], uint32(r.Mode.Perm()))
		binary.LittleEndian.PutUint64(hdr[4:], uint64(r.Mtime))
		_, err := t.w.Write(hdr[:12])
		return err
	case KindFile, KindUnchanged:
	default:
		return fmt.Errorf("tree: kind %q", r.Kind)
	}
	if r.Size < 0 {
		return fmt.Errorf("tree: size %d", r.Size)
	}
	binary.LittleEndian.PutUint32(hdr[0:], uint32(r.Mode.Perm()))
	binary.LittleEndian.PutUint64(hdr[4:], uint64(r.Mtime))
	binary.LittleEndian.PutUint64(hdr[12:], r.Ino)
	binary.LittleEndian.PutUint64(hdr[20:], uint64(r.Ctime))
	binary.LittleEndian.PutUint64(hdr[28:], uint64(r.Size))
	if _, err := t.w.Write(hdr[:36]); err != nil {
		return err
	}
	if r.Kind == KindUnchanged {
		return nil
	}
	n, err := io.Copy(t.w, io.LimitReader(content, r.Size))
	if err != nil {
		return err
	}
	for ; n < r.Size; n++ { // shrank while read
		if err := t.w.WriteByte(0); err != nil {
			return err
		}
	}
	return nil
}

// Close writes the end record and flushes.
func (t *Writer) Close() error {
	var end [1 + 8]byte
	end[0] = kindEnd
	binary.LittleEndian.PutUint64(end[1:], t.n)
	if _, err := t.w.Write(end[:]); err != nil {
		return err
	}
	return t.w.Flush()
}

// ErrFormat is a stream that is not one (untrusted input: a sandbox's).
var ErrFormat = errors.New("not a well-formed tree stream")

// Reader reads a stream.
type Reader struct {
	r       *bufio.Reader
	n       uint64
	content io.LimitedReader
	started bool
}

// NewReader reads a stream from r.
func NewReader(r io.Reader) *Reader {
	return &Reader{r: bufio.NewReaderSize(r, 64<<10)}
}

// Next returns the next record (io.EOF after the end record). A KindFile
// record's content is read with Read before the next call; what is not
// read is skipped.
func (t *Reader) Next() (Record, error) {
	if !t.started {
		t.started = true
		var m [len(Magic)]byte
		if _, err := io.ReadFull(t.r, m[:]); err != nil {
			return Record{}, short(err)
		}
		if string(m[:]) != Magic {
			return Record{}, fmt.Errorf("%w: no magic", ErrFormat)
		}
	}
	if t.content.N > 0 {
		if _, err := io.Copy(io.Discard, &t.content); err != nil {
			return Record{}, short(err)
		}
	}
	kind, err := t.r.ReadByte()
	if err != nil {
		return Record{}, short(err)
	}
	if kind == kindEnd {
		var b [8]byte
		if _, err := io.ReadFull(t.r, b[:]); err != nil {
			return Record{}, short(err)
		}
		if binary.LittleEndian.Uint64(b[:]) != t.n {
			return Record{}, fmt.Errorf("%w: %d records, the end says %d", ErrFormat, t.n, binary.LittleEndian.Uint64(b[:]))
		}
		return Record{}, io.EOF
	}
	var b [36]byte
	if _, err := io.ReadFull(t.r, b[:2]); err != nil {
		return Record{}, short(err)
	}
	plen := int(binary.LittleEndian.Uint16(b[:2]))
	if plen == 0 || plen > MaxPath {
		return Record{}, fmt.Errorf("%w: a path of %d bytes", ErrFormat, plen)
	}
	p := make([]byte, plen)
	if _, err := io.ReadFull(t.r, p); err != nil {
		return Record{}, short(err)
	}
	rec := Record{Kind: kind, Path: string(p)}
	if strings.IndexByte(rec.Path, 0) >= 0 {
		return Record{}, fmt.Errorf("%w: a path with a NUL", ErrFormat)
	}
	t.n++
	switch kind {
	case KindOther:
		return rec, nil
	case KindDir:
		if _, err := io.ReadFull(t.r, b[:12]); err != nil {
			return Record{}, short(err)
		}
		rec.Mode = fs.FileMode(binary.LittleEndian.Uint32(b[:4])).Perm()
		rec.Mtime = int64(binary.LittleEndian.Uint64(b[4:]))
		return rec, nil
	case KindFile, KindUnchanged:
	default:
		return Record{}, fmt.Errorf("%w: kind %q", ErrFormat, kind)
	}
	if _, err := io.ReadFull(t.r, b[:36]); err != nil {
		return Record{}, short(err)
	}
	rec.Mode = fs.FileMode(binary.LittleEndian.Uint32(b[0:])).Perm()
	rec.Mtime = int64(binary.LittleEndian.Uint64(b[4:]))
	rec.Ino = binary.LittleEndian.Uint64(b[12:])
	rec.Ctime = int64(binary.LittleEndian.Uint64(b[20:]))
	size := binary.LittleEndian.Uint64(b[28:])
	if size > 1<<62 {
		return Record{}, fmt.Errorf("%w: a size of %d", ErrFormat, size)
	}
	rec.Size = int64(size)
	if kind == KindFile {
		t.content = io.LimitedReader{R: t.r, N: rec.Size}
	}
	return rec, nil
}

// Read reads the current KindFile record's content.
func (t *Reader) Read(p []byte) (int, error) {
	if t.content.N <= 0 {
		return 0, io.EOF
	}
	n, err := t.content.Read(p)
	if errors.Is(err, io.EOF) && t.content.N > 0 {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}

func short(err error) error {
	if errors.Is(err, io.EOF) {
		return fmt.Errorf("%w: cut short", ErrFormat)
	}
	return err
}
