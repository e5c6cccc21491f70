package e2e

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/proto/gen/filesystem"
	"github.com/paddock-dev/paddock/proto/gen/filesystem/filesystemconnect"
	"github.com/paddock-dev/paddock/proto/gen/process"
	"github.com/paddock-dev/paddock/proto/gen/process/processconnect"
	"github.com/paddock-dev/paddock/sdk/go/paddock"
)

// envdHeaders addresses every request to a sandbox's envd, as E2B's SDKs
// do, selecting the user the envd way.
type envdHeaders struct {
	id, token, user string
}

func (h envdHeaders) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("E2b-Sandbox-Id", h.id)
	r.Header.Set("E2b-Sandbox-Port", "49983")
	r.Header.Set("X-Access-Token", h.token)
	r.Header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(h.user+":")))
	return http.DefaultTransport.RoundTrip(r)
}

// runEnvdProcess starts a process through envd's Connect API and drains its
// stream to the end event.
func runEnvdProcess(t *testing.T, pc processconnect.ProcessClient, cmd string, args ...string) {
	t.Helper()
	ctx := ctxT(t, time.Minute)
	stream, err := pc.Start(ctx, connect.NewRequest(&process.StartRequest{Process: &process.ProcessConfig{
		Cmd: cmd, Args: args, Envs: map[string]string{"E2B_SECRET": "e2b-env-value-7"},
	}}))
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	for stream.Receive() {
		if stream.Msg().GetEvent().GetEnd() != nil {
			return
		}
	}
	t.Fatalf("start %s: the stream ended without an end event: %v", cmd, stream.Err())
}

