package image

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/paddock-dev/paddock/internal/errdefs"
)

// Pusher pushes images, with the agent added as ExportOCI adds it, to a
// registry that a cluster's nodes pull from, once per image: an image
// already pushed (by this process, or found in the registry under its
// content-named reference) is not pushed again, and a layer already
// written once is not read again to learn its digest.
type Pusher struct {
	prefix  string
	agent   string
	agentID string // AgentID(agent)
	tmp     string
	auth    authn.Keychain
	log     *slog.Logger
	options []remote.Option

	mu     sync.Mutex
	pushed map[string]bool          // references the registry has
	flight map[string]*pushCall     // pushes under way, by reference
	known  map[string]ociDescriptor // layer directory -> its blob
	cache  string                   // the file known is kept in, or ""
}

type pushCall struct {
	done chan struct{}
	err  error
}

// PusherOptions configures a Pusher.
type PusherOptions struct {
	// Prefix is the registry and path images are pushed under (OCIRef).
	Prefix string
	// AgentBinary is the static agent added to every image.
	AgentBinary string
	// AgentID is AgentID(AgentBinary), if the caller has it already ("":
	// NewPusher reads the binary for it).
	AgentID string
	// TempDir holds layers' tars while they are pushed ("" is the system's).
	TempDir string
	// Auth gives the registry's credentials; nil is anonymous.
	Auth authn.Keychain
	// Transport is the HTTP transport (nil: the default).
	Transport http.RoundTripper
	// LayerCache, if set, is a file that keeps the layers' blob digests
	// across restarts, so that a daemon started again does not read a
	// layer the registry has (a template's base image) to learn it.
	LayerCache string
	Logger     *slog.Logger
}

