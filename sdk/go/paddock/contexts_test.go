package paddock

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func TestReadRunStream(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		wantOut string
		wantErr error
		check   func(t *testing.T, r *RunCodeResult)
	}{
		{"full", `{"type":"start","execution_count":2}
{"type":"stdout","data":"aGk="}
{"type":"result","result":{"text/plain":"42"},"main":true}
{"type":"end","status":"ok","duration_ms":5}
`, "hi", nil, func(t *testing.T, r *RunCodeResult) {
			m, ok := r.Main()
			if !ok || m.Text() != "42" || r.ExecutionCount != 2 || r.Status != "ok" {
				t.Fatalf("%+v", r)
			}
		}},
		{"error", `{"type":"start"}
{"type":"error","error":{"name":"ValueError","value":"x","traceback":"tb"}}
{"type":"end","status":"error"}`, "", nil, func(t *testing.T, r *RunCodeResult) {
			if r.Error == nil || r.Error.Name != "ValueError" || r.Status != "error" {
				t.Fatalf("%+v", r)
			}
		}},
		{"no end", `{"type":"start"}` + "\n", "", ErrUnavailable, nil},
		{"garbage", "{not json\n", "", ErrUnavailable, nil},
		{"empty", "", "", ErrUnavailable, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			r, err := readRunStream(strings.NewReader(tc.in), RunCodeOptions{Stdout: &out})
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if out.String() != tc.wantOut {
				t.Fatalf("stdout %q", out.String())
			}
			tc.check(t, r)
		})
	}
}

func FuzzReadRunStream(f *testing.F) {
	f.Add([]byte(`{"type":"start"}` + "\n" + `{"type":"result","result":{"a":"b"}}` + "\n" + `{"type":"end","status":"ok"}`))
	f.Add([]byte("\n\n{\"type\":\"stdout\",\"data\":\"!!\"}\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := readRunStream(bytes.NewReader(b), RunCodeOptions{})
		if err == nil && r == nil {
			t.Fatal("nil result without an error")
		}
	})
}
