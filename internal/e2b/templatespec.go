package e2b

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/controller/templates"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/image"
	"github.com/paddock-dev/paddock/internal/shellquote"
)

// E2B's template definition (the body of POST /v2/templates/{id}/builds/
// {build}, as the SDKs' Template builder serializes it) and how it
// becomes a Paddock template build: a spec and a build context.

// buildStart is E2B's TemplateBuildStartV2.
type buildStart struct {
	FromImage         string          `json:"fromImage"`
	FromTemplate      string          `json:"fromTemplate"`
	FromImageRegistry json.RawMessage `json:"fromImageRegistry"`
	StartCmd          string          `json:"startCmd"`
	ReadyCmd          string          `json:"readyCmd"`
	Force             bool            `json:"force"`
	Steps             []buildStep     `json:"steps"`
}

// buildStep is E2B's TemplateStep: RUN [cmd, user?], COPY [src, dest,
// user?, mode?] with the hash of the files uploaded for it, ENV [k, v,
// ...], WORKDIR [dir], USER [name].
type buildStep struct {
	Type      string   `json:"type"`
	Args      []string `json:"args"`
	FilesHash string   `json:"filesHash"`
	Force     bool     `json:"force"`
}

// E2B's defaults: a template's steps run as "user" in /home/user.
const (
	e2bUser    = "user"
	e2bWorkdir = "/home/user"
	// e2bBaseImage is the SDKs' default base (Template().fromBaseImage()).
	e2bBaseImage = "e2bdev/base"
	// e2bReadyTimeout bounds a template's ready command at each create.
	e2bReadyTimeout = "2m"
)

// uploadEntry is one entry of a copy step's uploaded files.
type uploadEntry struct {
	name     string // as the client's tar names it, relative to its context
	typ      byte
	mode     int64
	linkname string
	data     []byte
}

// Bounds on what one build's uploads hold in memory (they are held until
// the build ends), the same as Paddock's own build context.
const (
	maxUploadBytes  = 64 << 20
	maxBuildEntries = 20000
	// entryOverhead is what an entry costs in memory besides its name and
	// content.
	entryOverhead = 128
)

// readUpload reads a copy step's files, a tar stream gzipped or not, into
// memory, bounded by left bytes of content (and maxUploadBytes of the
// compressed stream's expansion).
func readUpload(r io.Reader, left int64) ([]uploadEntry, int64, error) {
	br := bufio.NewReader(r)
	var src io.Reader = br
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, 0, errdefs.Invalid("upload: not a valid gzip stream: %v", err)
		}
		defer zr.Close()
		src = zr
	}
	tr := tar.NewReader(src)
	var out []uploadEntry
	var total int64
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out, total, nil
		}
		if err != nil {
			return nil, 0, errdefs.Invalid("upload: not a valid tar stream: %v", err)
		}
		name := strings.TrimPrefix(path.Clean("/"+h.Name), "/")
		if name == "" {
			continue
		}
		if strings.ContainsRune(h.Name, 0) || len(h.Name) > 4096 || hasDotDot(h.Name) {
			return nil, 0, errdefs.Invalid("upload: entry %q leaves the context", truncate(h.Name))
		}
		if len(out) >= maxBuildEntries {
			return nil, 0, errdefs.Invalid("upload: more than %d entries", maxBuildEntries)
		}
		e := uploadEntry{name: name, mode: h.Mode & 0o7777}
		// Names and link targets count against the bound as content does.
		total += int64(len(name)+len(h.Linkname)) + entryOverhead
		switch h.Typeflag {
		case tar.TypeReg:
			e.typ = tar.TypeReg
			total += h.Size
			if h.Size < 0 || total > left {
				return nil, 0, fmt.Errorf("upload: the build's files are larger than %d MiB: %w", maxUploadBytes>>20, errdefs.ErrResourceExhausted)
			}
			e.data = make([]byte, h.Size)
			if _, err := io.ReadFull(tr, e.data); err != nil {
				return nil, 0, errdefs.Invalid("upload: entry %q is truncated", truncate(name))
			}
		case tar.TypeDir:
			e.typ = tar.TypeDir
		case tar.TypeSymlink:
			e.typ, e.linkname = tar.TypeSymlink, h.Linkname
			if h.Linkname == "" || len(h.Linkname) > 4096 || strings.ContainsRune(h.Linkname, 0) {
				return nil, 0, errdefs.Invalid("upload: symlink %q has an invalid target", truncate(name))
			}
		default:
			return nil, 0, errdefs.Invalid("upload: entry %q is not a file, directory or symlink", truncate(name))
		}
		if total > left {
			return nil, 0, fmt.Errorf("upload: the build's files are larger than %d MiB: %w", maxUploadBytes>>20, errdefs.ErrResourceExhausted)
		}
		out = append(out, e)
	}
}