// NewPusher returns a Pusher.
func NewPusher(o PusherOptions) (*Pusher, error) {
	if err := ValidateOCIPrefix(o.Prefix); err != nil {
		return nil, err
	}
	if o.AgentBinary == "" {
		return nil, errors.New("image push: the agent binary is required")
	}
	auth := o.Auth
	if auth == nil {
		auth = anonymous{}
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	opts := []remote.Option{remote.WithAuthFromKeychain(auth)}
	if o.Transport != nil {
		opts = append(opts, remote.WithTransport(o.Transport))
	}
	agentID := o.AgentID
	if agentID == "" {
		var err error
		if agentID, err = AgentID(o.AgentBinary); err != nil {
			return nil, fmt.Errorf("image push: %w", err)
		}
	}
	p := &Pusher{
		prefix: o.Prefix, agent: o.AgentBinary, agentID: agentID, tmp: o.TempDir, auth: auth, log: log, options: opts,
		pushed: map[string]bool{}, flight: map[string]*pushCall{}, known: map[string]ociDescriptor{},
		cache: o.LayerCache,
	}
	p.loadCache()
	return p, nil
}

// maxCachedLayers bounds the layer cache file's entries.
const maxCachedLayers = 1 << 16

// loadCache reads the layer cache file, if any. A file that cannot be
// read is logged and left to be written anew: it only saves reading.
func (p *Pusher) loadCache() {
	if p.cache == "" {
		return
	}
	f, err := os.Open(p.cache)
	if errors.Is(err, os.ErrNotExist) {
		return
	}
	if err == nil {
		defer f.Close()
		var m map[string]ociDescriptor
		err = json.NewDecoder(io.LimitReader(f, maxCachedLayers*512)).Decode(&m)
		if err == nil && len(m) > maxCachedLayers {
			err = fmt.Errorf("%d entries", len(m))
		}
		for k, d := range m {
			if _, herr := v1.NewHash(d.Digest); herr != nil || d.Size < 0 || d.MediaType != mediaLayer {
				err = fmt.Errorf("entry %q is not a layer's descriptor", k)
				break
			}
		}
		if err == nil {
			p.known = m
			return
		}
	}
	p.log.Warn("image push: layer cache not read; layers are read again to learn their digests", "file", p.cache, "err", err)
}

// saveCache writes the layer cache file (p.mu held), through a temporary
// file and a rename.
func (p *Pusher) saveCache() {
	if p.cache == "" {
		return
	}
	if len(p.known) > maxCachedLayers/16 {
		// Layers collected since (and agents replaced) are forgotten.
		for k := range p.known {
			if _, err := os.Lstat(strings.TrimPrefix(k, "agent:")); err != nil {
				delete(p.known, k)
			}
		}
	}
	if len(p.known) > maxCachedLayers {
		return
	}
	data, err := json.Marshal(p.known)
	if err == nil {
		tmp := p.cache + ".tmp"
		if err = os.WriteFile(tmp, data, 0o600); err == nil {
			err = os.Rename(tmp, p.cache)
		}
	}
	if err != nil {
		p.log.Warn("image push: layer cache not written", "file", p.cache, "err", err)
	}
}

// Ref is the reference img is pushed under.
func (p *Pusher) Ref(img *Image) string { return OCIRef(p.prefix, img, p.agentID) }

// Push makes sure the registry holds img under p.Ref(img). Concurrent
// pushes of one image wait for one push.
func (p *Pusher) Push(ctx context.Context, img *Image) error {
	ref := p.Ref(img)
	p.mu.Lock()
	if p.pushed[ref] {
		p.mu.Unlock()
		return nil
	}
	c, ok := p.flight[ref]
	if !ok {
		c = &pushCall{done: make(chan struct{})}
		p.flight[ref] = c
		// The push goes on if its callers give up: a later create of
		// the image waits for it instead of starting over.
		go func(ctx context.Context) {
			c.err = p.push(ctx, img, ref)
			p.mu.Lock()
			delete(p.flight, ref)
			if c.err == nil {
				p.pushed[ref] = true
			}
			p.mu.Unlock()
			close(c.done)
		}(context.WithoutCancel(ctx))
	}
	p.mu.Unlock()
	select {
	case <-c.done:
		return c.err
	case <-ctx.Done():
		return fmt.Errorf("image push: %s: %w (the push goes on)", ref, ctx.Err())
	}
}

// Unpush deletes img's manifest from the registry (by its digest, as the
// distribution API deletes): the image left the store, and nothing will
// name it again. Its blobs go with the registry's own collection. An
// image the registry does not hold is no error; a registry that refuses
// deletions (many do unless configured to allow them) is
// ErrFailedPrecondition, saying so.
func (p *Pusher) Unpush(ctx context.Context, img *Image) error {
	ref := p.Ref(img)
	p.mu.Lock()
	delete(p.pushed, ref)
	p.mu.Unlock()
	tag, err := name.NewTag(ref)
	if err != nil {
		return errdefs.Invalid("image push: reference %q: %v", ref, err)
	}
	opts := append([]remote.Option{remote.WithContext(ctx)}, p.options...)
	desc, err := remote.Head(tag, opts...)
	if notFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("image delete: %s: %w", ref, registryErr(err))
	}
	if err := remote.Delete(tag.Context().Digest(desc.Digest.String()), opts...); err != nil && !notFound(err) {
		return deleteErr(ref, err)
	}
	// A registry that keeps tags apart from their manifests (some do)
	// still resolves the tag: it is deleted too.
	if _, err := remote.Head(tag, opts...); err == nil {
		if err := remote.Delete(tag, opts...); err != nil && !notFound(err) {
			return deleteErr(ref, err)
		}
	}
	p.log.Info("image deleted from the registry", "image", img.Name, "ref", ref, "digest", desc.Digest.String())
	return nil
}

// deleteErr says a registry's refusal to delete as such.
func deleteErr(ref string, err error) error {
	var te *transport.Error
	if errors.As(err, &te) && (te.StatusCode == http.StatusMethodNotAllowed || slices.ContainsFunc(te.Errors, func(d transport.Diagnostic) bool { return d.Code == transport.UnsupportedErrorCode })) {
		return fmt.Errorf("image delete: %s: the registry does not delete images (enable deletions there, or collect them yourself): %w", ref, errdefs.ErrFailedPrecondition)
	}
	return fmt.Errorf("image delete: %s: %w", ref, registryErr(err))
}

