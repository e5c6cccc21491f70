package templates

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/controller/rules"
	"github.com/paddock-dev/paddock/internal/errdefs"
)

// Bounds on a build context: it is held in memory for the build.
const (
	maxContextEntries = 20000
	maxContextBytes   = 64 << 20
)

// contextFile is one entry of a build context.
type contextFile struct {
	name     string // clean, relative, slash-separated
	typ      byte   // tar.TypeReg, tar.TypeDir or tar.TypeSymlink
	mode     int64  // permission bits only
	linkname string
	data     []byte
}

// BuildContext is the files a template's copy steps read, as sent by the
// client: only regular files, directories and symlinks, with names that
// stay inside the context.
type BuildContext struct {
	files []contextFile
}

// cleanContextName makes a tar entry name relative and clean, refusing
// any that would leave the context.
func cleanContextName(name string) (string, error) {
	if name == "" || strings.ContainsRune(name, 0) || len(name) > 4096 {
		return "", errdefs.Invalid("build context entry with an empty or invalid name")
	}
	if strings.HasPrefix(name, "/") {
		return "", errdefs.Invalid("build context entry %q is an absolute path", rules.Truncate(name, 80))
	}
	for _, part := range strings.Split(name, "/") {
		if part == ".." {
			return "", errdefs.Invalid("build context entry %q leaves the context", rules.Truncate(name, 80))
		}
	}
	c := path.Clean(name)
	if c == "." {
		return "", nil
	}
	return c, nil
}

// Entry names of a build request tar.
const (
	BuildSpecEntry    = "template.json"
	BuildContextEntry = "context/"
)

// ContextBuilder assembles a build context entry by entry, each checked
// as it is added: names kept inside the context and not doubled, only
// files, directories and symlinks, and the bounds on entries and bytes.
// ReadBuildRequest adds a request's tar entries with it; a front end that
// holds the files already (E2B's uploads) adds them directly.
type ContextBuilder struct {
	bc    BuildContext
	seen  map[string]bool
	total int64
}

// NewContextBuilder returns an empty builder.
func NewContextBuilder() *ContextBuilder { return &ContextBuilder{seen: map[string]bool{}} }

// Add adds the entry name (relative to the context; "" and "." are the
// context itself, skipped) of tar type typ. A regular file's size bytes
// are read with data, called once the size has passed the bounds.
func (cb *ContextBuilder) Add(name string, typ byte, mode int64, linkname string, size int64, data func() ([]byte, error)) error {
	if name == "" || name == "./" {
		return nil // the context directory itself
	}
	name, err := cleanContextName(name)
	if err != nil || name == "" {
		return err
	}
	if len(cb.bc.files) >= maxContextEntries {
		return errdefs.Invalid("build context has more than %d entries", maxContextEntries)
	}
	if cb.seen[name] {
		return errdefs.Invalid("build context names %q twice", rules.Truncate(name, 80))
	}
	cb.seen[name] = true
	f := contextFile{name: name, mode: mode & 0o777}
	switch typ {
	case tar.TypeReg:
		f.typ = tar.TypeReg
		cb.total += size
		if size < 0 || cb.total > maxContextBytes {
			return errdefs.Invalid("build context is larger than %d MiB", maxContextBytes>>20)
		}
		if f.data, err = data(); err != nil || int64(len(f.data)) != size {
			return errdefs.Invalid("build context entry %q is truncated", rules.Truncate(name, 80))
		}
	case tar.TypeDir:
		f.typ = tar.TypeDir
	case tar.TypeSymlink:
		f.typ = tar.TypeSymlink
		f.linkname = linkname
		if linkname == "" || len(linkname) > 4096 || strings.ContainsRune(linkname, 0) {
			return errdefs.Invalid("build context symlink %q has an invalid target", rules.Truncate(name, 80))
		}
	default:
		return errdefs.Invalid("build context entry %q is not a file, directory or symlink", rules.Truncate(name, 80))
	}
	cb.bc.files = append(cb.bc.files, f)
	return nil
}

