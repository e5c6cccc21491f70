package api

// ImageConfig is what an imported or pulled image's config says about how
// to run it. Sandboxes start with Env; the rest is recorded for callers.
type ImageConfig struct {
	Env        []string `json:"env,omitempty"`
	WorkingDir string   `json:"working_dir,omitempty"`
	User       string   `json:"user,omitempty"`
	Entrypoint []string `json:"entrypoint,omitempty"`
	Cmd        []string `json:"cmd,omitempty"`
}

// PullImageRequest is the body of POST /v1/images/pull.
type PullImageRequest struct {
	// Ref is an OCI reference: registry/repository:tag or @sha256:...
	Ref string `json:"ref"`
}

// ImageGCResult is what a layer collection removed.
type ImageGCResult struct {
	RemovedLayers []string `json:"removed_layers"`
	FreedBytes    int64    `json:"freed_bytes"`
}

// RemoveImageResult is the body of DELETE /v1/images/{ref}.
type RemoveImageResult struct {
	Image Image          `json:"image"`
	GC    *ImageGCResult `json:"gc,omitempty"` // set when ?gc=true
}