func hasDotDot(name string) bool {
	for _, part := range strings.Split(name, "/") {
		if part == ".." {
			return true
		}
	}
	return false
}

// globMatch matches a slash-separated name against a pattern of the
// SDKs' glob: path.Match within a segment, and "**" for any number of
// segments.
func globMatch(pattern, name string) bool {
	return globParts(strings.Split(pattern, "/"), strings.Split(name, "/"))
}

func globParts(pat, name []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			for i := 0; i <= len(name); i++ {
				if globParts(pat[1:], name[i:]) {
					return true
				}
			}
			return false
		}
		if len(name) == 0 {
			return false
		}
		if ok, err := path.Match(pat[0], name[0]); err != nil || !ok {
			return false
		}
		pat, name = pat[1:], name[1:]
	}
	return len(name) == 0
}

// placed is one copy step's files as they go into the build context:
// names relative to the destination directory.
type placed struct {
	entries []uploadEntry
	dir     string // the absolute destination directory
}

// placeCopy lays out the files a copy of src to dest takes from the
// uploaded entries, as a Dockerfile's COPY does: a matched file lands in
// dest under its base name (or as dest itself when dest names a file: one
// plain source that is a file, dest without a trailing slash), a matched
// directory's contents land directly in dest.
func placeCopy(entries []uploadEntry, src, dest, workdir string) (placed, error) {
	pattern := strings.TrimPrefix(path.Clean("/"+src), "/")
	destDir := dest
	if !path.IsAbs(destDir) {
		destDir = path.Join(workdir, destDir)
	}
	destDir = path.Clean(destDir)
	var matched []uploadEntry
	for _, e := range entries {
		if pattern == "" || globMatch(pattern, e.name) {
			matched = append(matched, e)
		}
	}
	if len(matched) == 0 {
		return placed{}, errdefs.Invalid("copy %s: no uploaded file matches it", truncate(src))
	}
	asFile := len(matched) == 1 && matched[0].typ != tar.TypeDir && !strings.ContainsAny(src, "*?[") && !strings.HasSuffix(dest, "/")
	if asFile {
		e := matched[0]
		e.name = path.Base(destDir)
		return placed{entries: []uploadEntry{e}, dir: path.Dir(destDir)}, nil
	}
	out := placed{dir: destDir}
	seen := map[string]bool{}
	add := func(e uploadEntry, name string) {
		if name == "" || seen[name] {
			return
		}
		seen[name] = true
		e.name = name
		out.entries = append(out.entries, e)
	}
	for _, m := range matched {
		if m.typ != tar.TypeDir {
			add(m, path.Base(m.name))
			continue
		}
		for _, e := range entries {
			if rel, ok := strings.CutPrefix(e.name, m.name+"/"); ok {
				add(e, rel)
			}
		}
	}
	return out, nil // no entries: only empty directories matched
}

// baseOf maps E2B's fromImage/fromTemplate to a Paddock template's base.
func baseOf(b buildStart) (img, tpl string, err error) {
	switch {
	case b.FromImage != "" && b.FromTemplate != "":
		return "", "", errdefs.Invalid("give fromImage or fromTemplate, not both")
	case b.FromTemplate != "":
		if i, ok := templateImages[b.FromTemplate]; ok {
			return i, "", nil
		}
		if b.FromTemplate == defaultImage {
			return image.NameBase, "", nil
		}
		return "", b.FromTemplate, nil
	case b.FromImage == "" || b.FromImage == e2bBaseImage || strings.HasPrefix(b.FromImage, e2bBaseImage+":"):
		return image.NameBase, "", nil
	default:
		return b.FromImage, "", nil
	}
}

// Bounds of fromImageRegistry's fields.
const (
	maxRegistryUser    = 1024
	maxRegistrySecret  = 16 << 10 // a token or password
	maxRegistryGCPKey  = 64 << 10 // a service account's JSON key
	gcpJSONKeyUsername = "_json_key"
	registryAWSAdvice  = "give type registry with username AWS and the password `aws ecr get-login-password` prints"
)