// Context returns the context built, its entries by name.
func (cb *ContextBuilder) Context() *BuildContext {
	bc := &BuildContext{files: cb.bc.files}
	sort.Slice(bc.files, func(i, j int) bool { return bc.files[i].name < bc.files[j].name })
	return bc
}

// ReadBuildRequest reads a build request: a tar stream whose entry
// template.json is the TemplateSpec and whose entries under context/ are
// the build context. Context names stay inside the context; entries other
// than files, directories and symlinks, and more than the bounds allow,
// are refused.
func ReadBuildRequest(r io.Reader) (*api.TemplateSpec, *BuildContext, error) {
	cb := NewContextBuilder()
	var spec *api.TemplateSpec
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, nil, errdefs.Invalid("build request is not a valid tar stream: %v", err)
		}
		if h.Name == BuildSpecEntry {
			if spec != nil || h.Size > 1<<20 {
				return nil, nil, errdefs.Invalid("build request: %s is doubled or larger than 1 MiB", BuildSpecEntry)
			}
			spec = &api.TemplateSpec{}
			dec := json.NewDecoder(io.LimitReader(tr, 1<<20))
			dec.DisallowUnknownFields()
			if err := dec.Decode(spec); err != nil {
				return nil, nil, errdefs.Invalid("build request: %s: %v", BuildSpecEntry, err)
			}
			continue
		}
		rel, ok := strings.CutPrefix(h.Name, BuildContextEntry)
		if !ok {
			return nil, nil, errdefs.Invalid("build request entry %q is neither %s nor under %s", rules.Truncate(h.Name, 80), BuildSpecEntry, BuildContextEntry)
		}
		read := func() ([]byte, error) {
			b := make([]byte, h.Size)
			_, err := io.ReadFull(tr, b)
			return b, err
		}
		if err := cb.Add(rel, h.Typeflag, h.Mode, h.Linkname, h.Size, read); err != nil {
			return nil, nil, err
		}
	}
	if spec == nil {
		return nil, nil, errdefs.Invalid("build request has no %s", BuildSpecEntry)
	}
	return spec, cb.Context(), nil
}

// selectCopy returns the entries a copy of src takes, renamed relative to
// where they land: a file keeps its base name, a directory's contents go
// directly under the destination. Their content hash goes into the cache
// key, so a changed file invalidates that step and every later one.
func (bc *BuildContext) selectCopy(src string) ([]contextFile, string, error) {
	s, err := cleanContextName(src)
	if err != nil {
		return nil, "", err
	}
	var out []contextFile
	if bc != nil {
		for _, f := range bc.files {
			switch {
			case s == "":
				out = append(out, f)
			case f.name == s && f.typ != tar.TypeDir:
				g := f
				g.name = path.Base(f.name)
				out = append(out, g)
			case strings.HasPrefix(f.name, s+"/"):
				g := f
				g.name = strings.TrimPrefix(f.name, s+"/")
				out = append(out, g)
			}
		}
	}
	if len(out) == 0 && s != "" {
		return nil, "", errdefs.Invalid("copy: %q is not in the build context", rules.Truncate(src, 80))
	}
	h := sha256.New()
	var n [8]byte
	for _, f := range out {
		for _, part := range [][]byte{[]byte(f.name), {f.typ}, []byte(fmt.Sprint(f.mode)), []byte(f.linkname), f.data} {
			binary.BigEndian.PutUint64(n[:], uint64(len(part)))
			h.Write(n[:])
			h.Write(part)
		}
	}
	return out, hex.EncodeToString(h.Sum(nil)), nil
}

