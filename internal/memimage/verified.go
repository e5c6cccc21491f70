package memimage

import (
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// Verified remembers the image files this process hashed, by device and
// inode, with the size, times and link count they had: a later Check of
// a file that still has them (a hibernated sandbox's image checked at its
// wake after Seal hashed it, a snapshot restored again) takes the hash it
// found instead of reading the whole file again.
//
// A write to a file, through any of its names, moves its modification
// and change times; user space can set the first back (utimensat, as the
// file's owner) but never the second, so a file whose change time moved
// is read again, with one exception: the change time also moves when a
// name is added or removed (a memory snapshot links the image of the
// sandbox it is taken of, which is removed once the sandbox is back), and
// a change time that moved along with the link count, the size and the
// modification time as recorded, is taken as that. The checks are against
// damage and mistakes; whoever can write the daemon's state directory can
// rewrite a manifest too. The zero value is ready; a nil *Verified
// remembers nothing.
type Verified struct {
	mu    sync.Mutex
	files map[fileID]stamp
	reads atomic.Int64 // files read whole, to hash them
}

// Reads is how many files v had read whole to hash them.
func (v *Verified) Reads() int64 {
	if v == nil {
		return 0
	}
	return v.reads.Load()
}

// maxVerified bounds what a Verified remembers; past it, it starts over.
const maxVerified = 4096

type fileID struct{ dev, ino uint64 }

type stamp struct {
	size         int64
	nlink        uint64
	mtime, ctime unix.Timespec
	sha256       string
}

func stampOf(st *unix.Stat_t) (fileID, stamp) {
	return fileID{dev: st.Dev, ino: st.Ino}, stamp{size: st.Size, nlink: uint64(st.Nlink), mtime: st.Mtim, ctime: st.Ctim}
}

// same reports whether now is the file as rec recorded it, its content
// untouched.
func (rec stamp) same(now stamp) bool {
	if rec.size != now.size || rec.mtime != now.mtime {
		return false
	}
	return rec.ctime == now.ctime || rec.nlink != now.nlink
}

// lookup returns the hash remembered for the file st describes, if it has
// not changed since; the record follows a link count that moved.
func (v *Verified) lookup(st *unix.Stat_t) (string, bool) {
	if v == nil {
		return "", false
	}
	id, now := stampOf(st)
	v.mu.Lock()
	defer v.mu.Unlock()
	rec, ok := v.files[id]
	if !ok || !rec.same(now) {
		return "", false
	}
	now.sha256 = rec.sha256
	v.files[id] = now
	return rec.sha256, true
}

// remember records sum as the hash of the file st describes.
func (v *Verified) remember(st *unix.Stat_t, sum string) {
	if v == nil {
		return
	}
	id, s := stampOf(st)
	s.sha256 = sum
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.files == nil || len(v.files) >= maxVerified {
		v.files = map[fileID]stamp{}
	}
	v.files[id] = s
}
