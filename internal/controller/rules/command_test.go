package rules

import (
	"errors"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/errdefs"
)

func TestExec(t *testing.T) {
	ok := []api.ExecRequest{
		{Cmd: []string{"true"}},
		{Cmd: []string{"sh", "-c", "x"}, Env: map[string]string{"A_1": "v"}, User: "1000:1000", Cwd: "/tmp"},
		{Cmd: []string{"id"}, User: "root:wheel"},
	}
	for _, req := range ok {
		if err := Exec(&req); err != nil {
			t.Errorf("Exec(%+v): %v", req, err)
		}
	}
	bad := map[string]api.ExecRequest{
		"empty":          {},
		"empty program":  {Cmd: []string{""}},
		"NUL argument":   {Cmd: []string{"a\x00b"}},
		"too many args":  {Cmd: make([]string, MaxCmdArgs+1)},
		"too long":       {Cmd: []string{strings.Repeat("x", MaxCmdBytes+1)}},
		"user":           {Cmd: []string{"true"}, User: "Bad User"},
		"cwd":            {Cmd: []string{"true"}, Cwd: "a\x00"},
		"env name":       {Cmd: []string{"true"}, Env: map[string]string{"1A": "v"}},
		"agent variable": {Cmd: []string{"true"}, Env: map[string]string{"PADDOCK_AGENT_TOKEN": "x"}},
		"stdin":          {Cmd: []string{"true"}, Stdin: make([]byte, api.MaxExecStdin+1)},
	}
	bad["too many args"].Cmd[0] = "x"
	for name, req := range bad {
		if err := Exec(&req); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("%s: %v, want invalid argument", name, err)
		}
	}
}

func TestEnvBounds(t *testing.T) {
	many := map[string]string{}
	for i := 0; i <= maxEnv; i++ {
		many["V"+strings.Repeat("x", i)] = ""
	}
	for name, env := range map[string]map[string]string{
		"too many":  many,
		"long":      {"A": strings.Repeat("x", maxEnvValue+1)},
		"NUL value": {"A": "a\x00"},
	} {
		if err := Env(env); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("%s: %v, want invalid argument", name, err)
		}
	}
	if err := Env(map[string]string{"PATH": "/bin", "_x": ""}); err != nil {
		t.Errorf("plain environment refused: %v", err)
	}
	if !ValidEnvName("A_b9") || ValidEnvName("a-b") || !ValidUser("user") || ValidUser("a b") {
		t.Error("ValidEnvName or ValidUser disagree with their shapes")
	}
}