// pushTimeout bounds one image's push: its layers' tars and uploads.
const pushTimeout = 30 * time.Minute

func (p *Pusher) push(ctx context.Context, img *Image, ref string) error {
	ctx, cancel := context.WithTimeout(ctx, pushTimeout)
	defer cancel()
	tag, err := name.NewTag(ref)
	if err != nil {
		return errdefs.Invalid("image push: reference %q: %v", ref, err)
	}
	opts := append([]remote.Option{remote.WithContext(ctx)}, p.options...)
	if _, err := remote.Head(tag, opts...); err == nil {
		p.log.Info("image already in the registry", "image", img.Name, "ref", ref)
		return nil
	} else if !notFound(err) {
		return fmt.Errorf("image push: %s: %w", ref, registryErr(err))
	}
	start := time.Now()
	tmp, err := os.MkdirTemp(p.tmp, "oci-push-")
	if err != nil {
		return fmt.Errorf("image push: %w", err)
	}
	defer os.RemoveAll(tmp)
	p.mu.Lock()
	known := make(map[string]ociDescriptor, len(p.known))
	for k, v := range p.known {
		known[k] = v
	}
	p.mu.Unlock()
	oi, err := buildOCI(ctx, img, p.agent, tmp, known)
	if err != nil {
		return fmt.Errorf("image push: %s: %w", img.Name, err)
	}
	var size int64
	for _, l := range oi.layers {
		size += l.desc.Size
	}
	p.log.Info("pushing image", "image", img.Name, "ref", ref, "layers", len(oi.layers), "bytes", size)
	if err := remote.Write(tag, pushedImage(ctx, oi), opts...); err != nil {
		reused := slices.ContainsFunc(oi.layers, func(b blob) bool { return b.dir != "" })
		if !reused || ctx.Err() != nil || errors.Is(registryErr(err), errdefs.ErrPermissionDenied) {
			return fmt.Errorf("image push: %s: %w", ref, registryErr(err))
		}
		// A layer written again from its directory by a digest learnt
		// before may differ (its files touched since): write every layer
		// anew, once, and forget what was learnt.
		p.log.Warn("image push failed with layers known from before; writing them anew", "image", img.Name, "err", err)
		p.mu.Lock()
		p.known = map[string]ociDescriptor{}
		p.mu.Unlock()
		known = map[string]ociDescriptor{}
		again, err := os.MkdirTemp(tmp, "again-")
		if err != nil {
			return fmt.Errorf("image push: %w", err)
		}
		if oi, err = buildOCI(ctx, img, p.agent, again, known); err != nil {
			return fmt.Errorf("image push: %s: %w", img.Name, err)
		}
		if err := remote.Write(tag, pushedImage(ctx, oi), opts...); err != nil {
			return fmt.Errorf("image push: %s: %w", ref, registryErr(err))
		}
	}
	p.mu.Lock()
	for k, v := range known {
		p.known[k] = v
	}
	p.saveCache()
	p.mu.Unlock()
	p.log.Info("image pushed", "image", img.Name, "ref", ref, "bytes", size, "took", time.Since(start).Round(time.Millisecond))
	return nil
}

func notFound(err error) bool {
	var te *transport.Error
	return errors.As(err, &te) && te.StatusCode == http.StatusNotFound
}

// registryErr says a refusal of the registry's credentials as such.
func registryErr(err error) error {
	var te *transport.Error
	if errors.As(err, &te) && (te.StatusCode == http.StatusUnauthorized || te.StatusCode == http.StatusForbidden) {
		return fmt.Errorf("the registry refused the credentials (%d): %w", te.StatusCode, errdefs.ErrPermissionDenied)
	}
	return err
}

// pushedImage is oi as go-containerregistry's image: its layers
// uncompressed, as the registry gets them.
func pushedImage(ctx context.Context, oi ociImage) v1.Image {
	img, err := partial.CompressedToImage(&ociCore{ctx: ctx, oi: oi})
	if err != nil {
		panic(err) // CompressedToImage only wraps
	}
	return img
}

type ociCore struct {
	ctx context.Context
	oi  ociImage
}

