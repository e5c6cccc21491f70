package cli

import (
	"strings"
	"testing"

	"github.com/paddock-dev/paddock/sdk/go/paddock"
)

func TestParseSizeMiB(t *testing.T) {
	tests := []struct {
		in      string
		want    int64
		wantErr string
	}{
		{"512M", 512, ""},
		{"512", 512, ""},
		{"512mb", 512, ""},
		{"512MiB", 512, ""},
		{"2G", 2048, ""},
		{"1GiB", 1024, ""},
		{"1.5g", 1536, ""},
		{"1T", 1 << 20, ""},
		{"2048K", 2, ""},
		{"1500K", 2, ""}, // rounds up to whole MiB
		{" 64M ", 64, ""},
		{"0", 0, "at least 1MiB"},
		{"1K", 1, ""},
		{"", 0, "not a size"},
		{"-1G", 0, "not a size"},
		{"abc", 0, "not a size"},
		{"12Q", 0, `unknown unit "Q"`},
		{"1e3M", 0, "not a size"},
		{"99999999T", 0, "too large"},
		{"1.G", 0, "not a size"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parseSizeMiB("memory", tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), "512M, 2G or 1GiB") {
					t.Fatalf("err = %v, want one containing %q and the expected format", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %d, %v; want %d", got, err, tt.want)
			}
		})
	}
}

func TestParseEnv(t *testing.T) {
	t.Setenv("PADDOCK_TEST_FROM_HOST", "host value")
	tests := []struct {
		in      []string
		want    map[string]string
		wantErr string
	}{
		{nil, nil, ""},
		{[]string{"A=1", "B_2=x=y", "EMPTY="}, map[string]string{"A": "1", "B_2": "x=y", "EMPTY": ""}, ""},
		{[]string{"PADDOCK_TEST_FROM_HOST"}, map[string]string{"PADDOCK_TEST_FROM_HOST": "host value"}, ""},
		{[]string{"PADDOCK_TEST_UNSET_XYZ"}, nil, "is not set here"},
		{[]string{"=1"}, nil, "want NAME=value"},
		{[]string{"1A=1"}, nil, "want NAME=value"},
		{[]string{"A-B=1"}, nil, "want NAME=value"},
		{[]string{"A=1", "A=2"}, nil, "given twice"},
		{[]string{"A=a\x00b"}, nil, "NUL"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.in, ","), func(t *testing.T) {
			got, err := parseEnv("env", tt.in)
			checkMap(t, got, err, tt.want, tt.wantErr)
		})
	}
}

func TestParseLabels(t *testing.T) {
	tests := []struct {
		in      []string
		want    map[string]string
		wantErr string
	}{
		{[]string{"team=infra", "paddock.dev/x=a=b", "empty="}, map[string]string{"team": "infra", "paddock.dev/x": "a=b", "empty": ""}, ""},
		{[]string{"novalue"}, nil, "want key=value"},
		{[]string{"=v"}, nil, "want key=value"},
		{[]string{"-k=v"}, nil, "want key=value"},
		{[]string{"k=" + strings.Repeat("v", 257)}, nil, "longer than 256"},
		{[]string{"k=a\nb"}, nil, "newline"},
		{[]string{"k=1", "k=2"}, nil, "given twice"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.in, ","), func(t *testing.T) {
			got, err := parseLabels("label", tt.in)
			checkMap(t, got, err, tt.want, tt.wantErr)
		})
	}
}