// registryAuth reads E2B's fromImageRegistry: the credentials a build
// from a private image pulls it with. Type registry gives a user name
// and password; gcp a service account's JSON key, which Google's
// registries take as the password of the user _json_key. aws (access
// keys, which only AWS's API turns into a registry password) is refused
// with how to give that password instead. null or absent: none.
func registryAuth(raw json.RawMessage) (*image.RegistryAuth, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var r struct {
		Type               string          `json:"type"`
		Username           string          `json:"username"`
		Password           string          `json:"password"`
		ServiceAccountJSON json.RawMessage `json:"serviceAccountJson"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, errdefs.Invalid("fromImageRegistry: %v", err)
	}
	switch r.Type {
	case "registry":
		if r.Username == "" || r.Password == "" {
			return nil, errdefs.Invalid("fromImageRegistry: type registry needs a username and a password")
		}
		if len(r.Username) > maxRegistryUser || len(r.Password) > maxRegistrySecret {
			return nil, errdefs.Invalid("fromImageRegistry: username or password too long (%d and %d bytes at most)", maxRegistryUser, maxRegistrySecret)
		}
		return &image.RegistryAuth{Username: r.Username, Password: r.Password}, nil
	case "gcp":
		key := r.ServiceAccountJSON
		var s string
		if json.Unmarshal(key, &s) == nil {
			key = json.RawMessage(s) // the SDKs send the key as a string
		}
		if len(key) == 0 || len(key) > maxRegistryGCPKey || !json.Valid(key) {
			return nil, errdefs.Invalid("fromImageRegistry: type gcp needs serviceAccountJson, a service account's JSON key of at most %d bytes", maxRegistryGCPKey)
		}
		return &image.RegistryAuth{Username: gcpJSONKeyUsername, Password: string(key)}, nil
	case "aws":
		return nil, errdefs.Invalid("fromImageRegistry: type aws (access keys) is not served; %s", registryAWSAdvice)
	default:
		return nil, errdefs.Invalid("fromImageRegistry: type %q: want registry, gcp or aws", truncate(r.Type))
	}
}

// e2bSpec turns E2B's definition into a Paddock build request (the
// definition and its context) for the template name, with the files
// uploaded for each copy step by hash. origin says, for each of the
// spec's steps, which of E2B's steps (1-based) it comes from, 0 for the
// ones the translation adds before them.
func e2bSpec(name string, b buildStart, uploads map[string][]uploadEntry) (spec *api.TemplateSpec, bc *templates.BuildContext, origin []int, err error) {
	img, base, err := baseOf(b)
	if err != nil {
		return nil, nil, nil, err
	}
	if auth, err := registryAuth(b.FromImageRegistry); err != nil {
		return nil, nil, nil, err
	} else if auth != nil && (b.FromImage == "" || base != "") {
		return nil, nil, nil, errdefs.Invalid("fromImageRegistry: credentials go with fromImage, the image they pull")
	}
	spec = &api.TemplateSpec{Name: name, Image: img, Template: base}
	user, workdir := e2bUser, e2bWorkdir
	if base == "" {
		if !slices.Contains(image.Builtin(), img) {
			// An image of someone else's may have no account "user" (it
			// then runs as uid 1000) nor its home: the home is made, as
			// E2B makes it.
			spec.Steps = append(spec.Steps, api.TemplateStep{Kind: api.StepRun,
				Run: "mkdir -p " + e2bWorkdir + " && chown " + e2bUser + " " + e2bWorkdir + " 2>/dev/null || chown 1000:1000 " + e2bWorkdir})
		}
		spec.Steps = append(spec.Steps,
			api.TemplateStep{Kind: api.StepUser, User: user},
			api.TemplateStep{Kind: api.StepWorkdir, Dir: workdir})
	}
	cb := templates.NewContextBuilder()
	origin = make([]int, len(spec.Steps))
	from := 0 // the E2B step being translated
	steps := func(s ...api.TemplateStep) {
		spec.Steps = append(spec.Steps, s...)
		for range s {
			origin = append(origin, from)
		}
	}
	// as runs s as who (when who is given and is not the current user).
	as := func(who string, s ...api.TemplateStep) error {
		if who == "" || who == user {
			steps(s...)
			return nil
		}
		if who != "root" && who != "user" {
			return errdefs.Invalid("invalid username: %q: Paddock's sandboxes have the users root and user", truncate(who))
		}
		steps(api.TemplateStep{Kind: api.StepUser, User: who})
		steps(s...)
		steps(api.TemplateStep{Kind: api.StepUser, User: user})
		return nil
	}
	for i, st := range b.Steps {
		n := i + 1
		from = n
		switch st.Type {
		case "RUN":
			if len(st.Args) < 1 || len(st.Args) > 2 {
				return nil, nil, nil, errdefs.Invalid("step %d: RUN takes a command and a user", n)
			}
			who := ""
			if len(st.Args) == 2 {
				who = st.Args[1]
			}
			if err := as(who, api.TemplateStep{Kind: api.StepRun, Run: st.Args[0]}); err != nil {
				return nil, nil, nil, fmt.Errorf("step %d: failed to run command %q: %w", n, truncate(st.Args[0]), err)
			}
		case "ENV":
			if len(st.Args) == 0 || len(st.Args)%2 != 0 {
				return nil, nil, nil, errdefs.Invalid("step %d: ENV takes pairs of name and value", n)
			}
			env := map[string]string{}
			for j := 0; j < len(st.Args); j += 2 {
				env[st.Args[j]] = st.Args[j+1]
			}
			steps(api.TemplateStep{Kind: api.StepEnv, Env: env})
		case "WORKDIR":
			if len(st.Args) != 1 || st.Args[0] == "" {
				return nil, nil, nil, errdefs.Invalid("step %d: WORKDIR takes a directory", n)
			}
			dir := st.Args[0]
			if !path.IsAbs(dir) {
				dir = path.Join(workdir, dir)
			}
			workdir = path.Clean(dir)
			// Made as Docker's WORKDIR makes it, owned by the current user.
			steps(api.TemplateStep{Kind: api.StepRun, Run: "mkdir -p " + shellquote.Quote(workdir)},
				api.TemplateStep{Kind: api.StepWorkdir, Dir: workdir})
		case "USER":
			if len(st.Args) != 1 || (st.Args[0] != "root" && st.Args[0] != "user") {
				return nil, nil, nil, errdefs.Invalid("step %d: USER: Paddock's sandboxes have the users root and user", n)
			}
			user = st.Args[0]
			steps(api.TemplateStep{Kind: api.StepUser, User: user})
		case "COPY":
			if len(st.Args) < 2 || len(st.Args) > 4 {
				return nil, nil, nil, errdefs.Invalid("step %d: COPY takes a source, a destination, a user and a mode", n)
			}
			files, ok := uploads[st.FilesHash]
			if !ok {
				return nil, nil, nil, errdefs.Invalid("step %d: the files of copy %s were not uploaded (hash %q)", n, truncate(st.Args[0]), truncate(st.FilesHash))
			}
			p, err := placeCopy(files, st.Args[0], st.Args[1], workdir)
			if err != nil {
				return nil, nil, nil, fmt.Errorf("step %d: %w", n, err)
			}
			dir := "s" + strconv.Itoa(n)
			if err := addEntries(cb, dir, p.entries); err != nil {
				return nil, nil, nil, err
			}
			who := ""
			if len(st.Args) > 2 {
				who = st.Args[2]
			}
			cp := []api.TemplateStep{{Kind: api.StepCopy, Src: dir, Dst: p.dir}}
			if len(p.entries) == 0 {
				// Only empty directories: the destination is still made.
				cp = []api.TemplateStep{{Kind: api.StepRun, Run: "mkdir -p " + shellquote.Quote(p.dir)}}
			}
			if len(st.Args) > 3 && st.Args[3] != "" {
				mode := st.Args[3]
				if _, err := strconv.ParseUint(mode, 8, 32); err != nil {
					return nil, nil, nil, errdefs.Invalid("step %d: COPY mode %q is not octal", n, truncate(mode))
				}
				var paths []string
				for _, e := range p.entries {
					if !strings.Contains(e.name, "/") {
						paths = append(paths, shellquote.Quote(path.Join(p.dir, e.name)))
					}
				}
				cp = append(cp, api.TemplateStep{Kind: api.StepRun, Run: "chmod -R " + mode + " " + strings.Join(paths, " ")})
			}
			if err := as(who, cp...); err != nil {
				return nil, nil, nil, fmt.Errorf("step %d: %w", n, err)
			}
		default:
			return nil, nil, nil, errdefs.Invalid("step %d: unknown step type %q (want RUN, COPY, ENV, WORKDIR or USER)", n, truncate(st.Type))
		}
	}
	// The last user and work directory are the sandboxes' defaults, as
	// on E2B (Build keeps the last work directory as the template's cwd).
	spec.User = user
	if b.StartCmd != "" {
		spec.Start = []string{"/bin/sh", "-c", b.StartCmd}
		if b.ReadyCmd != "" {
			spec.Ready = &api.Readiness{Cmd: b.ReadyCmd, Timeout: e2bReadyTimeout}
		}
	} else if b.ReadyCmd != "" {
		return nil, nil, nil, errdefs.Invalid("readyCmd needs a startCmd")
	}
	if len(spec.Steps) > api.MaxTemplateSteps {
		return nil, nil, nil, errdefs.Invalid("the template has %d steps once translated (users, work directories, modes), more than %d", len(spec.Steps), api.MaxTemplateSteps)
	}
	return spec, cb.Context(), origin, nil
}

// addEntries adds a copy step's placed files under dir of the build
// context (the uploads' bytes are shared, not copied).
func addEntries(cb *templates.ContextBuilder, dir string, entries []uploadEntry) error {
	if err := cb.Add(dir, tar.TypeDir, 0o755, "", 0, nil); err != nil {
		return err
	}
	for _, e := range entries {
		data := func() ([]byte, error) { return e.data, nil }
		if err := cb.Add(dir+"/"+e.name, e.typ, e.mode, e.linkname, int64(len(e.data)), data); err != nil {
			return err
		}
	}
	return nil
}
