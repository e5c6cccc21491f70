package e2b

import (
	"bytes"
	"encoding/binary"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/proto/gen/filesystem"
	"github.com/paddock-dev/paddock/proto/gen/process"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

func envelope(flags byte, msg []byte) []byte {
	b := make([]byte, 5, 5+len(msg))
	b[0] = flags
	binary.BigEndian.PutUint32(b[1:], uint32(len(msg)))
	return append(b, msg...)
}

func mustProto(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustJSON(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := protojson.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDecodeEnvdRequest(t *testing.T) {
	cwd := "/work"
	start := &process.StartRequest{
		Process: &process.ProcessConfig{Cmd: "/bin/bash", Args: []string{"-l", "-c", "echo hi"}, Envs: map[string]string{"TOKEN": "v"}, Cwd: &cwd},
		Tag:     proto.String("job-1"),
		Pty:     &process.PTY{Size: &process.PTY_Size{Cols: 80, Rows: 24}},
	}
	startProto, startJSON := mustProto(t, start), mustJSON(t, start)
	mkdir := &filesystem.MakeDirRequest{Path: "/home/user/d"}
	move := &filesystem.MoveRequest{Source: "/a", Destination: "/b"}
	remove := &filesystem.RemoveRequest{Path: "/home/user/x"}
	big := bytes.Repeat([]byte{1}, maxEnvdMessage+1)

	cases := []struct {
		name, path, ctype string
		body              []byte
		complete, zipped  bool
		why               string // "" = decoded
		check             func(t *testing.T, c envdCall)
	}{
		{name: "start, Connect streaming, protobuf", path: "/process.Process/Start", ctype: "application/connect+proto",
			body: envelope(0, startProto), check: func(t *testing.T, c envdCall) {
				if !slices.Equal(c.cmd, []string{"/bin/bash", "-l", "-c", "echo hi"}) || c.cwd != "/work" || c.tag != "job-1" || !c.pty || c.env["TOKEN"] != "v" {
					t.Errorf("call = %+v", c)
				}
			}},
		{name: "start, Connect streaming, JSON", path: "/process.Process/Start", ctype: "application/connect+json",
			body: envelope(0, startJSON), check: func(t *testing.T, c envdCall) {
				if len(c.cmd) != 4 || c.cmd[3] != "echo hi" || c.kind != api.LedgerProcessStart || c.method != "process.Process/Start" {
					t.Errorf("call = %+v", c)
				}
			}},
		{name: "start, gRPC-Web, the rest of the stream not yet received", path: "/process.Process/Start", ctype: "application/grpc-web+proto",
			body: append(envelope(0, startProto), 0, 0), check: func(t *testing.T, c envdCall) {
				if len(c.cmd) != 4 {
					t.Errorf("call = %+v", c)
				}
			}},
		{name: "mkdir, unary JSON with charset", path: "/filesystem.Filesystem/MakeDir", ctype: "application/json; charset=utf-8",
			body: mustJSON(t, mkdir), complete: true, check: func(t *testing.T, c envdCall) {
				if c.path != "/home/user/d" || c.kind != api.LedgerMkdir {
					t.Errorf("call = %+v", c)
				}
			}},
		{name: "move, unary protobuf", path: "/filesystem.Filesystem/Move", ctype: "application/proto",
			body: mustProto(t, move), complete: true, check: func(t *testing.T, c envdCall) {
				if c.path != "/b" || c.source != "/a" || c.kind != api.LedgerFileMove {
					t.Errorf("call = %+v", c)
				}
			}},
		{name: "remove, unknown fields ignored", path: "/filesystem.Filesystem/Remove", ctype: "application/json",
			body: []byte(`{"path":"/home/user/x","futureField":1}`), complete: true, check: func(t *testing.T, c envdCall) {
				if c.path != remove.Path {
					t.Errorf("call = %+v", c)
				}
			}},
		{name: "unary compressed", path: "/filesystem.Filesystem/Remove", ctype: "application/proto", body: []byte{1}, complete: true, zipped: true, why: "compressed"},
		{name: "unary larger than decoded", path: "/filesystem.Filesystem/Remove", ctype: "application/proto", body: mustProto(t, remove), why: "larger"},
		{name: "enveloped compressed", path: "/process.Process/Start", ctype: "application/connect+proto", body: envelope(1, startProto), why: "compressed"},
		{name: "enveloped too large", path: "/process.Process/Start", ctype: "application/connect+proto", body: envelope(0, big)[:100], why: "larger"},
		{name: "enveloped cut short", path: "/process.Process/Start", ctype: "application/connect+proto", body: envelope(0, startProto)[:10], why: "whole"},
		{name: "no message", path: "/process.Process/Start", ctype: "application/connect+proto", body: []byte{0, 0}, why: "not received"},
		{name: "unknown encoding", path: "/process.Process/Start", ctype: "application/grpc-web-text", body: []byte("AAAA"), why: "encoding"},
		{name: "not a content type", path: "/process.Process/Start", ctype: ";;", body: nil, why: "encoding"},
		{name: "garbage", path: "/filesystem.Filesystem/MakeDir", ctype: "application/proto", body: []byte{0xff, 0xff, 0xff}, complete: true, why: "not a valid message"},
		{name: "garbage JSON", path: "/filesystem.Filesystem/MakeDir", ctype: "application/json", body: []byte(`{"path":`), complete: true, why: "not a valid message"},
		{name: "not recorded", path: "/filesystem.Filesystem/Stat", ctype: "application/json", body: []byte(`{}`), complete: true, why: "not a recorded"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := decodeEnvdRequest(tc.path, tc.ctype, tc.body, tc.complete, tc.zipped)
			if tc.why == "" {
				if c.why != "" {
					t.Fatalf("not decoded: %s", c.why)
				}
				tc.check(t, c)
				return
			}
			if !strings.Contains(c.why, tc.why) || c.cmd != nil || c.path != "" {
				t.Fatalf("call = %+v, want it undecoded saying %q", c, tc.why)
			}
		})
	}
}

func TestUploadPaths(t *testing.T) {
	for _, tc := range []struct {
		body string
		want []string
	}{
		{`[{"path":"/home/user/a","name":"a","type":"file"},{"path":"/b"}]`, []string{"/home/user/a", "/b"}},
		{`[]`, []string{}},
		{`[{"name":"no path"}]`, []string{}},
		{`{"code":400,"message":"x"}`, nil},
		{`[{"path":`, nil},
	} {
		got := uploadPaths([]byte(tc.body))
		if !slices.Equal(got, tc.want) || (got == nil) != (tc.want == nil) {
			t.Errorf("uploadPaths(%s) = %#v, want %#v", tc.body, got, tc.want)
		}
	}
}

// TestCapture: the relayed bytes are exactly the original ones, at most
// max are kept, and done runs once.
func TestCapture(t *testing.T) {
	for _, tc := range []struct {
		name     string
		size     int
		complete bool
	}{
		{"small", 10, true},
		{"exactly the bound", 64, true},
		{"over the bound", 1000, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := bytes.Repeat([]byte("0123456789"), tc.size/10+1)[:tc.size]
			calls := 0
			c := newCapture(io.NopCloser(bytes.NewReader(src)), 64, func(*capture) { calls++ })
			var out bytes.Buffer
			buf := make([]byte, 7) // small reads, as a relay may do
			for {
				n, err := c.Read(buf)
				out.Write(buf[:n])
				if err != nil {
					break
				}
			}
			_ = c.Close()
			kept, complete := c.seen()
			if !bytes.Equal(out.Bytes(), src) || len(kept) > 64 || !bytes.Equal(kept, src[:len(kept)]) || complete != tc.complete || calls != 1 {
				t.Fatalf("relayed %d of %d bytes, kept %d, complete %v, done %d times", out.Len(), len(src), len(kept), complete, calls)
			}
		})
	}
}

// FuzzDecodeEnvdRequest: hostile bytes never crash the decoder, and what it
// returns is bounded by what it was given.
func FuzzDecodeEnvdRequest(f *testing.F) {
	start, _ := proto.Marshal(&process.StartRequest{Process: &process.ProcessConfig{Cmd: "ls", Args: []string{"-l"}}})
	f.Add(0, "application/connect+proto", envelope(0, start), false, false)
	f.Add(0, "application/connect+json", envelope(0, []byte(`{"process":{"cmd":"ls"}}`)), false, false)
	f.Add(1, "application/json", []byte(`{"path":"/x"}`), true, false)
	f.Add(2, "application/proto", []byte{10, 1, 'a', 18, 1, 'b'}, true, false)
	f.Add(3, "application/grpc", []byte{0, 0, 0, 0, 3, 10, 1, 'x'}, false, true)
	paths := []string{"/process.Process/Start", "/filesystem.Filesystem/MakeDir", "/filesystem.Filesystem/Move", "/filesystem.Filesystem/Remove"}
	f.Fuzz(func(t *testing.T, which int, ctype string, body []byte, complete, zipped bool) {
		if which < 0 {
			which = -which
		}
		c := decodeEnvdRequest(paths[which%len(paths)], ctype, body, complete, zipped)
		n := len(c.path) + len(c.source) + len(c.cwd) + len(c.tag)
		for _, a := range c.cmd {
			n += len(a)
		}
		if n > len(body) {
			t.Fatalf("decoded %d bytes of text from a %d-byte body", n, len(body))
		}
		if c.why == "" && c.kind == "" {
			t.Fatalf("decoded a call without a kind: %+v", c)
		}
		_ = uploadPaths(body)
	})
}