// TestE2BDataPlaneLedger: what an E2B client does through envd's protocol
// (process starts in every Connect encoding, directory and file changes,
// uploads) is in the sandbox's ledger, env names without values; a failed
// call is not, and a request the relay cannot decode is recorded by its
// method.
func TestE2BDataPlaneLedger(t *testing.T) {
	d := startDaemon(t, daemonOpts{listen: true})
	key := strings.TrimSpace(d.must("keys", "create", "--e2b", "e2b-ledger"))
	c := &e2bClient{t: t, base: "http://" + d.listen, key: key}
	sb := c.create(map[string]any{"templateID": "busybox", "timeout": 300})
	hc := &http.Client{Transport: envdHeaders{id: sb.SandboxID, token: sb.EnvdAccessToken, user: "user"}}
	ctx := ctxT(t, 3*time.Minute)

	runEnvdProcess(t, processconnect.NewProcessClient(hc, c.base), "sh", "-c", "echo one")
	runEnvdProcess(t, processconnect.NewProcessClient(hc, c.base, connect.WithProtoJSON()), "echo", "two")
	runEnvdProcess(t, processconnect.NewProcessClient(hc, c.base, connect.WithGRPCWeb()), "echo", "three")

	fs := filesystemconnect.NewFilesystemClient(hc, c.base)
	fsJSON := filesystemconnect.NewFilesystemClient(hc, c.base, connect.WithProtoJSON())
	if _, err := fs.MakeDir(ctx, connect.NewRequest(&filesystem.MakeDirRequest{Path: "/home/user/d1"})); err != nil {
		t.Fatal(err)
	}
	if _, err := fsJSON.Move(ctx, connect.NewRequest(&filesystem.MoveRequest{Source: "/home/user/d1", Destination: "/home/user/d2"})); err != nil {
		t.Fatal(err)
	}
	if _, err := fs.Remove(ctx, connect.NewRequest(&filesystem.RemoveRequest{Path: "/home/user/d2"})); err != nil {
		t.Fatal(err)
	}
	// A call the agent refuses leaves no entry. (Removing a missing path
	// is not refused: envd answers it with success.)
	if _, err := fs.Remove(ctx, connect.NewRequest(&filesystem.RemoveRequest{Path: "/"})); connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Fatalf("remove of /: %v", err)
	}
	// Paddock's own API still says a missing path is not there, and
	// records nothing for it.
	if err := d.client.Remove(ctx, sb.SandboxID, "/home/user/no-such-file"); !errors.Is(err, paddock.ErrNotFound) {
		t.Fatalf("/v1 remove of a missing file: %v", err)
	}
	// A compressed request is relayed, and recorded by its method alone.
	gz := filesystemconnect.NewFilesystemClient(hc, c.base, connect.WithSendGzip())
	if _, err := gz.MakeDir(ctx, connect.NewRequest(&filesystem.MakeDirRequest{Path: "/home/user/zipped"})); err != nil {
		t.Fatal(err)
	}

	// Uploads: a multipart writeFiles naming each file by its path, and a
	// raw upload to ?path=.
	var mp bytes.Buffer
	mw := multipart.NewWriter(&mp)
	for _, p := range []string{"/home/user/u1.txt", "/home/user/sub/u2.txt"} {
		h := textproto.MIMEHeader{}
		h.Set("Content-Disposition", `form-data; name="file"; filename="`+p+`"`)
		h.Set("Content-Type", "application/octet-stream")
		pw, _ := mw.CreatePart(h)
		io.WriteString(pw, "content of "+p)
	}
	mw.Close()
	upload := func(query, ctype string, body []byte) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/files"+query, bytes.NewReader(body))
		req.Header.Set("Content-Type", ctype)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("upload: %d %s", resp.StatusCode, b)
		}
	}
	upload("", mw.FormDataContentType(), mp.Bytes())
	upload("?path=/home/user/raw.txt", "application/octet-stream", []byte("raw"))
	if out, _ := execOut(t, d, sb.SandboxID, "cat", "/home/user/sub/u2.txt", "/home/user/raw.txt"); out != "content of /home/user/sub/u2.txtraw" {
		t.Fatalf("uploaded files hold %q", out)
	}

	starts := ledgerEntries(t, d, sb.SandboxID, api.LedgerProcessStart)
	var cmds []string
	for _, e := range starts {
		if e.Data["via"] != "e2b" || e.Data["method"] != "process.Process/Start" || e.Data["env"] != "E2B_SECRET" || e.Data["user"] != "user" || e.Note != "" {
			t.Errorf("process_start entry = %+v", e)
		}
		cmds = append(cmds, strings.Join(e.Command, " "))
	}
	if want := []string{"sh -c echo one", "echo two", "echo three"}; !slices.Equal(cmds, want) {
		t.Fatalf("process_start commands = %q, want %q", cmds, want)
	}
	mk := ledgerEntries(t, d, sb.SandboxID, api.LedgerMkdir)
	if len(mk) != 2 || mk[0].Path != "/home/user/d1" || mk[1].Path != "" || !strings.Contains(mk[1].Note, "compressed") || mk[1].Data["method"] != "filesystem.Filesystem/MakeDir" {
		t.Fatalf("mkdir entries = %+v", mk)
	}
	if mv := ledgerEntries(t, d, sb.SandboxID, api.LedgerFileMove); len(mv) != 1 || mv[0].Path != "/home/user/d2" || mv[0].Data["source"] != "/home/user/d1" {
		t.Fatalf("file_move entries = %+v", mv)
	}
	if rm := ledgerEntries(t, d, sb.SandboxID, api.LedgerFileRemove); len(rm) != 1 || rm[0].Path != "/home/user/d2" {
		t.Fatalf("file_remove entries = %+v (a refused remove must not be recorded)", rm)
	}
	writes := waitEntries(t, d, sb.SandboxID, api.LedgerFileWrite, 3)
	var paths []string
	for _, e := range writes {
		paths = append(paths, e.Path)
	}
	slices.Sort(paths)
	if want := []string{"/home/user/raw.txt", "/home/user/sub/u2.txt", "/home/user/u1.txt"}; !slices.Equal(paths, want) {
		t.Fatalf("file_write paths = %q, want %q", paths, want)
	}

	l, err := d.client.Ledger(ctx, sb.SandboxID)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := json.Marshal(l); bytes.Contains(b, []byte("e2b-env-value-7")) {
		t.Fatalf("an env value is in the ledger: %s", b)
	}
}
