package image

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path"
	goruntime "runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/paddock-dev/paddock/internal/errdefs"
)

// AgentPathInImage is where an exported image holds Paddock's agent, the
// same path the local runtimes mount it at.
const AgentPathInImage = "/.paddock/bin/paddock"

// AgentPort is the TCP port an exported image's agent listens on: envd's.
const AgentPort = 49983

// OCIExport says how to write an image as an OCI image layout archive.
type OCIExport struct {
	// Ref names the image in the archive (containerd's and OCI's
	// annotations), e.g. OCIRef("paddock.local", img).
	Ref string
	// AgentBinary is the host path of the static agent binary, added as
	// a layer of its own at AgentPathInImage. The image's entrypoint runs
	// it listening on AgentPort; it needs PADDOCK_AGENT_TOKEN to start.
	AgentBinary string
	// TempDir holds each layer's tar while its digest is computed ("" is
	// the system's).
	TempDir string
}

// OCIRef is the reference an image is exported under: the registry and
// path prefix, the image's name made a valid repository name, and as the
// tag its content digest (32 hex digits) and the agent's (agent, from
// AgentID: 12 hex digits), so a changed image, or the same image with
// another version's agent, never reuses a name: a node or registry
// holding an earlier export never serves it for a newer daemon.
func OCIRef(prefix string, img *Image, agent string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(img.Name) {
		ok := r >= 'a' && r <= 'z' || r >= '0' && r <= '9'
		if ok {
			b.WriteRune(r)
			dash = false
		} else if !dash && b.Len() > 0 {
			b.WriteByte('-')
			dash = true
		}
	}
	repo := strings.Trim(b.String(), "-")
	if repo == "" {
		repo = "image"
	}
	if len(repo) > 64 {
		repo = strings.Trim(repo[:64], "-")
	}
	tag := strings.TrimPrefix(img.Digest, digestPrefix)
	if len(tag) > 32 {
		tag = tag[:32]
	}
	if len(agent) > 12 {
		agent = agent[:12]
	}
	if agent != "" {
		tag += "-" + agent
	}
	return strings.TrimSuffix(prefix, "/") + "/" + repo + ":" + tag
}

// AgentID is the hex SHA-256 of the agent binary at path, which names the
// agent in image references (OCIRef).
func AgentID(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("agent binary: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("agent binary: %w", err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

const (
	mediaLayer    = "application/vnd.oci.image.layer.v1.tar"
	mediaConfig   = "application/vnd.oci.image.config.v1+json"
	mediaManifest = "application/vnd.oci.image.manifest.v1+json"
	mediaIndex    = "application/vnd.oci.image.index.v1+json"
)

type ociDescriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// blob is one content-addressed file of an image: in memory, in a temp
// file, or (dir) a layer's directory, or "agent:" and the agent binary's
// path, to write again (blob.open).
type blob struct {
	desc ociDescriptor
	data []byte
	file string
	dir  string
}

// ExportOCI writes img, plus a layer holding the agent, to w as an OCI
// image layout tar that `ctr images import` and registries' tools read.
// Layers are uncompressed tars in the store's canonical order; overlayfs
// whiteouts become OCI's.
func ExportOCI(ctx context.Context, img *Image, o OCIExport, w io.Writer) error {
	if o.Ref == "" || o.AgentBinary == "" {
		return fmt.Errorf("export %s: a reference and the agent binary are required", img.Name)
	}
	tmp, err := os.MkdirTemp(o.TempDir, "oci-export-")
	if err != nil {
		return fmt.Errorf("export %s: %w", img.Name, err)
	}
	defer os.RemoveAll(tmp)
	oi, err := buildOCI(ctx, img, o.AgentBinary, tmp, nil)
	if err != nil {
		return fmt.Errorf("export %s: %w", img.Name, err)
	}
	md := oi.manifest.desc
	md.Annotations = map[string]string{
		"org.opencontainers.image.ref.name": o.Ref,
		"io.containerd.image.name":          o.Ref,
	}
	index, err := json.Marshal(map[string]any{"schemaVersion": 2, "mediaType": mediaIndex, "manifests": []ociDescriptor{md}})
	if err != nil {
		return err
	}

	tw := tar.NewWriter(w)
	put := func(name string, data []byte) error {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), ModTime: epoch, Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Name: "blobs/sha256/", Mode: 0o755, ModTime: epoch, Typeflag: tar.TypeDir}); err != nil {
		return err
	}
	for _, b := range append(oi.layers, oi.config, oi.manifest) {
		name := "blobs/sha256/" + strings.TrimPrefix(b.desc.Digest, digestPrefix)
		if b.file == "" {
			if err := put(name, b.data); err != nil {
				return err
			}
			continue
		}
		if err := copyBlob(tw, name, b); err != nil {
			return err
		}
	}
	if err := put("oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)); err != nil {
		return err
	}
	if err := put("index.json", index); err != nil {
		return err
	}
	return tw.Close()
}