func checkMap(t *testing.T, got map[string]string, err error, want map[string]string, wantErr string) {
	t.Helper()
	if wantErr != "" {
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Fatalf("err = %v, want one containing %q", err, wantErr)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
}

func TestParseCpArgs(t *testing.T) {
	tests := []struct {
		src, dst string
		wantSrc  cpArg
		wantDst  cpArg
		wantErr  string
	}{
		{"./dir", "dev:/home/user/dir", cpArg{path: "./dir"}, cpArg{sandbox: "dev", path: "/home/user/dir"}, ""},
		{"dev:/etc/os-release", ".", cpArg{sandbox: "dev", path: "/etc/os-release"}, cpArg{path: "."}, ""},
		{"file.txt", "abc123:/tmp/", cpArg{path: "file.txt"}, cpArg{sandbox: "abc123", path: "/tmp/"}, ""},
		{"/abs/a:b", "sb.1_x-y:/a:b", cpArg{path: "/abs/a:b"}, cpArg{sandbox: "sb.1_x-y", path: "/a:b"}, ""},
		{"./a:b", "dev:/x", cpArg{path: "./a:b"}, cpArg{sandbox: "dev", path: "/x"}, ""},
		{"dev:/a", "-", cpArg{sandbox: "dev", path: "/a"}, cpArg{path: "-"}, ""},
		{"dev:/a", "other:/b", cpArg{}, cpArg{}, "both sides"},
		{"a", "b", cpArg{}, cpArg{}, "neither side"},
		{"dir/x:y", "b", cpArg{}, cpArg{}, "neither side"},
		{"dev:", "./x", cpArg{}, cpArg{}, "empty path"},
		{"dev:notes.txt", "./x", cpArg{sandbox: "dev", path: "notes.txt"}, cpArg{path: "./x"}, ""},
		{"./x", "dev:/a\x00", cpArg{}, cpArg{}, "NUL"},
		{"", "dev:/a", cpArg{}, cpArg{}, "empty path"},
	}
	for _, tt := range tests {
		t.Run(tt.src+" "+tt.dst, func(t *testing.T) {
			s, d, err := parseCpArgs(tt.src, tt.dst)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || s != tt.wantSrc || d != tt.wantDst {
				t.Fatalf("got %+v %+v %v", s, d, err)
			}
		})
	}
}

func TestExitCode(t *testing.T) {
	tests := []struct {
		name string
		res  paddock.ExecResult
		want int
	}{
		{"success", paddock.ExecResult{}, 0},
		{"failure", paddock.ExecResult{ExitCode: 3}, 3},
		{"max", paddock.ExecResult{ExitCode: 255}, 255},
		{"SIGKILL", paddock.ExecResult{ExitCode: -1, Signal: "SIGKILL"}, 137},
		{"KILL", paddock.ExecResult{ExitCode: -1, Signal: "KILL"}, 137},
		{"go name", paddock.ExecResult{ExitCode: -1, Signal: "terminated"}, 143},
		{"number", paddock.ExecResult{ExitCode: -1, Signal: "2"}, 130},
		{"sigsegv lower", paddock.ExecResult{ExitCode: -1, Signal: "sigsegv"}, 139},
		{"timed out wins", paddock.ExecResult{ExitCode: -1, Signal: "SIGKILL", TimedOut: true}, 124},
		{"unknown signal", paddock.ExecResult{ExitCode: -1, Signal: "SIGWHAT"}, 255},
		{"negative without signal", paddock.ExecResult{ExitCode: -1}, 255},
		{"out of range", paddock.ExecResult{ExitCode: 300}, 255},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := exitCode(&tt.res); got != tt.want {
				t.Fatalf("exitCode(%+v) = %d, want %d", tt.res, got, tt.want)
			}
		})
	}
}

func TestCreateFlagsRequest(t *testing.T) {
	tests := []struct {
		name    string
		f       createFlags
		wantErr string
		check   func(t *testing.T, f createFlags)
	}{
		{name: "empty is valid", f: createFlags{}},
		{name: "bad runtime", f: createFlags{runtime: "kata"}, wantErr: "want runc, gvisor or crun"},
		{name: "bad name", f: createFlags{name: "-x"}, wantErr: "--name"},
		{name: "negative cpu", f: createFlags{resourceFlags: resourceFlags{cpu: -1}}, wantErr: "--cpu"},
		{name: "bad disk", f: createFlags{resourceFlags: resourceFlags{disk: "lots"}}, wantErr: "--disk"},
		{name: "negative pids", f: createFlags{resourceFlags: resourceFlags{pids: -1}}, wantErr: "--pids"},
		{name: "sleep and keep alive", f: createFlags{sleepAfter: 1, keepAlive: true}, wantErr: "contradict"},
		{name: "negative timeout", f: createFlags{timeout: -1}, wantErr: "--timeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.f.request()
			if tt.wantErr == "" && err != nil {
				t.Fatal(err)
			}
			if tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}
