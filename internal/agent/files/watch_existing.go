package files

import (
	"io/fs"
	"path/filepath"

	"github.com/paddock-dev/paddock/proto/gen/filesystem"
)

// maxExistingEvents bounds the synthetic events for one new directory.
const maxExistingEvents = 4096

// existing reports what is already inside a directory that just appeared
// in a recursive watch: entries created between the directory's creation
// and the watch on it (mkdir -p a/b, an unpacked archive) raise no event
// of their own, so they are reported as created here.
func (d *dirWatch) existing(dir string) []*filesystem.FilesystemEvent {
	var out []*filesystem.FilesystemEvent
	_ = filepath.WalkDir(dir, func(p string, de fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return nil
		}
		if len(out) >= maxExistingEvents {
			return filepath.SkipAll
		}
		rel, rerr := filepath.Rel(d.root, p)
		if rerr != nil {
			return nil
		}
		fe := &filesystem.FilesystemEvent{Name: rel, Type: filesystem.EventType_EVENT_TYPE_CREATE}
		if d.includeEntry {
			if e, err := entryInfo(p, d.names); err == nil {
				fe.Entry = e
			}
		}
		out = append(out, fe)
		return nil
	})
	return out
}
