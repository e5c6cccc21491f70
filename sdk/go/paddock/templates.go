package paddock

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/paddock-dev/paddock/api"
)

// BuildTemplate builds (or rebuilds) a template. contextDir is the build
// context its copy steps read ("" = none); only the paths copy steps name
// are sent, as regular files, directories and symlinks (links are never
// followed; anything else is skipped). progress, if not nil, sees
// every event. A failed step returns an error carrying its output.
func (c *Client) BuildTemplate(ctx context.Context, spec api.TemplateSpec, contextDir string, progress func(api.TemplateBuildEvent)) (*api.Template, error) {
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(writeBuildTar(pw, spec, contextDir)) }()
	defer pr.Close()
	resp, err := c.send(ctx, request{method: http.MethodPost, path: "/v1/templates/build", body: pr, ctype: "application/x-tar", accept: "application/x-ndjson"})
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	er := newEventReader(resp.Body, MaxEventLine)
	for {
		var ev api.TemplateBuildEvent
		if err := er.next(&ev); err != nil {
			if cerr := ctx.Err(); cerr != nil {
				return nil, cerr
			}
			if errors.Is(err, io.EOF) {
				return nil, fmt.Errorf("template build: stream ended without an end event: %w", ErrUnavailable)
			}
			return nil, fmt.Errorf("template build: stream broke: %v: %w", err, ErrUnavailable)
		}
		if progress != nil {
			progress(ev)
		}
		if ev.Type != api.BuildEnd {
			continue
		}
		if ev.Error != nil {
			return nil, streamError(ev.Error)
		}
		if ev.Template == nil {
			return nil, fmt.Errorf("template build: end event without a template: %w", ErrUnavailable)
		}
		return ev.Template, nil
	}
}

func writeBuildTar(w io.Writer, spec api.TemplateSpec, dir string) error {
	tw := tar.NewWriter(w)
	b, err := json.Marshal(spec)
	if err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Name: "template.json", Mode: 0o644, Size: int64(len(b)), Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	if _, err := tw.Write(b); err != nil {
		return err
	}
	if dir != "" {
		root, err := filepath.Abs(dir)
		if err != nil {
			return err
		}
		for _, src := range copySources(spec) {
			if err := writeContextPath(tw, root, src); err != nil {
				return fmt.Errorf("build context: %w", err)
			}
		}
	}
	return tw.Close()
}

// copySources returns the context paths the spec's copy steps read,
// slash-separated and clean, none inside another: ["."] when a step copies
// the whole context, none when no step copies. Only these are sent, so a
// template file kept beside large files sends none of them. A source the
// daemon would refuse (empty, absolute, with "..") is left out: the daemon
// names the mistake, and nothing outside the context is ever read.
func copySources(spec api.TemplateSpec) []string {
	var srcs []string
	for _, st := range spec.Steps {
		if st.Kind != api.StepCopy || st.Src == "" || strings.HasPrefix(st.Src, "/") || strings.ContainsRune(st.Src, 0) ||
			slices.Contains(strings.Split(st.Src, "/"), "..") {
			continue
		}
		p := path.Clean(st.Src)
		if p == "." {
			return []string{"."}
		}
		srcs = append(srcs, p)
	}
	sort.Strings(srcs)
	var out []string
	for _, p := range srcs {
		// Sorted, so a directory comes before what lies inside it.
		if n := len(out); n > 0 && (p == out[n-1] || strings.HasPrefix(p, out[n-1]+"/")) {
			continue
		}
		out = append(out, p)
	}
	return out
}

