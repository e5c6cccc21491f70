package paddock

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func TestReadLogStream(t *testing.T) {
	end := `{"type":"end","process":{"id":"web","pid":7,"cmd":["x"],"status":"exited","exit_code":0,"started_at":"2026-01-01T00:00:00Z","stdout":{"start":0,"end":3,"truncated":false,"capacity":4096},"stderr":{"start":0,"end":0,"truncated":false,"capacity":4096}}}`
	cases := []struct {
		name            string
		stream          string
		follow          bool
		stdout, stderr  string
		dropped, outOff int64
		ended           bool
		wantErr         error
	}{
		{"output and gap", lines(`{"type":"gap","stream":"stdout","offset":0,"dropped":5}`, `{"type":"stdout","offset":5,"data":"aGk="}`, `{"type":"stderr","offset":0,"data":"eA=="}`),
			false, "hi", "x", 5, 7, false, nil},
		{"followed to the end", lines(`{"type":"stdout","offset":0,"data":"YWJj"}`, end), true, "abc", "", 0, 3, true, nil},
		// A followed stream that stops without an end must never look
		// like the process ended.
		{"follow cut short", lines(`{"type":"stdout","offset":0,"data":"YWJj"}`), true, "abc", "", 0, 3, false, ErrUnavailable},
		{"end without a process", lines(`{"type":"end"}`), true, "", "", 0, 0, false, ErrUnavailable},
		{"garbage", "not json\n", false, "", "", 0, 0, false, ErrUnavailable},
		{"unknown events are skipped", lines(`{"type":"future"}`), false, "", "", 0, 0, false, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			res, err := readLogStream(strings.NewReader(c.stream), LogsOptions{Follow: c.follow, Stdout: &out, Stderr: &errOut})
			if c.wantErr != nil {
				if !errors.Is(err, c.wantErr) {
					t.Fatalf("err %v, want %v", err, c.wantErr)
				}
				if res.Process != nil {
					t.Fatal("a failed stream reported the process's end")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if out.String() != c.stdout || errOut.String() != c.stderr || res.Dropped != c.dropped || res.StdoutOffset != c.outOff || (res.Process != nil) != c.ended {
				t.Fatalf("got %q %q %+v", out.String(), errOut.String(), res)
			}
		})
	}
}

func FuzzReadLogStream(f *testing.F) {
	f.Add([]byte(`{"type":"stdout","offset":0,"data":"aGk="}`+"\n"), true)
	f.Add([]byte(`{"type":"end","process":{"id":"x","status":"exited"}}`+"\n"), false)
	f.Add([]byte(`{"type":"gap","dropped":-3}`), true)
	f.Fuzz(func(t *testing.T, in []byte, follow bool) {
		res, err := readLogStream(bytes.NewReader(in), LogsOptions{Follow: follow})
		if res == nil {
			t.Fatal("nil result")
		}
		if err != nil && res.Process != nil {
			t.Fatal("an error and an ended process at once")
		}
		if follow && err == nil && res.Process == nil {
			t.Fatal("a followed stream ended without the process's end and without an error")
		}
		if res.Dropped < 0 {
			t.Fatal("negative dropped count")
		}
	})
}
