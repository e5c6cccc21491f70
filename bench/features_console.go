package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/paddock-dev/paddock/api"
)

// ItemConsole measures the web console with consoleSandboxes sandboxes
// listed: what the daemon spends serving the list to the page beside what
// `paddock ls` costs it, and what the page spends showing it beside a bare
// table of the same list, in a headless Chromium.
const ItemConsole = "console"

// consoleSandboxes is how many sandboxes the console lists.
const consoleSandboxes = 500

func (s *Suite) measureConsole(ctx context.Context) ([]Comparison, []Figure) {
	ids := []string{"console-daemon", "console-page", "console-change"}
	titles := []string{
		fmt.Sprintf("Console, daemon side: the %d-sandbox list the page reads vs the one paddock ls reads", consoleSandboxes),
		fmt.Sprintf("Console, page side: %d sandboxes shown by the console vs a bare table (headless Chromium)", consoleSandboxes),
		fmt.Sprintf("Console: a pause seen in the page's %d-row list vs the pause call alone", consoleSandboxes),
	}
	fail := func(err error) ([]Comparison, []Figure) {
		var cs []Comparison
		for i := range ids {
			cs = append(cs, failedComparison(ids[i], titles[i], err, "console"))
		}
		return cs, nil
	}
	if s.o.URL == "" {
		return fail(errors.New("the daemon has no TCP listener"))
	}
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		return fail(errors.New("chromium is not installed (apt-get install chromium)"))
	}
	key, err := s.c.CreateKeyWith(ctx, api.CreateKeyRequest{Name: "paddock-bench-console-" + s.label, Scope: api.KeyScopeAll})
	if err != nil {
		return fail(fmt.Errorf("create key: %w", err))
	}
	defer func() { _ = s.c.DeleteKey(context.WithoutCancel(ctx), key.ID) }()

	// The sandboxes, a few at a time (the daemon starts a caller's creates
	// in turn anyway).
	s.log.Info("console: creating sandboxes", "n", consoleSandboxes)
	var (
		mu   sync.Mutex
		made []string
		werr error
		wg   sync.WaitGroup
		next = make(chan struct{})
	)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range next {
				sb, err := s.create(ctx, "busybox", api.RuntimeRunc)
				mu.Lock()
				if err != nil && werr == nil {
					werr = err
				} else if err == nil {
					made = append(made, sb.ID)
				}
				mu.Unlock()
			}
		}()
	}
	for range consoleSandboxes {
		next <- struct{}{}
	}
	close(next)
	wg.Wait()
	defer func() { s.log.Info("console: sandboxes removed", "how", s.destroyAll(ctx, made)) }()
	if werr != nil {
		return fail(fmt.Errorf("create %d sandboxes: %w", consoleSandboxes, werr))
	}

	get := func(ctx context.Context, path string, untilLine bool) (int, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.o.URL+path, nil)
		if err != nil {
			return 0, err
		}
		req.Header.Set("Authorization", "Bearer "+key.Secret)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return 0, fmt.Errorf("GET %s: %s", path, resp.Status)
		}
		if untilLine {
			line, err := bufio.NewReaderSize(resp.Body, 1<<20).ReadBytes('\n')
			return len(line), err
		}
		n, err := io.Copy(io.Discard, resp.Body)
		return int(n), err
	}
	var listBytes, syncBytes int
	daemon := s.interleaveN(ctx, ItemConsole, []Variant{
		{Name: "GET /v1/events until its sync (the console)", Run: func(ctx context.Context) (time.Duration, error) {
			return Timed(func() (err error) { syncBytes, err = get(ctx, "/v1/events", true); return err })
		}},
		{Name: "GET /v1/sandboxes (paddock ls)", Run: func(ctx context.Context) (time.Duration, error) {
			return Timed(func() (err error) { listBytes, err = get(ctx, "/v1/sandboxes", false); return err })
		}},
	})

	// The browser: one tab signed in with the key (the page takes a key
	// from the address's #key= and drops it from the address).
	// Its profile and its temporary files in a folder of this run's.
	tmp, err := os.MkdirTemp(s.o.WorkDir, "chromium-")
	if err != nil {
		return fail(err)
	}
	defer os.RemoveAll(tmp)
	actx, acancel := chromedp.NewExecAllocator(context.WithoutCancel(ctx), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.WindowSize(1400, 900),
		chromedp.UserDataDir(filepath.Join(tmp, "profile")), chromedp.Env("TMPDIR="+tmp))...)
	defer acancel()
	bctx, bcancel := chromedp.NewContext(actx)
	defer bcancel()
	if err := chromedp.Do(bctx, chromedp.Navigate("about:blank")); err != nil {
		cs := append([]Comparison{NewComparison(ids[0], titles[0], "", daemon)}, failedComparison(ids[1], titles[1], err, "console"), failedComparison(ids[2], titles[2], err, "console"))
		return cs, nil
	}
	rows := fmt.Sprintf(`document.querySelectorAll("#sandbox-list tr[data-sandbox-id]").length >= %d`, consoleSandboxes)
	// Each run loads the page afresh and reports, in the page's own
	// clock, when the list's rows were all there.
	// Interleave's contexts are not the browser's: each call runs on a
	// context of the tab with the same deadline.
	inTab := func(ctx context.Context) (context.Context, context.CancelFunc) {
		dl, ok := ctx.Deadline()
		if !ok {
			dl = time.Now().Add(time.Minute)
		}
		return context.WithDeadline(bctx, dl)
	}
	pageLoad := func(ctx context.Context) (time.Duration, error) {
		ctx, cancel := inTab(ctx)
		defer cancel()
		if err := chromedp.Do(ctx, chromedp.Navigate(s.o.URL+"/?"+strconv.FormatInt(time.Now().UnixNano(), 36)+"#key="+key.Secret)); err != nil {
			return 0, err
		}
		ms, err := chromedp.Run(ctx, chromedp.Poll[float64](`(`+rows+`) && performance.now()`, chromedp.WithPollingInterval(5*time.Millisecond), chromedp.WithPollingTimeout(time.Minute)))
		return time.Duration(ms * float64(time.Millisecond)), err
	}
	// The baseline: in the same page, the same list fetched and written
	// as one bare table, laid out, in the page's clock.
	bare := func(ctx context.Context) (time.Duration, error) {
		ctx, cancel := inTab(ctx)
		defer cancel()
		ms, err := chromedp.Run(ctx, chromedp.Evaluate[float64](`(async () => {
			const t0 = performance.now();
			const r = await fetch("/v1/sandboxes", {headers: {Authorization: "Bearer " + sessionStorage.getItem("paddock.key")}});
			const list = (await r.json()).sandboxes;
			const esc = (v) => String(v).replace(/[&<>"]/g, (c) => "&#" + c.charCodeAt(0) + ";");
			const div = document.createElement("div");
			div.innerHTML = "<table>" + list.map((s) => "<tr><td>" + esc(s.id) + "</td><td>" + esc(s.name || "") + "</td><td>" + esc(s.state) + "</td><td>" + esc(s.image) + "</td><td>" + esc(s.runtime) + "</td><td>" + esc(s.created_at) + "</td></tr>").join("") + "</table>";
			document.body.appendChild(div);
			void document.body.offsetHeight;
			const t = performance.now() - t0;
			div.remove();
			return t;
		})()`, chromedp.EvalAwaitPromise))
		return time.Duration(ms * float64(time.Millisecond)), err
	}
	page := s.interleaveN(ctx, ItemConsole, []Variant{
		{Name: "console: load to all rows shown", Run: pageLoad},
		{Name: "bare table: fetch and lay out", Run: bare},
	})

	// A change made elsewhere, until the page shows it, beside the call.
	target := made[len(made)/2]
	row := `#sandbox-list tr[data-sandbox-id="` + target + `"] .state`
	shows := func(state string) string {
		return `(() => { const n = document.querySelector(` + strconv.Quote(row) + `); return !!n && n.textContent.trim() === ` + strconv.Quote(state) + `; })()`
	}
	change := s.interleaveN(ctx, ItemConsole, []Variant{
		{Name: "pause until the page shows it", Run: func(ctx context.Context) (time.Duration, error) {
			tctx, cancel := inTab(ctx)
			defer cancel()
			d, err := Timed(func() error {
				if _, err := s.c.Pause(ctx, target); err != nil {
					return err
				}
				_, err := chromedp.Run(tctx, chromedp.Poll[bool](shows(api.StatePaused), chromedp.WithPollingInterval(5*time.Millisecond), chromedp.WithPollingTimeout(time.Minute)))
				return err
			})
			if _, rerr := s.c.Resume(context.WithoutCancel(ctx), target); rerr != nil && err == nil {
				err = rerr
			}
			return d, err
		}},
		{Name: "the pause call alone", Run: func(ctx context.Context) (time.Duration, error) {
			d, err := Timed(func() error { _, err := s.c.Pause(ctx, target); return err })
			if _, rerr := s.c.Resume(context.WithoutCancel(ctx), target); rerr != nil && err == nil {
				err = rerr
			}
			return d, err
		}},
	})
	heap, _ := chromedp.Run(bctx, chromedp.Evaluate[float64](`performance.memory ? performance.memory.usedJSHeapSize : 0`))

	note := fmt.Sprintf("%d busybox sandboxes on runc, listed by a key of scope all over the TCP listener. ", consoleSandboxes) +
		"The console reads its list from the event stream's first line (a sync of every sandbox the key sees) and follows changes on the same stream; it never polls the list."
	cs := []Comparison{
		NewComparison(ids[0], titles[0], note, daemon),
		NewComparison(ids[1], titles[1], "Timed in the page's own clock: from navigation to the moment all rows are in the list (script load, sign-in check, the event stream's sync, rendering), against fetching the same list and laying it out as one bare table of six columns without any of the console's code.", page),
		NewComparison(ids[2], titles[2], "The pause is made through the API (the Go SDK on the socket) while the page shows the list; the first figure ends when the row says paused.", change),
	}
	figs := []Figure{
		{ID: "console-sync-bytes", Name: "the event stream's sync line", Value: float64(syncBytes), Unit: "bytes", Baseline: "GET /v1/sandboxes body", BaseVal: float64(listBytes), Ratio: Ratio(float64(syncBytes), float64(listBytes))},
		{ID: "console-heap", Name: fmt.Sprintf("the page's JavaScript heap with %d sandboxes listed", consoleSandboxes), Value: heap / (1 << 20), Unit: "MiB"},
	}
	return cs, figs
}
