package cluster

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"
)

// Images the cluster's containerd holds from its start. There is no registry
// here, so pods name them with imagePullPolicy: Never.
const (
	// BusyboxImage is a shell image: the host's static busybox with a link
	// per applet.
	BusyboxImage = "docker.io/paddock-test/busybox:1"
	// PauseImage is the pod sandbox image: the same busybox, whose
	// entrypoint waits for a signal.
	PauseImage = "docker.io/paddock-test/pause:1"
)

// pauseScript keeps the sandbox's PID 1 alive and exits on TERM or INT,
// which is all the pod sandbox container has to do.
const pauseScript = `trap "exit 0" TERM INT; while :; do sleep 3600 & wait $!; done`

// writeTestImages writes an OCI image layout tar holding BusyboxImage and
// PauseImage, both made of one uncompressed layer built from the host's
// static busybox at busyboxPath.
func writeTestImages(path, busyboxPath string) error {
	layer, err := busyboxLayer(busyboxPath)
	if err != nil {
		return err
	}
	return writeLayout(path, layer, []imageDef{
		{name: BusyboxImage, env: []string{"PATH=/bin"}, cmd: []string{"sh"}},
		{name: PauseImage, env: []string{"PATH=/bin"}, entrypoint: []string{"/bin/sh", "-c", pauseScript}},
	})
}

// WriteBinaryImage writes an OCI image layout tar holding the image name:
// one layer with the executable at bin as /<base name of bin>, which is its
// entrypoint, as deploy/kubernetes/Dockerfile makes the daemon's image.
func WriteBinaryImage(path, name, bin string) error {
	b, err := os.ReadFile(bin)
	if err != nil {
		return err
	}
	base := filepath.Base(bin)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: base, Mode: 0o755, Size: int64(len(b)), ModTime: time.Unix(0, 0)}); err != nil {
		return err
	}
	if _, err := tw.Write(b); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return writeLayout(path, buf.Bytes(), []imageDef{{name: name, entrypoint: []string{"/" + base}}})
}

// imageDef is one image of a layout writeLayout writes.
type imageDef struct {
	name            string
	env             []string
	entrypoint, cmd []string
}

// writeLayout writes an OCI image layout tar whose images are each the one
// uncompressed layer with its own configuration.
func writeLayout(path string, layer []byte, imgs []imageDef) error {
	blobs := map[string][]byte{}
	add := func(b []byte) string {
		d := fmt.Sprintf("sha256:%x", sha256.Sum256(b))
		blobs[d] = b
		return d
	}
	layerDigest := add(layer)

	type descriptor struct {
		MediaType   string            `json:"mediaType"`
		Digest      string            `json:"digest"`
		Size        int64             `json:"size"`
		Annotations map[string]string `json:"annotations,omitempty"`
		Platform    map[string]string `json:"platform,omitempty"`
	}
	var manifests []descriptor
	for _, img := range imgs {
		cfg, err := json.Marshal(map[string]any{
			"architecture": runtime.GOARCH,
			"os":           "linux",
			"created":      time.Unix(0, 0).UTC(),
			"config": map[string]any{
				"Env":        img.env,
				"Entrypoint": img.entrypoint,
				"Cmd":        img.cmd,
			},
			"rootfs": map[string]any{"type": "layers", "diff_ids": []string{layerDigest}},
		})
		if err != nil {
			return err
		}
		cfgDigest := add(cfg)
		man, err := json.Marshal(map[string]any{
			"schemaVersion": 2,
			"mediaType":     "application/vnd.oci.image.manifest.v1+json",
			"config":        descriptor{MediaType: "application/vnd.oci.image.config.v1+json", Digest: cfgDigest, Size: int64(len(cfg))},
			"layers":        []descriptor{{MediaType: "application/vnd.oci.image.layer.v1.tar", Digest: layerDigest, Size: int64(len(layer))}},
		})
		if err != nil {
			return err
		}
		manifests = append(manifests, descriptor{
			MediaType: "application/vnd.oci.image.manifest.v1+json",
			Digest:    add(man),
			Size:      int64(len(man)),
			Annotations: map[string]string{
				"io.containerd.image.name":          img.name,
				"org.opencontainers.image.ref.name": img.name[strings.LastIndex(img.name, ":")+1:],
			},
			Platform: map[string]string{"architecture": runtime.GOARCH, "os": "linux"},
		})
	}
	index, err := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.index.v1+json",
		"manifests":     manifests,
	})
	if err != nil {
		return err
	}

	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	files := map[string][]byte{
		"oci-layout": []byte(`{"imageLayoutVersion":"1.0.0"}`),
		"index.json": index,
	}
	for d, b := range blobs {
		files["blobs/sha256/"+strings.TrimPrefix(d, "sha256:")] = b
	}
	if err := writeTar(tw, files, nil); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return f.Close()
}

// busyboxLayer is a layer tar with /bin/busybox, a link per applet it lists,
// and the directories a container's mounts need.
func busyboxLayer(busyboxPath string) ([]byte, error) {
	bin, err := os.ReadFile(busyboxPath)
	if err != nil {
		return nil, fmt.Errorf("read busybox: %w", err)
	}
	out, err := exec.Command(busyboxPath, "--list").Output()
	if err != nil {
		return nil, fmt.Errorf("busybox --list: %w", err)
	}
	links := map[string]string{}
	for _, a := range strings.Fields(string(out)) {
		if a != "busybox" && !strings.Contains(a, "/") {
			links["bin/"+a] = "busybox"
		}
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, d := range []string{"bin/", "dev/", "etc/", "proc/", "sys/", "tmp/", "root/"} {
		mode := int64(0o755)
		if d == "tmp/" {
			mode = 0o1777
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d, Mode: mode, ModTime: time.Unix(0, 0)}); err != nil {
			return nil, err
		}
	}
	files := map[string][]byte{
		"bin/busybox": bin,
		"etc/passwd":  []byte("root:x:0:0:root:/root:/bin/sh\n"),
		"etc/group":   []byte("root:x:0:\n"),
	}
	if err := writeTar(tw, files, links); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// writeTar writes files and symlinks in name order, so the same input makes
// the same bytes and digests.
func writeTar(tw *tar.Writer, files map[string][]byte, links map[string]string) error {
	var names []string
	for n := range files {
		names = append(names, n)
	}
	for n := range links {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if target, ok := links[n]; ok {
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: n, Linkname: target, Mode: 0o777, ModTime: time.Unix(0, 0)}); err != nil {
				return err
			}
			continue
		}
		b := files[n]
		mode := int64(0o644)
		if n == "bin/busybox" {
			mode = 0o755
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: n, Mode: mode, Size: int64(len(b)), ModTime: time.Unix(0, 0)}); err != nil {
			return err
		}
		if _, err := io.Copy(tw, bytes.NewReader(b)); err != nil {
			return err
		}
	}
	return nil
}
