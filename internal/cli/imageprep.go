package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/sdk/go/paddock"
	"golang.org/x/term"
)

// builtinImages can be built by the daemon on first use; each says what
// its first build takes.
var builtinImages = map[string]string{
	"base":    "Debian's packages are fetched and installed: about a minute",
	"busybox": "a few seconds",
}

// prepareCreate builds, on first use, the built-in image a create will run
// on. A restore runs on its snapshot's image, and a template or pool
// sandbox on the template's, so those build nothing here.
func prepareCreate(ctx context.Context, c *paddock.Client, req api.CreateSandboxRequest, w io.Writer) error {
	if req.FromSnapshot != "" || req.Template != "" || req.Pool != "" {
		return nil
	}
	return prepareImage(ctx, c, req.Image, w)
}

// prepareImage makes sure a built-in image exists before a create, showing
// the build's progress on w: the first use of the Debian base image takes
// about a minute, and a command that sits silent that long looks hung.
func prepareImage(ctx context.Context, c *paddock.Client, name string, w io.Writer) error {
	if name == "" {
		h, err := c.Health(ctx)
		if err != nil {
			return err
		}
		name = h.DefaultImage
	}
	note, ok := builtinImages[name]
	if !ok {
		return nil
	}
	imgs, err := c.Images(ctx)
	if err != nil {
		return err
	}
	for _, i := range imgs {
		if i.Name == name {
			return nil
		}
	}
	fmt.Fprintf(w, "building image %s on first use (%s)...\n", name, note)
	p := newProgressLine(w)
	img, err := c.EnsureImage(ctx, name, func(ev api.BuildEvent) {
		if ev.Type == paddock.BuildProgress || ev.Type == paddock.BuildLog {
			p.update(ev.Message)
		}
	})
	p.done()
	if err != nil {
		return fmt.Errorf("building image %s: %w", name, err)
	}
	fmt.Fprintf(w, "image %s ready: %s\n", name, img.Digest)
	return nil
}

// progressLine shows the latest progress message: rewritten in place on a
// terminal, and at most every few seconds otherwise (logs stay readable).
type progressLine struct {
	w     io.Writer
	tty   bool
	width int
	last  time.Time
	shown bool
}

func newProgressLine(w io.Writer) *progressLine {
	p := &progressLine{w: w, width: 80}
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		p.tty = true
		if cols, _, err := term.GetSize(int(f.Fd())); err == nil && cols > 10 {
			p.width = cols
		}
	}
	return p
}

func (p *progressLine) update(msg string) {
	msg = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, msg)
	if p.tty {
		if len(msg) > p.width-3 {
			msg = msg[:p.width-3]
		}
		fmt.Fprintf(p.w, "\r\033[K  %s", msg)
		p.shown = true
		return
	}
	if time.Since(p.last) >= 5*time.Second {
		p.last = time.Now()
		fmt.Fprintf(p.w, "  %s\n", msg)
	}
}

func (p *progressLine) done() {
	if p.tty && p.shown {
		fmt.Fprint(p.w, "\r\033[K")
	}
}