// writeContextPath sends src (relative to root) and, for a directory,
// everything below it, as context/ entries named relative to root. Links
// are sent as links, never followed: a source whose path passes through a
// link, or that does not exist, is not sent, and the daemon then says the
// copy's source is not in the context.
func writeContextPath(tw *tar.Writer, root, src string) error {
	start := root
	if src != "." {
		parts := strings.Split(src, "/")
		for i := 1; i < len(parts); i++ {
			info, err := os.Lstat(filepath.Join(root, filepath.FromSlash(strings.Join(parts[:i], "/"))))
			if err != nil || !info.IsDir() {
				return nil
			}
		}
		start = filepath.Join(root, filepath.FromSlash(src))
		if _, err := os.Lstat(start); errors.Is(err, fs.ErrNotExist) {
			return nil
		}
	}
	return filepath.WalkDir(start, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil || rel == "." {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		name := "context/" + filepath.ToSlash(rel)
		h := &tar.Header{Name: name, Mode: int64(info.Mode().Perm())}
		switch {
		case info.Mode().IsRegular():
			h.Typeflag, h.Size = tar.TypeReg, info.Size()
		case info.IsDir():
			h.Typeflag, h.Name = tar.TypeDir, name+"/"
		case info.Mode()&fs.ModeSymlink != 0:
			t, err := os.Readlink(p)
			if err != nil {
				return err
			}
			h.Typeflag, h.Linkname = tar.TypeSymlink, t
		default:
			return nil
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if h.Typeflag == tar.TypeReg {
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			defer f.Close()
			if _, err := io.CopyN(tw, f, h.Size); err != nil {
				return err
			}
		}
		return nil
	})
}

func nameSegment(what, v string) (string, error) {
	if v == "" || strings.ContainsAny(v, "/?#%") || len(v) > 63 {
		return "", fmt.Errorf("%s %q is not valid: %w", what, v, ErrInvalidArgument)
	}
	return v, nil
}

// templateSegment checks a template's name, with its tag if any
// ("py:v2"), for a URL path.
func templateSegment(v string) (string, error) {
	if v == "" || strings.ContainsAny(v, "/?#%") || len(v) > 127 {
		return "", fmt.Errorf("template name %q is not valid: %w", v, ErrInvalidArgument)
	}
	return v, nil
}

// TemplateTags lists the tags of a template's name (given with a tag or
// not), by tag; the plain name is the tag "default".
func (c *Client) TemplateTags(ctx context.Context, name string) ([]api.TemplateTag, error) {
	n, err := templateSegment(name)
	if err != nil {
		return nil, err
	}
	var out api.TemplateTagList
	if err := c.call(ctx, request{method: http.MethodGet, path: "/v1/templates/" + n + "/tags"}, &out); err != nil {
		return nil, err
	}
	return out.Tags, nil
}

// TagTemplate gives the build of target (name or name:tag) the tags too,
// each replacing what it named before, and returns all the name's tags.
// A tag is removed with DeleteTemplate("name:tag").
func (c *Client) TagTemplate(ctx context.Context, target string, tags ...string) ([]api.TemplateTag, error) {
	n, err := templateSegment(target)
	if err != nil {
		return nil, err
	}
	var out api.TemplateTagList
	if err := c.call(ctx, request{method: http.MethodPost, path: "/v1/templates/" + n + "/tags", jsonBody: api.TagTemplateRequest{Tags: tags}}, &out); err != nil {
		return nil, err
	}
	return out.Tags, nil
}

// Templates lists built templates.
func (c *Client) Templates(ctx context.Context) ([]api.Template, error) {
	var out api.TemplateList
	if err := c.call(ctx, request{method: http.MethodGet, path: "/v1/templates"}, &out); err != nil {
		return nil, err
	}
	return out.Templates, nil
}

// Template returns one template.
func (c *Client) Template(ctx context.Context, name string) (*api.Template, error) {
	n, err := templateSegment(name)
	if err != nil {
		return nil, err
	}
	var out api.Template
	if err := c.call(ctx, request{method: http.MethodGet, path: "/v1/templates/" + n}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteTemplate removes a template and its build cache.
func (c *Client) DeleteTemplate(ctx context.Context, name string) error {
	n, err := templateSegment(name)
	if err != nil {
		return err
	}
	return c.call(ctx, request{method: http.MethodDelete, path: "/v1/templates/" + n}, nil)
}

// SetPool creates or changes a warm pool.
func (c *Client) SetPool(ctx context.Context, name string, req api.SetPoolRequest) (*api.Pool, error) {
	n, err := nameSegment("pool name", name)
	if err != nil {
		return nil, err
	}
	var out api.Pool
	if err := c.call(ctx, request{method: http.MethodPut, path: "/v1/pools/" + n, jsonBody: req}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Pools lists warm pools and their state.
func (c *Client) Pools(ctx context.Context) ([]api.Pool, error) {
	var out api.PoolList
	if err := c.call(ctx, request{method: http.MethodGet, path: "/v1/pools"}, &out); err != nil {
		return nil, err
	}
	return out.Pools, nil
}

// Pool returns one warm pool's state.
func (c *Client) Pool(ctx context.Context, name string) (*api.Pool, error) {
	n, err := nameSegment("pool name", name)
	if err != nil {
		return nil, err
	}
	var out api.Pool
	if err := c.call(ctx, request{method: http.MethodGet, path: "/v1/pools/" + n}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeletePool removes a pool and destroys its unclaimed sandboxes.
func (c *Client) DeletePool(ctx context.Context, name string) error {
	n, err := nameSegment("pool name", name)
	if err != nil {
		return err
	}
	return c.call(ctx, request{method: http.MethodDelete, path: "/v1/pools/" + n}, nil)
}
