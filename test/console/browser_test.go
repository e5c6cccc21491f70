package console

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/input"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// chromium is the browser the tests drive; CI installs Debian's.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("needs chromium (apt-get install chromium)")
	return ""
}

// browser is one headless Chromium with one tab. Every uncaught script
// error and every console error (a CSP refusal is one) is kept, for the
// test to fail on.
type browser struct {
	t   *testing.T
	ctx context.Context
	mu  sync.Mutex
	// errs is what the page reported.
	errs []string
	// downloads is where the browser saves what the page downloads.
	downloads string
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)),
		chromedp.NoSandbox, // the tests run as root
		chromedp.DisableGPU,
		chromedp.WindowSize(1400, 900),
		chromedp.UserDataDir(t.TempDir()),
		// Chromium puts its singleton socket under $TMPDIR: keep it in
		// the test's own directory, removed with it.
		chromedp.Env("TMPDIR="+t.TempDir()),
	)
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); acancel() })
	b := &browser{t: t, ctx: ctx, downloads: t.TempDir()}
	dialogs := make(chan struct{}, 16)
	err := chromedp.Listen(ctx, func(ev any) {
		switch ev := ev.(type) {
		case *runtime.EventExceptionThrown:
			b.report("exception: " + (&chromedp.ExceptionError{ExceptionDetails: ev.ExceptionDetails}).Error())
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.ConsoleAPICalledTypeError {
				var parts []string
				for _, a := range ev.Args {
					parts = append(parts, string(a.Value)+a.Description)
				}
				b.report("console.error: " + strings.Join(parts, " "))
			}
		case *cdplog.EventEntryAdded:
			// The browser's own reports, a CSP refusal among them; an
			// answer's error status (the wrong key's 401) is the page's
			// to show, not an error of the page.
			if ev.Entry.Level == cdplog.EntryLevelError && ev.Entry.Source != cdplog.EntrySourceNetwork {
				b.report("log: " + ev.Entry.Text + " " + ev.Entry.URL)
			}
		case *page.EventJavascriptDialogOpening:
			select {
			case dialogs <- struct{}{}:
			default:
			}
		}
	})
	if err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	// rm asks to confirm: say yes (not from the listener, which must not
	// call the browser).
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-dialogs:
				_, _ = chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true})
			}
		}
	}()
	if _, err := chromedp.Call(ctx, cdplog.Enable, cdp.Empty{}); err != nil {
		t.Fatalf("chromium's log: %v", err)
	}
	if _, err := chromedp.Call(ctx, cdpbrowser.SetDownloadBehavior, cdpbrowser.SetDownloadBehaviorParams{
		Behavior: cdpbrowser.SetDownloadBehaviorBehaviorAllow, DownloadPath: b.downloads,
	}); err != nil {
		t.Fatalf("set chromium's downloads: %v", err)
	}
	return b
}

func (b *browser) report(s string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.errs = append(b.errs, s)
}

// errors returns what the page reported.
func (b *browser) errors() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.errs...)
}

// run runs actions with a deadline; on failure it says what the page
// showed.
func (b *browser) run(what string, d time.Duration, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, d)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.t.Fatalf("%s: %v\n%s", what, err, b.state())
	}
}

