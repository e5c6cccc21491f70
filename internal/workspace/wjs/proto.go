package wjs

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
)

// The daemon and its child speak in frames over a socket pair: two
// big-endian uint32 lengths, a JSON header of that first length, then raw
// data of the second (file contents and output, so they are not encoded).
// The child asks (call), the daemon answers (reply), one at a time; the
// first frame is the daemon's start.

// maxHeader bounds a frame's JSON header; maxData its data: a whole file
// (vfs.MaxFileSize) and a little.
const (
	maxHeader = 1 << 20
	maxData   = 512<<20 + 1<<20
)

// start is the first frame: what to run.
type start struct {
	// Source is the program; File the workspace file it was read from
	// ("" for a script given inline), shown in errors and argv.
	Source string            `json:"source"`
	File   string            `json:"file,omitempty"`
	Args   []string          `json:"args,omitempty"`
	Env    map[string]string `json:"env,omitempty"`
	// Cwd is the absolute directory the program starts in, under Root.
	Cwd       string `json:"cwd"`
	MaxMemory int64  `json:"max_memory"`
	// TimeoutMs backs the daemon's own timer with a CPU-time limit.
	TimeoutMs int64 `json:"timeout_ms"`
	// Stdin travels as the frame's data.
}

// Operations of a call.
const (
	opRead    = "read"
	opWrite   = "write"
	opStat    = "stat"
	opReadDir = "readdir"
	opMkdir   = "mkdir"
	opRemove  = "rm"
	opRename  = "rename"
	opCopy    = "copy"
	opChmod   = "chmod"
	opOut     = "out"
)

// request is one call of the program to the daemon: a file operation on
// the workspace, or output (opOut, FD 1 or 2, the data).
type request struct {
	Op        string `json:"op"`
	Path      string `json:"path,omitempty"`
	To        string `json:"to,omitempty"`
	Append    bool   `json:"append,omitempty"`
	Recursive bool   `json:"recursive,omitempty"`
	Force     bool   `json:"force,omitempty"`
	// Dir lets rm remove an empty directory (rmdir).
	Dir  bool   `json:"dir,omitempty"`
	Mode uint32 `json:"mode,omitempty"`
	FD   int    `json:"fd,omitempty"`
}

// reply answers a call: Code and Err when it failed (Node's error codes:
// ENOENT, EEXIST, ...), else what it asked for.
type reply struct {
	Code    string     `json:"code,omitempty"`
	Err     string     `json:"err,omitempty"`
	Stat    *statInfo  `json:"stat,omitempty"`
	Entries []dirEntry `json:"entries,omitempty"`
	// Stop tells the program to end now: the daemon stopped the run
	// (its output went past the bound).
	Stop bool `json:"stop,omitempty"`
}

type statInfo struct {
	Size    int64  `json:"size"`
	Dir     bool   `json:"dir"`
	Mode    uint32 `json:"mode"`
	MtimeMs int64  `json:"mtime_ms"`
}

type dirEntry struct {
	Name string `json:"name"`
	Dir  bool   `json:"dir"`
}

func writeFrame(w io.Writer, header any, data []byte) error {
	h, err := json.Marshal(header)
	if err != nil {
		return err
	}
	var pre [8]byte
	binary.BigEndian.PutUint32(pre[:4], uint32(len(h)))
	binary.BigEndian.PutUint32(pre[4:], uint32(len(data)))
	buf := make([]byte, 0, 8+len(h)+len(data))
	buf = append(append(append(buf, pre[:]...), h...), data...)
	_, err = w.Write(buf)
	return err
}

// readFrame reads one frame into header and returns its data, refusing
// lengths past the bounds before reading them.
func readFrame(r io.Reader, header any) ([]byte, error) {
	var pre [8]byte
	if _, err := io.ReadFull(r, pre[:]); err != nil {
		return nil, err
	}
	hl, dl := binary.BigEndian.Uint32(pre[:4]), binary.BigEndian.Uint32(pre[4:])
	if hl > maxHeader || dl > maxData {
		return nil, fmt.Errorf("frame of %d+%d bytes is over the bound", hl, dl)
	}
	buf := make([]byte, int(hl)+int(dl))
	if _, err := io.ReadFull(r, buf); err != nil {
		return nil, fmt.Errorf("short frame: %w", err)
	}
	if err := json.Unmarshal(buf[:hl], header); err != nil {
		return nil, fmt.Errorf("frame header: %w", err)
	}
	return buf[hl:], nil
}
