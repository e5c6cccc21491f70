package e2b

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/errdefs/errhttp"
)

// The code-interpreter stream is newline-delimited JSON; each line has a
// type the SDK dispatches on. It ignores types it does not know, which
// lets the stream end with an explicit end line.
const (
	ciStdout     = "stdout"
	ciStderr     = "stderr"
	ciResult     = "result"
	ciError      = "error"
	ciExecutions = "number_of_executions"
	ciEnd        = "end_of_execution"
)

type ciText struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type ciErrorMsg struct {
	Type      string `json:"type"`
	Name      string `json:"name"`
	Value     string `json:"value"`
	Traceback string `json:"traceback"`
}

type ciCount struct {
	Type           string `json:"type"`
	ExecutionCount uint64 `json:"execution_count"`
}

type ciEndMsg struct {
	Type string `json:"type"`
}

// ciFields names the result fields the SDK reads, by the MIME type of
// Paddock's bundle they come from. Other MIME types are passed under their
// own names, which the SDK collects in Result.extra.
var ciFields = map[string]string{
	"text/plain":             "text",
	"text/html":              "html",
	"text/markdown":          "markdown",
	"image/svg+xml":          "svg",
	"image/png":              "png",
	"image/jpeg":             "jpeg",
	"application/pdf":        "pdf",
	"text/latex":             "latex",
	"application/json":       "json",
	"application/javascript": "javascript",
}

// ciResultMsg maps a result's MIME bundle to the SDK's result fields.
// JSON arrives as text and is passed as the value it encodes. The bundle's
// keys come from the interpreter, which the sandbox's code controls: only
// keys shaped like MIME types pass, so none can pose as type or
// is_main_result.
func ciResultMsg(bundle map[string]string, main bool) map[string]any {
	out := map[string]any{"type": ciResult, "is_main_result": main}
	for mime, v := range bundle {
		if f, ok := ciFields[mime]; ok {
			if f == "json" && json.Valid([]byte(v)) {
				out[f] = json.RawMessage(v)
			} else {
				out[f] = v
			}
			continue
		}
		if mimeLike(mime) {
			out[mime] = v
		}
	}
	return out
}

// mimeLike reports whether s looks like type/subtype in printable ASCII.
func mimeLike(s string) bool {
	t, sub, ok := strings.Cut(s, "/")
	if !ok || t == "" || sub == "" || len(s) > 127 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c >= 0x7f || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// utf8Carry turns a byte stream cut into chunks anywhere into text: a
// character split between chunks is held until its rest arrives, and
// bytes that are not UTF-8 become U+FFFD.
type utf8Carry struct{ pending []byte }

func (c *utf8Carry) text(b []byte) string {
	buf := append(c.pending, b...)
	cut := len(buf)
	for i := 1; i <= utf8.UTFMax-1 && i <= len(buf); i++ {
		if b0 := buf[len(buf)-i]; b0 < utf8.RuneSelf {
			break
		} else if utf8.RuneStart(b0) {
			if !utf8.FullRune(buf[len(buf)-i:]) {
				cut = len(buf) - i
			}
			break
		}
	}
	c.pending = append(c.pending[:0:0], buf[cut:]...)
	return strings.ToValidUTF8(string(buf[:cut]), "\uFFFD")
}

// flush returns what is held: an incomplete character at the stream's end.
func (c *utf8Carry) flush() string {
	s := strings.ToValidUTF8(string(c.pending), "\uFFFD")
	c.pending = nil
	return s
}

// ciTranslator maps one run's events to the SDK's stream.
type ciTranslator struct {
	out, errOut utf8Carry
	sawError    bool
}

// translate returns the stream lines for one of Paddock's run events.
func (t *ciTranslator) translate(ev api.RunCodeEvent) []any {
	switch ev.Type {
	case api.EventStart:
		return []any{ciCount{Type: ciExecutions, ExecutionCount: ev.ExecutionCount}}
	case api.EventStdout:
		if s := t.out.text(ev.Data); s != "" {
			return []any{ciText{Type: ciStdout, Text: s}}
		}
	case api.EventStderr:
		if s := t.errOut.text(ev.Data); s != "" {
			return []any{ciText{Type: ciStderr, Text: s}}
		}
	case api.RunEventResult:
		return []any{ciResultMsg(ev.Result, ev.Main)}
	case api.RunEventError:
		t.sawError = true
		e := ev.Error
		if e == nil {
			e = &api.CodeError{Name: "Error"}
		}
		return []any{ciErrorMsg{Type: ciError, Name: e.Name, Value: e.Value, Traceback: e.Traceback}}
	case api.EventEnd:
		var lines []any
		if s := t.out.flush(); s != "" {
			lines = append(lines, ciText{Type: ciStdout, Text: s})
		}
		if s := t.errOut.flush(); s != "" {
			lines = append(lines, ciText{Type: ciStderr, Text: s})
		}
		// A run that ended badly without an exception of its own (a
		// context that died, a timeout the interpreter did not report)
		// still ends with an error, so it cannot pass for a success.
		if ev.Status != api.RunOK && !t.sawError {
			name := "ExecutionError"
			switch {
			case ev.ContextDead:
				name = "ContextDead"
			case ev.TimedOut:
				name = "TimeoutError"
			}
			note := ev.Note
			if note == "" {
				note = "the run ended with status " + ev.Status
			}
			lines = append(lines, ciErrorMsg{Type: ciError, Name: name, Value: note})
		}
		return append(lines, ciEndMsg{Type: ciEnd})
	}
	return nil
}

// execStream writes a run's lines as they come. The 200 and its headers
// go out with the first event (the run's start): until then an error is
// still a status the SDK reports.
type execStream struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	t       ciTranslator
	started bool
	err     error // writing to the client failed: it left
}

