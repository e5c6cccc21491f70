package mcp

import (
	"context"
	"fmt"
	"strings"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/paddock-dev/paddock/api"
)

// maxToolProcs bounds list_all_processes: a model needs the gist, not a
// fork bomb's thousands of lines.
const maxToolProcs = 200

// SandboxInput names a sandbox only.
type SandboxInput struct {
	Sandbox string `json:"sandbox,omitempty" jsonschema:"sandbox id or name; empty means this session's default sandbox"`
}

// ProcEntry is one process of list_all_processes.
type ProcEntry struct {
	Pid     int    `json:"pid"`
	PPid    int    `json:"ppid"`
	User    string `json:"user"`
	State   string `json:"state" jsonschema:"R running, S sleeping, D uninterruptible, Z zombie, T stopped"`
	Command string `json:"command"`
	Age     string `json:"age"`
	RSS     int64  `json:"rss_bytes"`
	Agent   bool   `json:"agent,omitempty" jsonschema:"Paddock's agent (PID 1); never killed"`
}

// ProcsOutput is list_all_processes's output.
type ProcsOutput struct {
	Processes []ProcEntry `json:"processes"`
	Total     int         `json:"total"`
	Note      string      `json:"note,omitempty"`
}

// KillAllOutput is kill_all_processes's output.
type KillAllOutput struct {
	Killed    int         `json:"killed"`
	Remaining []ProcEntry `json:"remaining"`
}

func (s *Server) addProcsTools() {
	mcpsdk.AddTool(s.srv, &mcpsdk.Tool{
		Name:  "list_all_processes",
		Title: "List every process in the sandbox",
		Description: `List every process running in the sandbox (like ps), not only those start_process started: also what an exec left running in the background (cmd &), shells and servers. The agent (pid 1) keeps the sandbox working and is never killed.
Use it to find a leftover server holding a port, or a runaway process. Cheap.`,
		Annotations: &mcpsdk.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: ptr(false)},
	}, s.listAllProcesses)
	mcpsdk.AddTool(s.srv, &mcpsdk.Tool{
		Name:  "kill_all_processes",
		Title: "Kill every process in the sandbox",
		Description: `Kill every process in the sandbox except its agent, with SIGKILL: leftover servers, background processes, runaway loops, fork bombs. Files are kept and the sandbox keeps working: exec and start_process work right after.
Use it to get back to a clean sandbox without destroying it.`,
		Annotations: &mcpsdk.ToolAnnotations{DestructiveHint: ptr(true), IdempotentHint: true, OpenWorldHint: ptr(false)},
	}, s.killAllProcesses)
}

func procEntries(list []api.Proc, now time.Time) []ProcEntry {
	out := make([]ProcEntry, 0, min(len(list), maxToolProcs))
	for _, p := range list[:min(len(list), maxToolProcs)] {
		cmd := strings.Join(p.Cmd, " ")
		if cmd == "" {
			cmd = "[" + p.Comm + "]"
		}
		user := p.User
		if user == "" {
			user = fmt.Sprint(p.UID)
		}
		age := "-"
		if !p.StartedAt.IsZero() {
			age = now.Sub(p.StartedAt).Round(time.Second).String()
		}
		out = append(out, ProcEntry{Pid: p.Pid, PPid: p.PPid, User: user, State: p.State, Command: cmd, Age: age, RSS: p.RSSBytes, Agent: p.Agent})
	}
	return out
}

func (s *Server) listAllProcesses(ctx context.Context, req *mcpsdk.CallToolRequest, in SandboxInput) (*mcpsdk.CallToolResult, ProcsOutput, error) {
	id, err := s.resolve(ctx, req, in.Sandbox)
	if err != nil {
		return nil, ProcsOutput{}, err
	}
	list, err := s.c.Procs(ctx, id)
	if err != nil {
		return nil, ProcsOutput{}, toolError("list_all_processes failed", err)
	}
	out := ProcsOutput{Processes: procEntries(list.Procs, time.Now()), Total: len(list.Procs)}
	if len(list.Procs) > maxToolProcs || list.Truncated {
		out.Note = fmt.Sprintf("only the first %d processes by pid are listed; kill_all_processes ends them all", len(out.Processes))
	}
	return nil, out, nil
}

func (s *Server) killAllProcesses(ctx context.Context, req *mcpsdk.CallToolRequest, in SandboxInput) (*mcpsdk.CallToolResult, KillAllOutput, error) {
	id, err := s.resolve(ctx, req, in.Sandbox)
	if err != nil {
		return nil, KillAllOutput{}, err
	}
	res, err := s.c.KillAll(ctx, id, api.KillAllRequest{})
	if err != nil {
		return nil, KillAllOutput{}, toolError("kill_all_processes failed", err)
	}
	return nil, KillAllOutput{Killed: res.Killed, Remaining: procEntries(res.Remaining, time.Now())}, nil
}