// tarOf writes files as a tar stream owned by root, for the agent to extract.
func tarOf(files []contextFile) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		h := &tar.Header{Name: f.name, Typeflag: f.typ, Mode: f.mode, Linkname: f.linkname}
		if f.typ == tar.TypeReg {
			h.Size = int64(len(f.data))
		}
		if f.typ == tar.TypeDir {
			h.Name += "/"
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if f.typ == tar.TypeReg {
			if _, err := tw.Write(f.data); err != nil {
				return nil, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// validateTemplateSpec checks a template definition before anything runs.
func validateTemplateSpec(s *api.TemplateSpec) error {
	if s.Name == "" {
		return errdefs.Invalid("template name is required")
	}
	name, ok := rules.TemplateRef(s.Name)
	if !ok {
		return errdefs.Invalid("template name %q: use 1-63 letters, digits, '-', '_' or '.', starting with a letter or digit, and a tag after a colon if any (name:tag, the tag likewise)", rules.Truncate(s.Name, 80))
	}
	s.Name = name
	if s.Template != "" {
		base, ok := rules.TemplateRef(s.Template)
		if !ok {
			return errdefs.Invalid("base template %q is not a template name", rules.Truncate(s.Template, 80))
		}
		s.Template = base
	}
	if s.Image != "" && s.Template != "" {
		return errdefs.Invalid("template %s: give a base image or a base template, not both", s.Name)
	}
	if s.Template == s.Name {
		return errdefs.Invalid("template %s cannot be based on itself", s.Name)
	}
	if len(s.Steps) > api.MaxTemplateSteps {
		return errdefs.Invalid("template %s has %d steps, at most %d", s.Name, len(s.Steps), api.MaxTemplateSteps)
	}
	if err := rules.Env(s.Env); err != nil {
		return err
	}
	if s.Cwd != "" && !path.IsAbs(s.Cwd) {
		return errdefs.Invalid("cwd %q must be an absolute path", rules.Truncate(s.Cwd, 80))
	}
	for i, st := range s.Steps {
		n := i + 1
		switch st.Kind {
		case api.StepRun:
			if strings.TrimSpace(st.Run) == "" || len(st.Run) > 64<<10 {
				return errdefs.Invalid("step %d: run needs a command line of at most 64 KiB", n)
			}
		case api.StepCopy:
			if st.Src == "" || !path.IsAbs(st.Dst) {
				return errdefs.Invalid("step %d: copy needs src (in the build context) and an absolute dst", n)
			}
			if _, err := cleanContextName(st.Src); err != nil {
				return fmt.Errorf("step %d: %w", n, err)
			}
		case api.StepEnv:
			if len(st.Env) == 0 {
				return errdefs.Invalid("step %d: env needs at least one variable", n)
			}
			if err := rules.Env(st.Env); err != nil {
				return fmt.Errorf("step %d: %w", n, err)
			}
		case api.StepWorkdir:
			if !path.IsAbs(st.Dir) {
				return errdefs.Invalid("step %d: workdir needs an absolute dir", n)
			}
		case api.StepUser:
			if st.User != "root" && st.User != "user" {
				return errdefs.Invalid("step %d: user must be \"root\" or \"user\"", n)
			}
		default:
			return errdefs.Invalid("step %d: unknown kind %q (want run, copy, env, workdir or user)", n, rules.Truncate(st.Kind, 40))
		}
	}
	if s.User != "" && s.User != "root" && s.User != "user" {
		return errdefs.Invalid("user must be \"root\" or \"user\"")
	}
	if len(s.Start) > 0 && s.Start[0] == "" {
		return errdefs.Invalid("start: the command is empty")
	}
	if r := s.Ready; r != nil {
		if len(s.Start) == 0 {
			return errdefs.Invalid("ready needs a start command")
		}
		given := 0
		for _, set := range []bool{r.Port != 0, r.Log != "", r.Cmd != ""} {
			if set {
				given++
			}
		}
		if given != 1 {
			return errdefs.Invalid("ready: give exactly one of port, log or cmd")
		}
		if len(r.Cmd) > api.MaxReadyCmd || strings.ContainsRune(r.Cmd, 0) {
			return errdefs.Invalid("ready: the command is longer than %d bytes or holds a NUL", api.MaxReadyCmd)
		}
		if r.Port < 0 || r.Port > 65535 {
			return errdefs.Invalid("ready: port %d is out of range", r.Port)
		}
	}
	return nil
}
