package bench

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/image/imagetest"
	"github.com/paddock-dev/paddock/sdk/go/paddock"
)

// ItemImages measures a template rebuild with every step cached, and image
// import throughput.
const ItemImages = "images"

// importLayerBytes is the random payload of each imported image: random,
// so no import is served by a layer an earlier one stored.
const importLayerBytes = 32 << 20

// measureImages: a template rebuild with all steps cached against the
// floor of one API round trip (GET of the same template), and docker-archive
// import throughput against extracting the same layer with tar on the host.
func (s *Suite) measureImages(ctx context.Context) ([]Comparison, []Figure) {
	const id, title = "template-rebuild-cached", "Template rebuild, every step cached, vs one API round trip (busybox, 3 steps)"
	names := []string{"template build (cached)", "GET template"}
	name := benchTemplate + "-cache"
	spec := api.TemplateSpec{Name: name, Image: "busybox", Runtime: api.RuntimeRunc, Steps: []api.TemplateStep{
		{Kind: "run", Run: "echo one > /home/user/one"},
		{Kind: "env", Env: map[string]string{"BENCH": "1"}},
		{Kind: "run", Run: "echo two > /home/user/two"},
	}}
	var comps []Comparison
	if _, err := s.c.BuildTemplate(ctx, spec, "", nil); err != nil {
		comps = append(comps, failedComparison(id, title, fmt.Errorf("first build: %w", err), names...))
	} else {
		series := s.interleaveCount(ctx, 10, []Variant{
			{Name: names[0], Run: func(ctx context.Context) (time.Duration, error) {
				return Timed(func() error { _, err := s.c.BuildTemplate(ctx, spec, "", nil); return err })
			}},
			{Name: names[1], Run: func(ctx context.Context) (time.Duration, error) {
				return Timed(func() error { _, err := s.c.Template(ctx, name); return err })
			}},
		})
		comps = append(comps, NewComparison(id, title, "The rebuild hashes each step, finds it cached, and records the template again; the baseline is the cheapest call that reaches the same record.", series))
	}
	if err := s.c.DeleteTemplate(context.WithoutCancel(ctx), name); err != nil && !errors.Is(err, paddock.ErrNotFound) {
		s.log.Error("delete template", "err", err)
	}
	return comps, []Figure{s.importThroughput(ctx)}
}

// importThroughput imports three docker archives of fresh random content
// and reports MiB/s of layer content, beside `tar -x` of the same layer.
func (s *Suite) importThroughput(ctx context.Context) Figure {
	fig := Figure{ID: "image-import", Name: "Image import throughput (docker-archive, 32 MiB random layer)", Unit: "MiB/s",
		Baseline: "tar -x of the same layer on the host"}
	dir, err := os.MkdirTemp("", "paddock-bench-import-")
	if err != nil {
		fig.Error = err.Error()
		return fig
	}
	defer os.RemoveAll(dir)
	var importTime, tarTime time.Duration
	const rounds = 3
	for i := 0; i < rounds; i++ {
		payload := make([]byte, importLayerBytes)
		_, _ = rand.Read(payload)
		layer := imagetest.Tar(imagetest.File("data/payload.bin", string(payload)))
		img, err := imagetest.Image(v1.Config{Env: []string{"BENCH=1"}}, layer)
		if err != nil {
			fig.Error = err.Error()
			return fig
		}
		archive := filepath.Join(dir, fmt.Sprintf("img%d.tar", i))
		if err := imagetest.WriteDockerArchive(archive, fmt.Sprintf("bench/import:%d", i), img); err != nil {
			fig.Error = err.Error()
			return fig
		}
		f, err := os.Open(archive)
		if err != nil {
			fig.Error = err.Error()
			return fig
		}
		var imported *api.Image
		d, err := Timed(func() error {
			var ierr error
			imported, ierr = s.c.ImportImage(ctx, f, fmt.Sprintf("bench/import:%d", i))
			return ierr
		})
		f.Close()
		if err != nil {
			fig.Error = err.Error()
			return fig
		}
		importTime += d
		if imported != nil {
			if _, err := s.c.RemoveImage(context.WithoutCancel(ctx), imported.Digest, true); err != nil {
				s.log.Warn("remove imported image", "err", err)
			}
		}
		out := filepath.Join(dir, fmt.Sprintf("x%d", i))
		if err := os.Mkdir(out, 0o755); err != nil {
			fig.Error = err.Error()
			return fig
		}
		d, err = Timed(func() error {
			cmd := exec.CommandContext(ctx, "tar", "-x", "-C", out)
			cmd.Stdin = bytes.NewReader(layer)
			return cmd.Run()
		})
		if err != nil {
			fig.Error = "tar -x: " + err.Error()
			return fig
		}
		tarTime += d
	}
	mib := float64(rounds*importLayerBytes) / (1 << 20)
	fig.Value = mib / importTime.Seconds()
	fig.BaseVal = mib / tarTime.Seconds()
	fig.Ratio = Ratio(fig.Value, fig.BaseVal)
	fig.Note = "Import verifies the layer's digests while extracting it into its own content-addressed directory; the baseline only extracts."
	return fig
}
