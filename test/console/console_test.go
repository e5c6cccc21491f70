package console

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/testdaemon"
	"github.com/paddock-dev/paddock/sdk/go/paddock"
)

// TestConsoleInABrowser signs in with a key of scope own and does what a
// user does: creates a sandbox, types in its terminal, uploads and
// downloads a file, watches the list follow a state change and removes
// the sandbox, while another key's sandbox never reaches the page.
func TestConsoleInABrowser(t *testing.T) {
	d := testdaemon.Start(t, testdaemon.Options{Listen: true})
	ctx := testdaemon.Ctx(t, 10*time.Minute)
	keyA, err := d.Client.CreateKey(ctx, testdaemon.UniqueName("console-a"))
	if err != nil {
		t.Fatal(err)
	}
	keyB, err := d.Client.CreateKey(ctx, testdaemon.UniqueName("console-b"))
	if err != nil {
		t.Fatal(err)
	}
	asA := &paddock.Client{URL: "http://" + d.Listen, APIKey: keyA.Secret}
	asB := &paddock.Client{URL: "http://" + d.Listen, APIKey: keyB.Secret}
	theirs := testdaemon.Create(t, asB, api.CreateSandboxRequest{Image: "busybox", Name: "theirs-" + testdaemon.UniqueName("b")})

	rec := newRecorder(t, d.Listen)
	b := newBrowser(t)

	// Sign-in: a wrong key is refused in the page, the right one lists.
	b.run("open the console", time.Minute,
		chromedp.Navigate(rec.srv.URL+"/"),
		chromedp.WaitVisible(chromedp.CSS("#signin-key")),
		chromedp.SendKeys(chromedp.CSS("#signin-key"), "pdk_not-a-key"),
		chromedp.Click(chromedp.CSS("#signin-submit")),
		chromedp.WaitVisible(chromedp.CSS("#signin-error")),
	)
	b.run("sign in", time.Minute,
		setValue("#signin-key", ""),
		chromedp.SendKeys(chromedp.CSS("#signin-key"), keyA.Secret),
		chromedp.Click(chromedp.CSS("#signin-submit")),
		chromedp.WaitVisible(chromedp.CSS("#sandbox-list")),
	)
	b.waitText("the empty list counts 0", "#sandbox-count", "0", 30*time.Second)

	// Create from the page: it opens the sandbox's own page.
	name := "mine-" + testdaemon.UniqueName("a")
	b.run("create a sandbox", 3*time.Minute,
		chromedp.Click(chromedp.CSS("#create-open")),
		chromedp.WaitVisible(chromedp.CSS("#create-form")),
		chromedp.SendKeys(chromedp.CSS(`#create-form [name="image"]`), "busybox"),
		chromedp.SendKeys(chromedp.CSS(`#create-form [name="name"]`), name),
		chromedp.Click(chromedp.CSS("#create-submit")),
		chromedp.WaitVisible(chromedp.CSS("#sandbox-state")),
	)
	b.waitText("the new sandbox runs", "#sandbox-state", api.StateRunning, 3*time.Minute)
	loc := b.eval(`location.hash`)
	id := strings.TrimPrefix(loc, "#/sandbox/")
	sb, err := asA.Get(ctx, id)
	if err != nil || sb.Name != name || sb.Image != "busybox" {
		t.Fatalf("the page opened %q: %+v, %v; want the sandbox %s it made", loc, sb, err, name)
	}

	// The terminal: keys typed in the page run in the sandbox.
	b.run("open the terminal", time.Minute,
		chromedp.Click(chromedp.CSS("#tab-terminal")),
		chromedp.WaitVisible(chromedp.CSS("#terminal .xterm-rows")),
	)
	b.waitText("the terminal connects", "#terminal-status", "connected", time.Minute)
	b.run("type in the terminal", time.Minute,
		chromedp.Click(chromedp.CSS("#terminal .xterm-screen")),
		typeKeys("#terminal textarea", "echo console-$((6*7)) > /tmp/typed; cat /tmp/typed\r"),
	)
	b.waitText("the command's output shows", "#terminal .xterm-rows", "console-42", time.Minute)
	b.shot("terminal")

	// Resizing the window resizes the terminal: the shell sees its new
	// size. Reattaching reaches the same terminal, with its output.
	sttySize := func(marker string) string {
		b.run("ask the terminal's size", time.Minute, typeKeys("#terminal textarea", `echo `+marker+`=$(stty size)`+"\r"))
		re := `new RegExp(` + jsString(marker+`=(\d+ \d+)`) + `)`
		b.poll("the size shows", `(() => { const m = document.querySelector("#terminal .xterm-rows").textContent.match(`+re+`); return !!m; })()`, time.Minute)
		return b.eval(`document.querySelector("#terminal .xterm-rows").textContent.match(` + re + `)[1]`)
	}
	before := sttySize("SZA")
	b.run("shrink the window", time.Minute, chromedp.EmulateViewport(900, 500))
	var after string
	for range 50 {
		if after = sttySize("SZB"); after != before {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if after == before {
		t.Errorf("the terminal's size stayed %q after the window shrank", before)
	}
	termID := strings.TrimSpace(strings.TrimPrefix(b.text("#terminal-detail"), "terminal"))
	b.run("reattach", time.Minute, chromedp.Click(chromedp.CSS("#terminal-reattach")))
	b.waitText("reattached", "#terminal-status", "connected", time.Minute)
	// The rows show the screen, not the scrollback: the last output is there.
	b.waitText("the same terminal's output is replayed", "#terminal .xterm-rows", "SZB="+after, time.Minute)
	if termID == "" {
		t.Fatal("the page named no terminal")
	}
	b.waitText("reattached to the same terminal", "#terminal-detail", "terminal "+termID, time.Minute)
	b.run("restore the window", time.Minute, chromedp.EmulateViewport(1400, 900))
	var typed bytes.Buffer
	if err := asA.ReadFile(ctx, id, "/tmp/typed", &typed); err != nil || typed.String() != "console-42\n" {
		t.Errorf("the file the terminal wrote: %q, %v", typed.String(), err)
	}

	// Files: upload from the browser, then download.
	upload := filepath.Join(t.TempDir(), "upload.txt")
	content := "uploaded through the console\n" + strings.Repeat("x", 70000) + "\n"
	if err := os.WriteFile(upload, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	b.run("browse /tmp", time.Minute,
		chromedp.Click(chromedp.CSS("#tab-files")),
		chromedp.WaitVisible(chromedp.CSS("#files-path")),
		setValue("#files-path", ""),
		chromedp.SendKeys(chromedp.CSS("#files-path"), "/tmp\r"),
		chromedp.WaitVisible(chromedp.CSS(`#files-list tr[data-name="typed"]`)),
	)
	b.run("upload a file", time.Minute,
		chromedp.SetUploadFiles(chromedp.CSS("#files-upload"), []string{upload}),
		chromedp.WaitVisible(chromedp.CSS(`#files-list tr[data-name="upload.txt"]`)),
	)
	var got bytes.Buffer
	if err := asA.ReadFile(ctx, id, "/tmp/upload.txt", &got); err != nil || got.String() != content {
		t.Errorf("the uploaded file in the sandbox: %d bytes, %v; want %d bytes", got.Len(), err, len(content))
	}
	b.run("view a file", time.Minute,
		chromedp.Click(chromedp.CSS(`#files-list tr[data-name="typed"] [data-file-action="view"]`)),
	)
	b.waitText("the file's text shows", "#file-view", "console-42", time.Minute)
	b.shot("files")
	b.run("download a file", time.Minute,
		chromedp.Click(chromedp.CSS(`#files-list tr[data-name="upload.txt"] [data-file-action="download"]`)),
	)
	if dl := waitFile(t, filepath.Join(b.downloads, "upload.txt"), time.Minute); string(dl) != content {
		t.Errorf("the downloaded file: %d bytes; want the %d uploaded", len(dl), len(content))
	}

	// A background process's log, followed live: lines keep coming.
	proc, err := asA.StartProcess(ctx, id, api.StartProcessRequest{Cmd: []string{"sh", "-c", "i=0; while :; do i=$((i+1)); echo tick-$i; sleep 0.2; done"}})
	if err != nil {
		t.Fatal(err)
	}
	b.run("follow a process's log", time.Minute,
		chromedp.Click(chromedp.CSS("#tab-processes")),
		chromedp.WaitVisible(chromedp.CSS(`#process-list tr[data-process="`+proc.ID+`"]`)),
		chromedp.Click(chromedp.CSS(`#process-list tr[data-process="`+proc.ID+`"] [data-proc-action="logs"]`)),
	)
	b.waitText("the log shows", "#process-log", "tick-2\n", time.Minute)
	b.waitText("the log keeps coming", "#process-log", "tick-15\n", time.Minute)

	// The ledger, exported as JSON: the page's own actions are in it.
	b.run("open the ledger", time.Minute, chromedp.Click(chromedp.CSS("#tab-ledger")))
	b.waitText("the ledger lists the upload", "#ledger", "upload.txt", time.Minute)
	b.run("export the ledger", time.Minute, chromedp.Click(chromedp.CSS("#ledger-export")))
	var entries []api.LedgerEntry
	if err := json.Unmarshal(waitFile(t, filepath.Join(b.downloads, "ledger-"+id+".json"), time.Minute), &entries); err != nil || len(entries) == 0 {
		t.Errorf("the exported ledger: %d entries, %v", len(entries), err)
	}

	// The list follows a change made elsewhere (the event stream), and
	// removing from the page removes.
	b.run("back to the list", time.Minute,
		chromedp.Click(chromedp.CSS("#nav-sandboxes")),
		chromedp.WaitVisible(chromedp.CSS(`#sandbox-list tr[data-sandbox-id="`+id+`"]`)),
	)
	// Its memory and CPU come from the stream's usage samples (every 10 s;
	// CPU from the second one on).
	b.poll("the row shows memory and CPU", `(() => { const r = document.querySelector('#sandbox-list tr[data-sandbox-id="`+id+`"]'); `+
		`return !!r && /\d/.test(r.querySelector(".memory").textContent) && /%$/.test(r.querySelector(".cpu").textContent); })()`, 2*api.UsageInterval+30*time.Second)
	b.shot("sandboxes-own-key")
	if _, err := asA.Stop(ctx, id); err != nil {
		t.Fatal(err)
	}
	b.waitText("the list shows the stop", `#sandbox-list tr[data-sandbox-id="`+id+`"] .state`, api.StateStopped, time.Minute)
	b.run("remove from the page", time.Minute,
		chromedp.Click(chromedp.CSS(`#sandbox-list tr[data-sandbox-id="`+id+`"] [data-action="rm"]`)),
	)
	b.waitGone("the row goes", `#sandbox-list tr[data-sandbox-id="`+id+`"]`, 2*time.Minute)
	if _, err := asA.Get(ctx, id); err == nil {
		t.Error("the sandbox removed in the page still exists")
	}

	// The other tenant's sandbox never reached the page nor anything it
	// was sent; the page did talk to the daemon, through its event stream.
	body := b.text("body")
	seen, n := rec.seen()
	for _, secret := range []string{theirs.ID, theirs.Name} {
		if strings.Contains(body, secret) {
			t.Errorf("the page shows another key's sandbox (%s)", secret)
		}
		if strings.Contains(seen, secret) {
			t.Errorf("an answer to the page named another key's sandbox (%s)", secret)
		}
	}
	if !strings.Contains(seen, "GET /v1/events") || !strings.Contains(seen, id) {
		t.Errorf("the page's %d requests did not include the event stream and its own sandbox", n)
	}
	if strings.Count(seen, "GET /v1/sandboxes\n") > 2 {
		t.Errorf("the page listed sandboxes %d times; the list comes from the event stream", strings.Count(seen, "GET /v1/sandboxes\n"))
	}

	// The key lives in the tab's session storage, never in a cookie.
	cookies, err := chromedp.Call(b.ctx, network.GetCookies, network.GetCookiesParams{})
	if err != nil {
		t.Fatal(err)
	}
	stored := b.eval(`sessionStorage.getItem("paddock.key") || ""`)
	local := b.eval(`JSON.stringify(localStorage)`)
	if len(cookies.Cookies) != 0 || stored != keyA.Secret || strings.Contains(local, keyA.Secret) {
		t.Errorf("cookies %v, session storage %q, local storage %q; want the key in session storage only", cookies.Cookies, stored, local)
	}
	b.run("sign out", 30*time.Second,
		chromedp.Click(chromedp.CSS("#signout")),
		chromedp.WaitVisible(chromedp.CSS("#signin-key")),
	)
	if stored := b.eval(`sessionStorage.getItem("paddock.key") || ""`); stored != "" {
		t.Error("signing out left the key in session storage")
	}
	if errs := b.errors(); len(errs) > 0 {
		t.Errorf("the page reported errors: %v", errs)
	}
}

// TestConsoleOfTheSocket: `paddock console` serves the socket's console on
// a local port with a token of its own; its page sees every sandbox.
func TestConsoleOfTheSocket(t *testing.T) {
	d := testdaemon.Start(t, testdaemon.Options{Listen: true})
	ctx := testdaemon.Ctx(t, 10*time.Minute)
	key, err := d.Client.CreateKey(ctx, testdaemon.UniqueName("console-k"))
	if err != nil {
		t.Fatal(err)
	}
	keyed := testdaemon.Create(t, &paddock.Client{URL: "http://" + d.Listen, APIKey: key.Secret}, api.CreateSandboxRequest{Image: "busybox"})
	local := testdaemon.Create(t, d.Client, api.CreateSandboxRequest{Image: "busybox"})

	cctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(cctx, testdaemon.Binary(t), "console", "--socket", d.Socket)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = cmd.Wait() })
	addrRE := regexp.MustCompile(`http://127\.0\.0\.1:\d+/#key=[0-9a-f]{64}`)
	var addr string
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if addr = addrRE.FindString(sc.Text()); addr != "" {
			break
		}
	}
	if addr == "" {
		t.Fatal("paddock console printed no address")
	}
	go func() { _, _ = bytes.NewBuffer(nil).ReadFrom(stdout) }()

	b := newBrowser(t)
	b.run("open the socket's console", time.Minute,
		chromedp.Navigate(addr),
		chromedp.WaitVisible(chromedp.CSS(`#sandbox-list tr[data-sandbox-id="`+local.ID+`"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#sandbox-list tr[data-sandbox-id="`+keyed.ID+`"]`)),
	)
	hash := b.eval(`location.hash`)
	if strings.Contains(hash, "key=") {
		t.Errorf("the token stayed in the address bar: %q", hash)
	}
	b.shot("sandboxes-operator")
	// The host page: the operator sees images, pools, keys and the charts.
	b.run("open the host page", time.Minute,
		chromedp.Click(chromedp.CSS("#nav-host")),
		chromedp.WaitVisible(chromedp.CSS("#images")),
		chromedp.WaitVisible(chromedp.CSS("#keys")),
	)
	b.waitText("the images are listed", "#images", "busybox", time.Minute)
	b.waitText("the key is listed", "#keys", key.ID, time.Minute)
	b.waitText("the quotas are shown", "#policy", "Sandboxes per API key", time.Minute)
	b.shot("host")
	// Without the token the port answers nothing but the page.
	base := addr[:strings.Index(addr, "/#")]
	resp, err := httpGet(base + "/v1/sandboxes")
	if err != nil || resp != 401 {
		t.Errorf("the console's port without its token: %d, %v; want 401", resp, err)
	}
	if errs := b.errors(); len(errs) > 0 {
		t.Errorf("the page reported errors: %v", errs)
	}
}