// state is the page's address, text and reported errors, for a failure.
func (b *browser) state() string {
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	text, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href + "\n" + (document.body ? document.body.innerText : "")`))
	// PADDOCK_CONSOLE_FAILSHOT names a file for a screenshot of the page
	// at a failure, to see what the text does not say.
	if f := os.Getenv("PADDOCK_CONSOLE_FAILSHOT"); f != "" {
		if shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(90)); err == nil {
			_ = os.WriteFile(f, shot, 0o644)
		}
	}
	return fmt.Sprintf("page: %.3000s\npage errors: %v", text, b.errors())
}

// text is the text of the first node sel matches.
func (b *browser) text(sel string) string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.TextContent(chromedp.CSS(sel)))
	if err != nil {
		b.t.Fatalf("read %s: %v\n%s", sel, err, b.state())
	}
	return s
}

// poll waits until the expression is true.
func (b *browser) poll(what, expr string, d time.Duration) {
	b.t.Helper()
	b.run(what, d+5*time.Second, func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		_, err := chromedp.Poll[bool](expr, chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(d))(ctx, t)
		return chromedp.Void{}, err
	})
}

// waitText waits until the first node sel matches has a text containing want.
func (b *browser) waitText(what, sel, want string, d time.Duration) {
	b.t.Helper()
	b.poll(what, `(() => { const n = document.querySelector(`+jsString(sel)+`); return !!n && n.textContent.includes(`+jsString(want)+`); })()`, d)
}

// waitGone waits until nothing matches sel.
func (b *browser) waitGone(what, sel string, d time.Duration) {
	b.t.Helper()
	b.poll(what, `document.querySelector(`+jsString(sel)+`) === null`, d)
}

// eval runs a script and returns its string value.
func (b *browser) eval(script string) string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](script))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v\n%s", script, err, b.state())
	}
	return s
}

// shot saves a screenshot of the page as name.png in
// $PADDOCK_CONSOLE_SCREENSHOTS, when that is set (docs/console.md's
// pictures come from there); otherwise it does nothing.
func (b *browser) shot(name string) {
	b.t.Helper()
	dir := os.Getenv("PADDOCK_CONSOLE_SCREENSHOTS")
	if dir == "" {
		return
	}
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	time.Sleep(300 * time.Millisecond) // let the last frame paint
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// setValue sets an input's value as a script would and says so with an
// input event.
func setValue(sel, v string) chromedp.Action[chromedp.Void] {
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		_, err := chromedp.Evaluate[bool](`(() => { const n = document.querySelector(`+jsString(sel)+`); n.value = `+jsString(v)+`; n.dispatchEvent(new Event("input", {bubbles: true})); return true; })()`)(ctx, t)
		return chromedp.Void{}, err
	}
}

// typeKeys focuses sel and types text one key at a time, each a keyDown
// carrying its text and a keyUp, as a keyboard does ("\r" is Enter).
// chromedp's SendKeys adds a char event to each key, which a terminal
// (xterm.js) takes as a second keystroke.
func typeKeys(sel, text string) chromedp.Action[chromedp.Void] {
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		if _, err := chromedp.Focus(chromedp.CSS(sel))(ctx, t); err != nil {
			return chromedp.Void{}, err
		}
		for _, r := range text {
			down := input.DispatchKeyEventParams{Type: input.DispatchKeyEventTypeKeyDown, Text: string(r), Key: string(r)}
			if r == '\r' {
				down.Key, down.Code, down.WindowsVirtualKeyCode = "Enter", "Enter", 13
			}
			if _, err := cdp.Call(ctx, t, input.DispatchKeyEvent, down); err != nil {
				return chromedp.Void{}, err
			}
			up := input.DispatchKeyEventParams{Type: input.DispatchKeyEventTypeKeyUp, Key: down.Key, Code: down.Code, WindowsVirtualKeyCode: down.WindowsVirtualKeyCode}
			if _, err := cdp.Call(ctx, t, input.DispatchKeyEvent, up); err != nil {
				return chromedp.Void{}, err
			}
		}
		return chromedp.Void{}, nil
	}
}

func jsString(s string) string {
	var buf bytes.Buffer
	buf.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			buf.WriteByte('\\')
			buf.WriteRune(r)
		case r < 0x20:
			buf.WriteString(`\u00`)
			buf.WriteByte("0123456789abcdef"[r>>4])
			buf.WriteByte("0123456789abcdef"[r&15])
		default:
			buf.WriteRune(r)
		}
	}
	buf.WriteByte('"')
	return buf.String()
}

// recorder is a reverse proxy between the browser and the daemon that
// keeps every request the page makes and every answer it gets (streams
// included, as far as they were read), so a test can say what the page
// was told.
type recorder struct {
	srv *httptest.Server
	mu  sync.Mutex
	log bytes.Buffer // request lines and answer bodies, as sent
	n   int          // requests
}

func newRecorder(t *testing.T, daemon string) *recorder {
	t.Helper()
	target, err := url.Parse("http://" + daemon)
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Host = pr.In.Host // the daemon checks a WebSocket's Origin against it
		},
		FlushInterval: -1,
	}
	rec.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec.mu.Lock()
		rec.n++
		rec.log.WriteString("\n>> " + r.Method + " " + r.URL.String() + "\n")
		rec.mu.Unlock()
		rp.ServeHTTP(&teeWriter{ResponseWriter: w, rec: rec}, r)
	}))
	t.Cleanup(rec.srv.Close)
	return rec
}

func (r *recorder) seen() (string, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.log.String(), r.n
}

type teeWriter struct {
	http.ResponseWriter
	rec *recorder
}

func (w *teeWriter) Write(p []byte) (int, error) {
	w.rec.mu.Lock()
	w.rec.log.Write(p)
	w.rec.mu.Unlock()
	return w.ResponseWriter.Write(p)
}

func (w *teeWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *teeWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// readAll reads a file the browser downloaded, once it is complete.
func waitFile(t *testing.T, path string, d time.Duration) []byte {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		if b, err := os.ReadFile(path); err == nil {
			return b
		}
		if time.Now().After(deadline) {
			entries, _ := os.ReadDir(path[:strings.LastIndex(path, "/")])
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
			}
			t.Fatalf("no download at %s after %s (the folder has %v)", path, d, names)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func httpGet(u string) (int, error) {
	resp, err := http.Get(u)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}
