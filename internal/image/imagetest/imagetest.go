// Package imagetest builds small OCI images in tests: layer tars entry by
// entry (so hostile ones can be made on purpose), docker archives and OCI
// layout tarballs.
package imagetest

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"path/filepath"
	goruntime "runtime"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Entry is one tar entry; Body is the content of a regular file.
type Entry struct {
	Name     string
	Type     byte // tar.TypeReg when zero
	Body     string
	Mode     int64
	Linkname string
	Devmajor int64
	Devminor int64
}

// File, Dir and Symlink are shorthands for common entries.
func File(name, body string) Entry { return Entry{Name: name, Body: body, Mode: 0o644} }

// Dir is a directory entry.
func Dir(name string) Entry { return Entry{Name: name, Type: tar.TypeDir, Mode: 0o755} }

// Symlink is a symbolic link entry.
func Symlink(name, target string) Entry {
	return Entry{Name: name, Type: tar.TypeSymlink, Linkname: target, Mode: 0o777}
}

// Tar returns a tar stream of entries in order.
func Tar(entries ...Entry) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		typ := e.Type
		if typ == 0 {
			typ = tar.TypeReg
		}
		h := &tar.Header{
			Name: e.Name, Typeflag: typ, Mode: e.Mode, Linkname: e.Linkname,
			Devmajor: e.Devmajor, Devminor: e.Devminor, ModTime: time.Unix(1700000000, 0), Format: tar.FormatPAX,
		}
		if typ == tar.TypeReg {
			h.Size = int64(len(e.Body))
		}
		if err := tw.WriteHeader(h); err != nil {
			panic(err)
		}
		if typ == tar.TypeReg {
			if _, err := tw.Write([]byte(e.Body)); err != nil {
				panic(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		panic(err)
	}
	return buf.Bytes()
}

// Image stacks layer tars (lowest first) with the given config.
func Image(cfg v1.Config, layers ...[]byte) (v1.Image, error) {
	img := empty.Image
	for _, l := range layers {
		data := l
		layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil })
		if err != nil {
			return nil, err
		}
		if img, err = mutate.AppendLayers(img, layer); err != nil {
			return nil, err
		}
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Config = "linux", goruntime.GOARCH, cfg
	return mutate.ConfigFile(img, cf)
}

// BusyboxLayer is a layer with the static busybox at /bin/busybox and /bin/sh.
func BusyboxLayer(busybox string) ([]byte, error) {
	data, err := os.ReadFile(busybox)
	if err != nil {
		return nil, err
	}
	return Tar(
		Dir("bin"), Entry{Name: "bin/busybox", Body: string(data), Mode: 0o755},
		Symlink("bin/sh", "busybox"), Symlink("bin/cat", "busybox"), Symlink("bin/ls", "busybox"),
		Symlink("bin/env", "busybox"), Symlink("bin/id", "busybox"), Symlink("bin/pwd", "busybox"),
		Dir("tmp"), Dir("etc"), File("etc/passwd", "root:x:0:0:root:/root:/bin/sh\n"),
	), nil
}

// WriteDockerArchive writes img as `docker save` would, tagged tag.
func WriteDockerArchive(path, tag string, img v1.Image) error {
	t, err := name.NewTag(tag)
	if err != nil {
		return err
	}
	return tarball.WriteToFile(path, t, img)
}

// DockerArchive returns img as `docker save` would write it, tagged tag.
func DockerArchive(tag string, img v1.Image) ([]byte, error) {
	t, err := name.NewTag(tag)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := tarball.Write(t, img, &buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// WriteOCIArchive writes img as an OCI layout and tars it up at path.
func WriteOCIArchive(path string, img v1.Image) error {
	dir, err := os.MkdirTemp(filepath.Dir(path), "layout-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	if err := p.AppendImage(img); err != nil {
		return err
	}
	return tarDir(dir, path)
}

func tarDir(dir, out string) error {
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	err = filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		h, err := tar.FileInfoHeader(info, "")
		if err != nil {
			return err
		}
		h.Name = filepath.ToSlash(rel)
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if info.Mode().IsRegular() {
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			_, err = tw.Write(data)
			return err
		}
		return nil
	})
	if err != nil {
		return err
	}
	return tw.Close()
}