func (c *ociCore) RawConfigFile() ([]byte, error) { return c.oi.config.data, nil }
func (c *ociCore) MediaType() (types.MediaType, error) {
	return types.MediaType(mediaManifest), nil
}
func (c *ociCore) RawManifest() ([]byte, error) { return c.oi.manifest.data, nil }

func (c *ociCore) LayerByDigest(h v1.Hash) (partial.CompressedLayer, error) {
	if h.String() == c.oi.config.desc.Digest {
		return &ociLayer{ctx: c.ctx, b: c.oi.config}, nil
	}
	for _, l := range c.oi.layers {
		if l.desc.Digest == h.String() {
			return &ociLayer{ctx: c.ctx, b: l}, nil
		}
	}
	return nil, fmt.Errorf("no blob %s in the image", h)
}

type ociLayer struct {
	ctx context.Context
	b   blob
}

func (l *ociLayer) Digest() (v1.Hash, error) { return v1.NewHash(l.b.desc.Digest) }
func (l *ociLayer) Size() (int64, error)     { return l.b.desc.Size, nil }
func (l *ociLayer) MediaType() (types.MediaType, error) {
	return types.MediaType(l.b.desc.MediaType), nil
}

// Compressed gives the blob's bytes (layers are pushed uncompressed): from
// memory, its file, or its directory written again.
func (l *ociLayer) Compressed() (io.ReadCloser, error) {
	switch {
	case l.b.file != "":
		return os.Open(l.b.file)
	case l.b.dir != "":
		pr, pw := io.Pipe()
		go func() {
			var err error
			if bin, ok := strings.CutPrefix(l.b.dir, "agent:"); ok {
				err = writeAgentLayer(bin, pw)
			} else {
				err = writeLayer(l.ctx, l.b.dir, pw)
			}
			pw.CloseWithError(err)
		}()
		return pr, nil
	default:
		return io.NopCloser(strings.NewReader(string(l.b.data))), nil
	}
}

type anonymous struct{}

func (anonymous) Resolve(authn.Resource) (authn.Authenticator, error) { return authn.Anonymous, nil }

// RegistryKeychain is the credentials a push uses: the file at path
// (RegistryConfigKeychain), or, for "", Docker's own configuration
// ($DOCKER_CONFIG or ~/.docker/config.json, with its credential helpers).
func RegistryKeychain(path string) (authn.Keychain, error) {
	if path == "" {
		return authn.DefaultKeychain, nil
	}
	return RegistryConfigKeychain(path)
}

// maxRegistryConfig bounds a registry credentials file.
const maxRegistryConfig = 1 << 20

// RegistryConfigKeychain reads credentials from a file in Docker's
// config.json form ({"auths": {"registry.example.com": {"auth":
// "<base64 user:password>"}}}, or "username" and "password", or
// "identitytoken"); a registry the file does not name is reached
// anonymously.
func RegistryConfigKeychain(path string) (authn.Keychain, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("registry credentials: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxRegistryConfig+1))
	if err != nil {
		return nil, fmt.Errorf("registry credentials: %w", err)
	}
	if len(data) > maxRegistryConfig {
		return nil, fmt.Errorf("registry credentials: %s is larger than %d bytes", path, maxRegistryConfig)
	}
	var cf struct {
		Auths map[string]authn.AuthConfig `json:"auths"`
	}
	if err := json.Unmarshal(data, &cf); err != nil {
		return nil, fmt.Errorf("registry credentials: %s: %w", path, err)
	}
	kc := fileKeychain{}
	for host, a := range cf.Auths {
		host = strings.TrimPrefix(strings.TrimPrefix(host, "https://"), "http://")
		host, _, _ = strings.Cut(host, "/")
		kc[host] = a
	}
	return kc, nil
}

type fileKeychain map[string]authn.AuthConfig

func (k fileKeychain) Resolve(r authn.Resource) (authn.Authenticator, error) {
	if a, ok := k[r.RegistryStr()]; ok {
		return authn.FromConfig(a), nil
	}
	return authn.Anonymous, nil
}
