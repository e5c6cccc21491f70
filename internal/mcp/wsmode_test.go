package mcp

import (
	"context"
	"strings"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestProgramError(t *testing.T) {
	for in, want := range map[string]string{
		"Uncaught Error: ENOENT: no such file or directory, stat '/workspace/x'\n\tat <eval>:4:13(12)\n": "ENOENT: no such file or directory, stat '/workspace/x'",
		"Uncaught TypeError: x is not a function\n":                                                      "TypeError: x is not a function",
		"":                        "the workspace program failed without a message",
		strings.Repeat("é", 2000): strings.Repeat("é", 500),
	} {
		if got := programError(in); got != want {
			t.Errorf("programError(%.40q) = %.60q, want %.60q", in, got, want)
		}
	}
}

func TestEditRefusal(t *testing.T) {
	for _, c := range []struct {
		n       int
		trimmed bool
		want    string
	}{
		{0, false, "was not found in f; nothing was changed (read_file"},
		{0, true, "different leading or trailing whitespace"},
		{3, false, "occurs 3 times in f; nothing was changed"},
	} {
		if got := editRefusal("f", c.n, c.trimmed).Error(); !strings.Contains(got, c.want) {
			t.Errorf("editRefusal(%d, %v) = %q, want it to contain %q", c.n, c.trimmed, got, c.want)
		}
	}
}

// TestWorkspaceModeTools: a workspace-mode server offers the workspace's
// tools and no sandbox tools.
func TestWorkspaceModeTools(t *testing.T) {
	for _, mode := range []struct {
		ws        string
		has, lack []string
	}{
		{"w", []string{"run", "read_file", "edit_file", "history", "rollback"}, []string{"exec", "sandbox_create", "workspace_run"}},
		{"", []string{"exec", "sandbox_create", "workspace_run", "read_file"}, []string{"run", "history"}},
	} {
		names := toolNames(t, New(Options{Workspace: mode.ws}))
		for _, n := range mode.has {
			if !names[n] {
				t.Errorf("workspace %q: no %s tool", mode.ws, n)
			}
		}
		for _, n := range mode.lack {
			if names[n] {
				t.Errorf("workspace %q: has a %s tool", mode.ws, n)
			}
		}
	}
}

// toolNames lists the tools s offers to a client connected in memory.
func toolNames(t *testing.T, s *Server) map[string]bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, ct := mcpsdk.NewInMemoryTransports()
	ss, err := s.MCP().Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	cs, err := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, tl := range res.Tools {
		names[tl.Name] = true
	}
	return names
}
