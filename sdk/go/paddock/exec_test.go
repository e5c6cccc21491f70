package paddock

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/api"
)

func lines(evs ...string) string { return strings.Join(evs, "\n") + "\n" }

func TestReadExecStream(t *testing.T) {
	hello := `{"type":"stdout","data":"aGVsbG8K"}` // "hello\n"
	oops := `{"type":"stderr","data":"b29wcw=="}`  // "oops"
	tests := []struct {
		name       string
		in         string
		want       *ExecResult
		wantOut    string
		wantErr    error
		errContain string
	}{
		{name: "ok", in: lines(`{"type":"start","pid":7}`, hello, oops, `{"type":"end","exit_code":0}`),
			want: &ExecResult{Pid: 7}, wantOut: "hello\n|oops"},
		{name: "exit code", in: lines(`{"type":"start","pid":7}`, `{"type":"end","exit_code":3}`), want: &ExecResult{Pid: 7, ExitCode: 3}},
		{name: "signal", in: lines(`{"type":"end","exit_code":-1,"signal":"SIGKILL"}`), want: &ExecResult{ExitCode: -1, Signal: "SIGKILL"}},
		{name: "timed out", in: lines(`{"type":"end","exit_code":-1,"signal":"SIGKILL","timed_out":true}`),
			want: &ExecResult{ExitCode: -1, Signal: "SIGKILL", TimedOut: true}},
		{name: "blank lines and crlf", in: "\n\r\n" + `{"type":"end","exit_code":0}` + "\r\n", want: &ExecResult{}},
		{name: "last line without newline", in: `{"type":"end","exit_code":0}`, want: &ExecResult{}},
		{name: "unknown type skipped", in: lines(`{"type":"progress"}`, `{"type":"end","exit_code":1}`), want: &ExecResult{ExitCode: 1}},
		{name: "nothing after end is read", in: lines(`{"type":"end","exit_code":0}`, `garbage`), want: &ExecResult{}},
		{name: "empty stream", in: "", wantErr: ErrUnavailable, errContain: "stream ended without an end event"},
		{name: "no end", in: lines(`{"type":"start","pid":1}`, hello), wantErr: ErrUnavailable,
			errContain: "stream ended without an end event", wantOut: "hello\n|"},
		{name: "end with error", in: lines(`{"type":"end","error":{"code":"unavailable","message":"agent died"}}`),
			wantErr: ErrUnavailable, errContain: "agent died"},
		{name: "end with error and not_found", in: lines(`{"type":"end","error":{"code":"not_found","message":"no such binary"}}`),
			wantErr: ErrNotFound},
		{name: "end without exit code", in: lines(`{"type":"end"}`), wantErr: ErrUnavailable, errContain: "neither"},
		{name: "malformed", in: lines(`{"type":"stdout","data":`), wantErr: ErrUnavailable, errContain: "malformed"},
		{name: "bad base64", in: lines(`{"type":"stdout","data":"!!"}`), wantErr: ErrUnavailable, errContain: "malformed"},
		{name: "cut mid line", in: `{"type":"end","exit_co`, wantErr: ErrUnavailable, errContain: "malformed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			res, err := readExecStream(strings.NewReader(tt.in), &out, &errOut)
			if got := out.String() + "|" + errOut.String(); tt.wantOut != "" && got != tt.wantOut {
				t.Errorf("output = %q, want %q", got, tt.wantOut)
			}
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) || !strings.Contains(err.Error(), tt.errContain) {
					t.Fatalf("err = %v, want %v containing %q", err, tt.wantErr, tt.errContain)
				}
				if res != nil {
					t.Fatalf("result %+v returned with an error", res)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if *res != *tt.want {
				t.Fatalf("result = %+v, want %+v", res, tt.want)
			}
		})
	}
}

func TestEventLineBound(t *testing.T) {
	big := `{"type":"stdout","data":"` + strings.Repeat("A", 200) + `"}`
	in := lines(big, `{"type":"end","exit_code":0}`)
	er := newEventReader(strings.NewReader(in), 100)
	var ev api.ExecEvent
	err := er.next(&ev)
	if !errors.Is(err, errLineTooLong) || !errors.Is(err, ErrUnavailable) {
		t.Fatalf("err = %v, want a too-long error", err)
	}
	// The reader resynchronises at the next line.
	if err := er.next(&ev); err != nil || ev.Type != api.EventEnd {
		t.Fatalf("after skip: %v %+v", err, ev)
	}
	// A line right at the bound is accepted.
	exact := `{"type":"end","exit_code":0}`
	er = newEventReader(strings.NewReader(exact+"\n"), len(exact))
	if err := er.next(&ev); err != nil {
		t.Fatalf("line at the bound: %v", err)
	}
}