// ociImage is an image as OCI blobs: its layers (the agent's last), its
// config and its manifest.
type ociImage struct {
	layers           []blob
	config, manifest blob
}

// buildOCI writes img's layers and the agent's as tars into tmp and makes
// its config and manifest. A layer whose descriptor known already has
// (keyed by its directory, or "agent:" and the binary's path) is not
// written: its blob names the directory to walk again when its bytes are
// wanted. Every layer written is added to known when it is not nil.
func buildOCI(ctx context.Context, img *Image, agentBinary, tmp string, known map[string]ociDescriptor) (ociImage, error) {
	var layers []blob
	for i, dir := range img.Layers {
		if d, ok := known[dir]; ok {
			layers = append(layers, blob{desc: d, dir: dir})
			continue
		}
		b, err := layerBlob(ctx, dir, path.Join(tmp, fmt.Sprintf("layer%d", i)))
		if err != nil {
			return ociImage{}, err
		}
		layers = append(layers, b)
	}
	agentKey := "agent:" + agentBinary
	if d, ok := known[agentKey]; ok {
		layers = append(layers, blob{desc: d, dir: agentKey})
	} else {
		ab, err := agentLayer(agentBinary, path.Join(tmp, "agent"))
		if err != nil {
			return ociImage{}, fmt.Errorf("agent layer: %w", err)
		}
		layers = append(layers, ab)
	}

	env := img.Env
	if len(env) == 0 {
		env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	}
	diffIDs := make([]string, len(layers))
	layerDescs := make([]ociDescriptor, len(layers))
	for i, l := range layers {
		diffIDs[i] = l.desc.Digest
		layerDescs[i] = l.desc
	}
	config := map[string]any{
		"architecture": goruntime.GOARCH,
		"os":           "linux",
		"config": map[string]any{
			"Env":        env,
			"Entrypoint": []string{AgentPathInImage, "agent", "--listen", fmt.Sprintf(":%d", AgentPort)},
			"WorkingDir": "/",
			"Labels":     map[string]string{"dev.paddock.image": img.Name, "dev.paddock.digest": img.Digest},
		},
		"rootfs": map[string]any{"type": "layers", "diff_ids": diffIDs},
	}
	cfg := jsonBlob(mediaConfig, config)
	manifest := jsonBlob(mediaManifest, map[string]any{
		"schemaVersion": 2,
		"mediaType":     mediaManifest,
		"config":        cfg.desc,
		"layers":        layerDescs,
	})
	if known != nil {
		for i, l := range layers[:len(img.Layers)] {
			known[img.Layers[i]] = l.desc
		}
		known[agentKey] = layers[len(layers)-1].desc
	}
	return ociImage{layers: layers, config: cfg, manifest: manifest}, nil
}

func jsonBlob(media string, v any) blob {
	data, err := json.Marshal(v)
	if err != nil {
		panic(err) // maps of strings and slices always marshal
	}
	sum := sha256.Sum256(data)
	return blob{desc: ociDescriptor{MediaType: media, Digest: digestPrefix + hex.EncodeToString(sum[:]), Size: int64(len(data))}, data: data}
}

// layerBlob writes dir as an OCI layer tar into file.
func layerBlob(ctx context.Context, dir, file string) (blob, error) {
	return fileBlob(file, func(w io.Writer) error { return writeLayer(ctx, dir, w) })
}