func newExecStream(w http.ResponseWriter) *execStream {
	return &execStream{w: w, rc: http.NewResponseController(w)}
}

func (s *execStream) emit(ev api.RunCodeEvent) error {
	if s.err != nil {
		return s.err
	}
	if !s.started {
		s.started = true
		s.w.Header().Set("Content-Type", "application/x-ndjson")
		s.w.Header().Set("Cache-Control", "no-store")
		s.w.WriteHeader(http.StatusOK)
	}
	for _, line := range s.t.translate(ev) {
		b, err := json.Marshal(line)
		if err != nil {
			s.err = err
			return err
		}
		if _, err := s.w.Write(append(b, '\n')); err != nil {
			s.err = err
			return err
		}
	}
	if err := s.rc.Flush(); err != nil {
		s.err = err
	}
	return s.err
}

// writeCIError answers a code-interpreter call with an error. The SDK
// shows only the status line for most statuses (its "400 Bad Request"),
// so on HTTP/1 the message goes into the reason phrase too, where the
// user sees it; the JSON body says the same for everything else.
func writeCIError(w http.ResponseWriter, r *http.Request, err error) {
	st, msg := http.StatusMethodNotAllowed, err.Error()
	if !errors.Is(err, errMethod) {
		st, msg = statuses.StatusOf(err), errhttp.PublicMessage(w, err)
	}
	body, _ := json.Marshal(apiError{Code: st, Message: msg})
	body = append(body, '\n')
	allow := ""
	if st == http.StatusMethodNotAllowed {
		allow = "GET, POST, DELETE"
	}
	if r.ProtoMajor == 1 && drainBody(r) {
		if conn, buf, herr := http.NewResponseController(w).Hijack(); herr == nil {
			defer conn.Close()
			_ = conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
			fmt.Fprintf(buf, "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n", st, reasonPhrase(msg), len(body))
			if allow != "" {
				fmt.Fprintf(buf, "Allow: %s\r\n", allow)
			}
			_, _ = buf.WriteString("\r\n")
			_, _ = buf.Write(body)
			_ = buf.Flush()
			return
		}
	}
	if allow != "" {
		w.Header().Set("Allow", allow)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(st)
	_, _ = w.Write(body)
}

// drainBody reads what is left of a small request body, so closing the
// connection after the answer does not reset it under the client. A
// larger body is left to net/http.
func drainBody(r *http.Request) bool {
	if r.Body == nil || r.Body == http.NoBody {
		return true
	}
	n, err := io.Copy(io.Discard, io.LimitReader(r.Body, 256<<10+1))
	return err == nil && n <= 256<<10
}

// reasonPhrase makes a message safe for a status line: printable ASCII,
// one line, bounded.
func reasonPhrase(msg string) string {
	const max = 400
	var b strings.Builder
	for _, c := range msg {
		if b.Len() >= max {
			b.WriteString("...")
			break
		}
		if c >= ' ' && c < 0x7f {
			b.WriteRune(c)
		} else {
			b.WriteByte('?')
		}
	}
	return b.String()
}