func TestWriterErrorStopsExec(t *testing.T) {
	in := lines(`{"type":"stdout","data":"aGk="}`, `{"type":"end","exit_code":0}`)
	_, err := readExecStream(strings.NewReader(in), failWriter{}, nil)
	if err == nil || !strings.Contains(err.Error(), "write stdout") {
		t.Fatalf("err = %v", err)
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

// chanWriter reports each write, so a test can see output before the
// command has ended.
type chanWriter chan string

func (c chanWriter) Write(p []byte) (int, error) { c <- string(p); return len(p), nil }

func TestExecStreamsOutputAsItArrives(t *testing.T) {
	release := make(chan struct{})
	var got api.ExecRequest
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/sandboxes/dev/exec" || r.Header.Get("Accept") != "application/x-ndjson" {
			http.Error(w, "bad request line", http.StatusBadRequest)
			return
		}
		if err := json.NewDecoder(r.Body).Decode(&got); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/x-ndjson")
		enc := json.NewEncoder(w)
		_ = enc.Encode(api.ExecEvent{Type: api.EventStart, Pid: 9})
		_ = enc.Encode(api.ExecEvent{Type: api.EventStdout, Data: []byte("first")})
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		code := 0
		_ = enc.Encode(api.ExecEvent{Type: api.EventEnd, ExitCode: &code})
	}))
	t.Cleanup(srv.Close)
	out := make(chanWriter, 4)
	c := &Client{URL: srv.URL}
	type result struct {
		res *ExecResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := c.Exec(context.Background(), "dev", ExecOptions{
			Cmd: []string{"sh", "-c", "x"}, Env: map[string]string{"A": "1"}, Cwd: "/w", User: "root",
			Stdin: strings.NewReader("input"), Timeout: 90 * time.Second, Stdout: out,
		})
		done <- result{res, err}
	}()
	select {
	case s := <-out:
		if s != "first" {
			t.Fatalf("first write = %q", s)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no output before the command ended: output is buffered")
	}
	close(release)
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.res.Pid != 9 || r.res.ExitCode != 0 {
		t.Fatalf("result = %+v", r.res)
	}
	if strings.Join(got.Cmd, " ") != "sh -c x" || got.Env["A"] != "1" || got.Cwd != "/w" || got.User != "root" ||
		string(got.Stdin) != "input" || got.Timeout != "1m30s" {
		t.Fatalf("request = %+v", got)
	}
}

func TestExecCanceledMidStream(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, `{"type":"start","pid":1}`+"\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := (&Client{URL: srv.URL}).Exec(ctx, "dev", ExecOptions{Cmd: []string{"sleep", "100"}})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the context's error", err)
	}
}

// zeros yields n zero bytes without holding them.
type zeros struct{ n int }

func (z *zeros) Read(p []byte) (int, error) {
	if z.n == 0 {
		return 0, io.EOF
	}
	k := min(len(p), z.n)
	clear(p[:k])
	z.n -= k
	return k, nil
}

func TestExecStdinBound(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req api.ExecRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		code := len(req.Stdin) % 256
		_ = json.NewEncoder(w).Encode(api.ExecEvent{Type: api.EventEnd, ExitCode: &code})
	}))
	t.Cleanup(srv.Close)
	c := &Client{URL: srv.URL}
	if _, err := c.Exec(context.Background(), "dev", ExecOptions{Cmd: []string{"cat"}, Stdin: &zeros{api.MaxExecStdin + 1}}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("over the bound: err = %v, want ErrInvalidArgument", err)
	}
	res, err := c.Exec(context.Background(), "dev", ExecOptions{Cmd: []string{"cat"}, Stdin: &zeros{api.MaxExecStdin}})
	if err != nil {
		t.Fatalf("at the bound: %v", err)
	}
	if res.ExitCode != api.MaxExecStdin%256 {
		t.Fatalf("server saw a different stdin length")
	}
}

func TestReadBuildStream(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		events  int
		wantErr error
	}{
		{"done", lines(`{"type":"progress","message":"x"}`, `{"type":"done","image":{"name":"base","digest":"sha256:ab"}}`), 2, nil},
		{"error", lines(`{"type":"error","error":{"code":"resource_exhausted","message":"disk full"}}`), 1, ErrResourceExhausted},
		{"no done", lines(`{"type":"log","message":"x"}`), 1, ErrUnavailable},
		{"done without image", lines(`{"type":"done"}`), 1, ErrUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := 0
			img, err := readBuildStream(strings.NewReader(tt.in), func(api.BuildEvent) { n++ })
			if n != tt.events {
				t.Errorf("progress called %d times, want %d", n, tt.events)
			}
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil || img.Name != "base" {
				t.Fatalf("img %+v err %v", img, err)
			}
		})
	}
}

func FuzzReadExecStream(f *testing.F) {
	f.Add([]byte(lines(`{"type":"start","pid":7}`, `{"type":"stdout","data":"aGk="}`, `{"type":"end","exit_code":0}`)))
	f.Add([]byte(lines(`{"type":"end","error":{"code":"x","message":"y"}}`)))
	f.Add([]byte(`{"type":"stdout","data":` + strings.Repeat("[", 1000)))
	f.Add([]byte("\n\n\x00\xff{"))
	f.Fuzz(func(t *testing.T, in []byte) {
		var out bytes.Buffer
		res, err := readExecStream(bytes.NewReader(in), &out, &out)
		if (res == nil) == (err == nil) {
			t.Fatalf("exactly one of result and error must be set: %+v, %v", res, err)
		}
		if res != nil && !bytes.Contains(in, []byte(`end`)) && !bytes.Contains(in, []byte(`\u`)) {
			t.Fatalf("a result without an end event in the input: %+v", res)
		}
		if out.Len() > len(in) {
			t.Fatalf("wrote %d bytes from %d bytes of input", out.Len(), len(in))
		}
	})
}

func FuzzEventReader(f *testing.F) {
	f.Add([]byte(lines(`{"type":"log"}`, `{}`)), 16)
	f.Add([]byte(strings.Repeat("x", 300)+"\n{}\n"), 64)
	f.Fuzz(func(t *testing.T, in []byte, max int) {
		if max < 1 || max > 1<<16 {
			return
		}
		er := newEventReader(bytes.NewReader(in), max)
		for i := 0; ; i++ {
			var v map[string]any
			line, err := er.readLine()
			if err != nil {
				break
			}
			if len(line) > max {
				t.Fatalf("line of %d bytes over the bound %d", len(line), max)
			}
			_ = json.Unmarshal(line, &v)
			if i > len(in)+1 {
				t.Fatal("more lines than input bytes")
			}
		}
	})
}