// agentLayer is a layer of the agent binary alone (writeAgentLayer) in
// file.
func agentLayer(bin, file string) (blob, error) {
	return fileBlob(file, func(w io.Writer) error { return writeAgentLayer(bin, w) })
}

// fileBlob writes a layer into file, hashing and counting it.
func fileBlob(file string, write func(io.Writer) error) (blob, error) {
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return blob{}, err
	}
	defer f.Close()
	h := sha256.New()
	cw := &countWriter{w: io.MultiWriter(f, h)}
	if err := write(cw); err != nil {
		return blob{}, err
	}
	if err := f.Close(); err != nil {
		return blob{}, err
	}
	return blob{desc: ociDescriptor{MediaType: mediaLayer, Digest: digestPrefix + hex.EncodeToString(h.Sum(nil)), Size: cw.n}, file: file}, nil
}

// writeLayer writes dir to w as an OCI layer tar, in the store's
// canonical order: the same directory gives the same bytes.
func writeLayer(ctx context.Context, dir string, w io.Writer) error {
	walker := &treeWalker{ctx: ctx, tw: tar.NewWriter(w), links: make(map[fileID]string), buf: make([]byte, 1<<20), oci: true}
	if err := walker.walk(dir, ""); err != nil {
		return err
	}
	return walker.tw.Close()
}

// writeAgentLayer writes a layer of the agent binary alone, root-owned
// and not writable, at AgentPathInImage.
func writeAgentLayer(bin string, w io.Writer) error {
	src, err := os.Open(bin)
	if err != nil {
		return err
	}
	defer src.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(src.Fd()), &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return fmt.Errorf("%s is not a regular file", bin)
	}
	tw := tar.NewWriter(w)
	rel := strings.TrimPrefix(AgentPathInImage, "/")
	for _, d := range []string{path.Dir(path.Dir(rel)), path.Dir(rel)} {
		if err := tw.WriteHeader(&tar.Header{Name: d + "/", Mode: 0o755, ModTime: epoch, Typeflag: tar.TypeDir, Format: tar.FormatPAX}); err != nil {
			return err
		}
	}
	if err := tw.WriteHeader(&tar.Header{Name: rel, Mode: 0o555, Size: st.Size, ModTime: epoch, Typeflag: tar.TypeReg, Format: tar.FormatPAX}); err != nil {
		return err
	}
	if n, err := io.Copy(tw, io.LimitReader(src, st.Size)); err != nil || n != st.Size {
		return fmt.Errorf("copy agent binary: %d of %d bytes: %v", n, st.Size, err)
	}
	return tw.Close()
}

func copyBlob(tw *tar.Writer, name string, b blob) error {
	f, err := os.Open(b.file)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: b.desc.Size, ModTime: epoch, Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	n, err := io.Copy(tw, f)
	if err == nil && n != b.desc.Size {
		err = fmt.Errorf("%s: %d of %d bytes", name, n, b.desc.Size)
	}
	return err
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// ValidateOCIPrefix accepts a registry host (with an optional port) and
// path, in the lower-case characters references allow.
func ValidateOCIPrefix(p string) error {
	if len(p) > 200 {
		return errdefs.Invalid("image prefix is longer than 200 characters")
	}
	host, path, _ := strings.Cut(p, "/")
	if h, port, ok := strings.Cut(host, ":"); ok {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return errdefs.Invalid("image prefix %q: bad registry port", p)
		}
		host = h
	}
	ok := func(s, extra string) bool {
		if s == "" {
			return false
		}
		for _, r := range s {
			if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || strings.ContainsRune(extra, r)) {
				return false
			}
		}
		return true
	}
	if !ok(host, ".-") {
		return errdefs.Invalid("image prefix %q: want a registry host such as registry.example.com:5000, optionally with a path", p)
	}
	if path != "" {
		for _, seg := range strings.Split(path, "/") {
			if !ok(seg, "._-") {
				return errdefs.Invalid("image prefix %q: path segments are lower-case letters, digits, '.', '_' and '-'", p)
			}
		}
	}
	return nil
}
