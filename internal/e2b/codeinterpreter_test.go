package e2b

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/errdefs"
)

// lines renders translated messages as the JSON lines the SDK reads.
func lines(t *testing.T, msgs []any) []string {
	t.Helper()
	out := make([]string, 0, len(msgs))
	for _, m := range msgs {
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(b))
	}
	return out
}

func TestCITranslate(t *testing.T) {
	tests := []struct {
		name   string
		events []api.RunCodeEvent
		want   []string
	}{
		{
			name: "value of the last expression",
			events: []api.RunCodeEvent{
				{Type: api.EventStart, ExecutionCount: 3},
				{Type: api.RunEventResult, Main: true, Result: map[string]string{"text/plain": "42", "application/json": "42"}},
				{Type: api.EventEnd, Status: api.RunOK},
			},
			want: []string{
				`{"type":"number_of_executions","execution_count":3}`,
				`{"is_main_result":true,"json":42,"text":"42","type":"result"}`,
				`{"type":"end_of_execution"}`,
			},
		},
		{
			name: "output as it comes",
			events: []api.RunCodeEvent{
				{Type: api.EventStart, ExecutionCount: 1},
				{Type: api.EventStdout, Data: []byte("out\n")},
				{Type: api.EventStderr, Data: []byte("err\n")},
				{Type: api.EventStdout, Data: []byte("more")},
				{Type: api.EventEnd, Status: api.RunOK},
			},
			want: []string{
				`{"type":"number_of_executions","execution_count":1}`,
				`{"type":"stdout","text":"out\n"}`,
				`{"type":"stderr","text":"err\n"}`,
				`{"type":"stdout","text":"more"}`,
				`{"type":"end_of_execution"}`,
			},
		},
		{
			name: "exception",
			events: []api.RunCodeEvent{
				{Type: api.EventStart, ExecutionCount: 2},
				{Type: api.RunEventError, Error: &api.CodeError{Name: "ValueError", Value: "boom", Traceback: "Traceback ...\nValueError: boom\n"}},
				{Type: api.EventEnd, Status: api.RunError},
			},
			want: []string{
				`{"type":"number_of_executions","execution_count":2}`,
				`{"type":"error","name":"ValueError","value":"boom","traceback":"Traceback ...\nValueError: boom\n"}`,
				`{"type":"end_of_execution"}`,
			},
		},
		{
			name: "interrupted run keeps the interpreter's own error",
			events: []api.RunCodeEvent{
				{Type: api.RunEventError, Error: &api.CodeError{Name: "KeyboardInterrupt"}},
				{Type: api.EventEnd, Status: api.RunTimeout, TimedOut: true, Note: "timed out"},
			},
			want: []string{
				`{"type":"error","name":"KeyboardInterrupt","value":"","traceback":""}`,
				`{"type":"end_of_execution"}`,
			},
		},
		{
			name: "timeout without an exception still ends with an error",
			events: []api.RunCodeEvent{
				{Type: api.EventEnd, Status: api.RunTimeout, TimedOut: true, Note: "the run timed out after 1s"},
			},
			want: []string{
				`{"type":"error","name":"TimeoutError","value":"the run timed out after 1s","traceback":""}`,
				`{"type":"end_of_execution"}`,
			},
		},
		{
			name: "dead context",
			events: []api.RunCodeEvent{
				{Type: api.EventStdout, Data: []byte("bye")},
				{Type: api.EventEnd, Status: api.RunDead, ContextDead: true, Note: `context "c" is dead: exit status 3`},
			},
			want: []string{
				`{"type":"stdout","text":"bye"}`,
				`{"type":"error","name":"ContextDead","value":"context \"c\" is dead: exit status 3","traceback":""}`,
				`{"type":"end_of_execution"}`,
			},
		},
		{
			name: "character split across chunks",
			events: []api.RunCodeEvent{
				{Type: api.EventStdout, Data: []byte("caf\xc3")},
				{Type: api.EventStdout, Data: []byte("\xa9 \xe2\x82")},
				{Type: api.EventStdout, Data: []byte("\xac")},
				{Type: api.EventStdout, Data: []byte("\xf0\x9f")},
				{Type: api.EventEnd, Status: api.RunOK},
			},
			want: []string{
				`{"type":"stdout","text":"caf"}`,
				`{"type":"stdout","text":"é "}`,
				`{"type":"stdout","text":"€"}`,
				`{"type":"stdout","text":"�"}`, // cut short at the end
				`{"type":"end_of_execution"}`,
			},
		},
		{
			name: "bytes that are not UTF-8",
			events: []api.RunCodeEvent{
				{Type: api.EventStderr, Data: []byte("a\xffb\x80")},
				{Type: api.EventEnd, Status: api.RunOK},
			},
			want: []string{
				`{"type":"stderr","text":"a�b�"}`,
				`{"type":"end_of_execution"}`,
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var tr ciTranslator
			var got []string
			for _, ev := range tc.events {
				got = append(got, lines(t, tr.translate(ev))...)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

func TestCIResultMsg(t *testing.T) {
	bundle := map[string]string{
		"text/plain":             "<P>",
		"text/html":              "<b>hi</b>",
		"text/markdown":          "**hi**",
		"image/svg+xml":          "<svg/>",
		"image/png":              "iVBORw0KGgo=",
		"image/jpeg":             "/9j/",
		"application/pdf":        "JVBERi0=",
		"text/latex":             `$x$`,
		"application/javascript": "1",
		"application/json":       "not json",
		"application/vnd.custom": "v",
		// Keys the sandbox's code could send to pose as the SDK's own.
		"type":           "stdout",
		"is_main_result": "false",
		"bad key/x y":    "v",
	}
	got := ciResultMsg(bundle, false)
	want := map[string]any{
		"type": "result", "is_main_result": false,
		"text": "<P>", "html": "<b>hi</b>", "markdown": "**hi**", "svg": "<svg/>", "png": "iVBORw0KGgo=",
		"jpeg": "/9j/", "pdf": "JVBERi0=", "latex": "$x$", "javascript": "1",
		"json":                   "not json", // not valid JSON: passed as the text it is
		"application/vnd.custom": "v",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v\nwant %v", got, want)
	}
	b, _ := json.Marshal(ciResultMsg(map[string]string{"application/json": `{"a": [1, 2]}`}, true))
	if string(b) != `{"is_main_result":true,"json":{"a":[1,2]},"type":"result"}` {
		t.Fatalf("json result: %s", b)
	}
}

func TestParseExecute(t *testing.T) {
	tests := []struct {
		name  string
		body  string
		want  execSpec
		errIs error
	}{
		{name: "default python", body: `{"code":"x = 1"}`, want: execSpec{code: "x = 1", contextID: "e2b-default-python", language: "python"}},
		{name: "language", body: `{"code":"1","language":"js"}`, want: execSpec{code: "1", contextID: "e2b-default-javascript", language: "javascript"}},
		{name: "context", body: `{"code":"1","context_id":"abc","env_vars":{"A":"b"}}`, want: execSpec{code: "1", contextID: "abc", env: map[string]string{"A": "b"}}},
		{name: "nulls", body: `{"code":"1","context_id":null,"language":null,"env_vars":null}`, want: execSpec{code: "1", contextID: "e2b-default-python", language: "python"}},
		{name: "unknown fields are allowed", body: `{"code":"1","future":true}`, want: execSpec{code: "1", contextID: "e2b-default-python", language: "python"}},
		{name: "unsupported language", body: `{"code":"1","language":"r"}`, errIs: errdefs.ErrInvalidArgument},
		{name: "typescript", body: `{"code":"1","language":"typescript"}`, errIs: errdefs.ErrInvalidArgument},
		{name: "both", body: `{"code":"1","language":"python","context_id":"c"}`, errIs: errdefs.ErrInvalidArgument},
		{name: "empty code", body: `{"code":"  "}`, errIs: errdefs.ErrInvalidArgument},
		{name: "no body", body: ``, errIs: errdefs.ErrInvalidArgument},
		{name: "not an object", body: `[1]`, errIs: errdefs.ErrInvalidArgument},
		{name: "trailing data", body: `{"code":"1"} {}`, errIs: errdefs.ErrInvalidArgument},
		{name: "code too large", body: `{"code":"` + strings.Repeat("x", maxCodeBytes+1) + `"}`, errIs: errdefs.ErrInvalidArgument},
		{name: "context id path trick", body: `{"code":"1","context_id":"../x"}`, errIs: errdefs.ErrNotFound},
		{name: "wrong type", body: `{"code":1}`, errIs: errdefs.ErrInvalidArgument},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseExecute([]byte(tc.body))
			if tc.errIs != nil {
				if !errors.Is(err, tc.errIs) {
					t.Fatalf("err = %v, want %v", err, tc.errIs)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v %v, want %+v", got, err, tc.want)
			}
		})
	}
}

func TestParseContextBody(t *testing.T) {
	tests := []struct {
		body  string
		want  contextBody
		errIs error
	}{
		{body: ``, want: contextBody{Language: "python"}},
		{body: `{}`, want: contextBody{Language: "python"}},
		{body: `{"language":"javascript","cwd":"/tmp"}`, want: contextBody{Language: "javascript", Cwd: "/tmp"}},
		{body: `{"language":"python3","cwd":null}`, want: contextBody{Language: "python"}},
		{body: `{"language":"bash"}`, errIs: errdefs.ErrInvalidArgument},
		{body: `{"cwd":"/a\u0000b"}`, errIs: errdefs.ErrInvalidArgument},
		{body: `{`, errIs: errdefs.ErrInvalidArgument},
	}
	for _, tc := range tests {
		got, err := parseContextBody([]byte(tc.body))
		if tc.errIs != nil {
			if !errors.Is(err, tc.errIs) {
				t.Errorf("%q: err = %v, want %v", tc.body, err, tc.errIs)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%q: got %+v %v, want %+v", tc.body, got, err, tc.want)
		}
	}
}

func TestCIRoute(t *testing.T) {
	tests := []struct {
		method, path string
		route, id    string
		errIs        error
	}{
		{"POST", "/execute", "execute", "", nil},
		{"GET", "/contexts", "list", "", nil},
		{"POST", "/contexts", "create", "", nil},
		{"DELETE", "/contexts/abc", "delete", "abc", nil},
		{"POST", "/contexts/abc/restart", "restart", "abc", nil},
		{"GET", "/execute", "", "", errMethod},
		{"PUT", "/contexts", "", "", errMethod},
		{"GET", "/contexts/abc", "", "", errMethod},
		{"POST", "/contexts/a%2Fb", "", "", errdefs.ErrNotFound},
		{"DELETE", "/contexts/..", "", "", errdefs.ErrNotFound},
		{"DELETE", "/contexts/", "", "", errdefs.ErrNotFound},
		{"GET", "/health", "", "", errdefs.ErrNotFound},
		{"POST", "/contexts/abc/restart/x", "", "", errdefs.ErrNotFound},
	}
	for _, tc := range tests {
		r := httptest.NewRequest(tc.method, "http://x"+tc.path, nil)
		route, id, err := ciRoute(r)
		if tc.errIs != nil {
			if !errors.Is(err, tc.errIs) {
				t.Errorf("%s %s: err = %v, want %v", tc.method, tc.path, err, tc.errIs)
			}
			continue
		}
		if err != nil || route != tc.route || id != tc.id {
			t.Errorf("%s %s: got %q %q %v", tc.method, tc.path, route, id, err)
		}
	}
}

// TestWriteCIError checks that the message reaches a client's status
// line on HTTP/1.1 (where the SDK shows it) and the JSON body, for errors
// before and after the request body was read.
func TestWriteCIError(t *testing.T) {
	var logs lockedBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/read" {
			_, _ = io.ReadAll(r.Body)
		}
		var err error
		switch r.URL.Query().Get("e") {
		case "method":
			err = fmt.Errorf("GET /execute: use POST: %w", errMethod)
		case "internal":
			err = errors.New("disk on fire at /var/lib/paddock")
		case "crlf":
			err = errdefs.Invalid("disk on fire\r\nX-Evil: 1")
		default:
			err = errdefs.Invalid(`language "r" is not supported`)
		}
		writeCIError(&statusWriter{ResponseWriter: w, log: log, r: r}, r, err)
	}))
	t.Cleanup(srv.Close)
	tests := []struct {
		path, body string
		status     int
		phrase     string
	}{
		{"/read?e=invalid", `{"code":"1"}`, 400, `400 language "r" is not supported: invalid argument`},
		{"/unread?e=invalid", strings.Repeat("x", 10000), 400, `400 language "r" is not supported: invalid argument`},
		{"/read?e=method", "", 405, "405 GET /execute: use POST: method not allowed"},
		{"/read?e=crlf", "", 400, "400 disk on fire??X-Evil: 1: invalid argument"},
		{"/read?e=internal", "", 500, "500 internal error (reference "},
	}
	for _, tc := range tests {
		resp, err := http.Post(srv.URL+tc.path, "application/json", strings.NewReader(tc.body))
		if err != nil {
			t.Fatalf("%s: %v", tc.path, err)
		}
		var body apiError
		derr := json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		phraseOK := resp.Status == tc.phrase
		if tc.status == 500 {
			// The details stay in the log; the client gets a reference.
			phraseOK = strings.HasPrefix(resp.Status, tc.phrase) && !strings.Contains(resp.Status+body.Message, "disk on fire")
			ref := strings.TrimSuffix(strings.TrimPrefix(body.Message, "internal error (reference "), "): the daemon's log has the details")
			if logged := logs.String(); len(ref) != 12 || !strings.Contains(logged, ref) || !strings.Contains(logged, "disk on fire at /var/lib/paddock") {
				t.Errorf("internal error: message %q, log %q; want the reference in both and the details in the log only", body.Message, logged)
			}
		}
		if resp.StatusCode != tc.status || !phraseOK || derr != nil || body.Code != tc.status || resp.Header.Get("X-Evil") != "" {
			t.Errorf("%s: status %q body %+v (%v), want %q", tc.path, resp.Status, body, derr, tc.phrase)
		}
	}
	// A body too large to drain is answered by net/http as usual.
	resp, err := http.Post(srv.URL+"/unread", "application/json", strings.NewReader(strings.Repeat("x", 1<<20)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 400 || resp.Status != "400 Bad Request" {
		t.Errorf("large body: %q", resp.Status)
	}
}

func TestReasonPhrase(t *testing.T) {
	long := strings.Repeat("a", 1000)
	if got := reasonPhrase(long); len(got) != 403 || !strings.HasSuffix(got, "...") {
		t.Errorf("long phrase: %d bytes", len(got))
	}
	if got := reasonPhrase("caf\u00e9\n\x00"); got != "caf???" {
		t.Errorf("got %q", got)
	}
}

// TestExecStream checks the headers and the framing: one JSON object per
// line, flushed, headers only with the first event.
func TestExecStream(t *testing.T) {
	rec := httptest.NewRecorder()
	s := newExecStream(rec)
	for _, ev := range []api.RunCodeEvent{
		{Type: api.EventStart, ExecutionCount: 1},
		{Type: api.EventStdout, Data: []byte("hi\n")},
		{Type: api.EventEnd, Status: api.RunOK},
	} {
		if err := s.emit(ev); err != nil {
			t.Fatal(err)
		}
	}
	if rec.Code != 200 || rec.Header().Get("Content-Type") != "application/x-ndjson" || !rec.Flushed {
		t.Fatalf("status %d headers %v flushed %v", rec.Code, rec.Header(), rec.Flushed)
	}
	sc := bufio.NewScanner(rec.Body)
	var types []string
	for sc.Scan() {
		var m struct{ Type string }
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		types = append(types, m.Type)
	}
	if want := []string{"number_of_executions", "stdout", "end_of_execution"}; !reflect.DeepEqual(types, want) {
		t.Fatalf("types %v, want %v", types, want)
	}
}

// FuzzParseExecute checks that any body either fails with a client error
// or gives a spec the controller can take: a language Paddock runs, a
// context id the agent accepts, code within bounds.
func FuzzParseExecute(f *testing.F) {
	for _, s := range []string{
		`{"code":"x = 1"}`, `{"code":"1","language":"javascript"}`, `{"code":"1","context_id":"abc"}`,
		`{"code":"1","env_vars":{"A":"b"}}`, `{"code":"1","context_id":"a/../b"}`, `{"code":"\u0000"}`, `[]`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		spec, err := parseExecute(b)
		if err != nil {
			if c := errdefs.Code(err); c != api.CodeInvalidArgument && c != api.CodeNotFound {
				t.Fatalf("error code %s: %v", c, err)
			}
			return
		}
		if !ciContextIDRE.MatchString(spec.contextID) || strings.TrimSpace(spec.code) == "" || len(spec.code) > maxCodeBytes {
			t.Fatalf("accepted %+v", spec)
		}
		if spec.language != "" && spec.language != api.LanguagePython && spec.language != api.LanguageJavaScript {
			t.Fatalf("language %q", spec.language)
		}
	})
}

func FuzzParseContextBody(f *testing.F) {
	for _, s := range []string{``, `{}`, `{"language":"js","cwd":"/tmp"}`, `{"language":"r"}`, `{"cwd":1}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		body, err := parseContextBody(b)
		if err != nil {
			if !errors.Is(err, errdefs.ErrInvalidArgument) {
				t.Fatalf("error %v", err)
			}
			return
		}
		if body.Language != api.LanguagePython && body.Language != api.LanguageJavaScript {
			t.Fatalf("language %q", body.Language)
		}
		if strings.ContainsRune(body.Cwd, 0) || len(body.Cwd) > 4096 {
			t.Fatalf("cwd %q", body.Cwd)
		}
	})
}

// FuzzUTF8Carry checks that chunked bytes come out as valid text that
// loses nothing valid: splitting a valid string anywhere gives it back.
func FuzzUTF8Carry(f *testing.F) {
	f.Add([]byte("café €😀"), uint8(4))
	f.Add([]byte("\xff\xc3"), uint8(1))
	f.Fuzz(func(t *testing.T, b []byte, at uint8) {
		cut := int(at)
		if cut > len(b) {
			cut = len(b)
		}
		var c utf8Carry
		got := c.text(b[:cut]) + c.text(b[cut:]) + c.flush()
		if !utf8.ValidString(got) {
			t.Fatalf("invalid text %q", got)
		}
		if utf8.Valid(b) && got != string(b) {
			t.Fatalf("%q split at %d came back as %q", b, cut, got)
		}
	})
}

// lockedBuffer is a log destination handlers write to while a test reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
