// Package image is Paddock's image store: content-addressed, read-only root
// filesystem layers, and the builders that make them (busybox from
// busybox-static, base from Debian packages with mmdebstrap).
package image

import "time"

// Image is one stored image.
type Image struct {
	Name      string   // "base", "busybox", "code-interpreter"
	Digest    string   // "sha256:<hex>" of the layer's canonical tar
	Layers    []string // host dirs, lowest first, read-only
	SizeBytes int64
	CreatedAt time.Time

	// Set for imported and pulled images (oci.go): where the image came
	// from, and its config, which sandboxes start with.
	Source     string
	Env        []string
	WorkingDir string
	User       string
	Entrypoint []string
	Cmd        []string
	// Owner is the caller that imported or pulled the image first ("" for
	// built-in images and images recorded before importers were).
	Owner string
}

// Progress receives human-readable progress lines during a build.
type Progress func(line string)
