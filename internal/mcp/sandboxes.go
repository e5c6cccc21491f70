package mcp

import (
	"context"
	"errors"
	"fmt"
	"strings"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/sdk/go/paddock"
)

// SandboxInfo is what the tools say about one sandbox.
type SandboxInfo struct {
	ID    string `json:"id" jsonschema:"the sandbox id; pass it as sandbox to other tools"`
	Name  string `json:"name,omitempty" jsonschema:"the sandbox name, usable instead of the id"`
	State string `json:"state" jsonschema:"creating, running, paused, hibernated (memory on disk; restored on next use), stopped (starts again on next use), error or destroyed"`
	// ErrorReason says why a sandbox is in state error (e.g. "out of memory").
	ErrorReason string            `json:"error_reason,omitempty" jsonschema:"why the sandbox is in state error, e.g. out of memory or agent exited: signal 15; its files are kept and paddock start (CLI or API) brings it back"`
	Image       string            `json:"image"`
	Runtime     string            `json:"runtime" jsonschema:"runc (containers) or gvisor (a user-space kernel between the code and the host)"`
	Resources   api.Resources     `json:"resources"`
	Labels      map[string]string `json:"labels,omitempty"`
	// Default is true for this session's default sandbox.
	Default bool `json:"default,omitempty" jsonschema:"true for this session's default sandbox (used when a tool names none; destroyed when the session ends)"`
}

func info(sb *api.Sandbox, defaultID string) SandboxInfo {
	return SandboxInfo{ID: sb.ID, Name: sb.Name, State: sb.State, ErrorReason: sb.ErrorReason, Image: sb.Image, Runtime: sb.Runtime,
		Resources: sb.Resources, Labels: sb.Labels, Default: defaultID != "" && (sb.ID == defaultID || sb.Name == defaultID)}
}

// CreateInput is sandbox_create's input.
type CreateInput struct {
	Name       string            `json:"name,omitempty" jsonschema:"optional unique name: 1-63 letters, digits, '-', '_', '.'"`
	Image      string            `json:"image,omitempty" jsonschema:"base (Debian with python3, bash, git, curl; the default) or busybox (tiny, starts fastest) or sha256:<digest>"`
	Runtime    string            `json:"runtime,omitempty" jsonschema:"runc (default) or gvisor (stronger isolation, slower system calls)"`
	CPU        float64           `json:"cpu,omitempty" jsonschema:"vCPUs, e.g. 0.5 or 2; default: the daemon's"`
	MemoryMB   int64             `json:"memory_mb,omitempty" jsonschema:"memory limit in MiB; default: the daemon's"`
	DiskMB     int64             `json:"disk_mb,omitempty" jsonschema:"cap on the files the sandbox may write, in MiB"`
	Pids       int64             `json:"pids,omitempty" jsonschema:"process and thread limit"`
	Env        map[string]string `json:"env,omitempty" jsonschema:"environment variables for every command"`
	Labels     map[string]string `json:"labels,omitempty" jsonschema:"labels to find the sandbox by with sandbox_list"`
	SleepAfter string            `json:"sleep_after,omitempty" jsonschema:"stop after being idle this long (Go duration, e.g. 10m; files are kept and it starts again on next use)"`
	Timeout    string            `json:"timeout,omitempty" jsonschema:"hard lifetime (Go duration, e.g. 2h); at its end the sandbox is destroyed"`
	Template   string            `json:"template,omitempty" jsonschema:"create from this built template (its files, env and start command) instead of an image"`
	Size       string            `json:"size,omitempty" jsonschema:"size preset: lite, basic, standard-1 .. standard-4; cpu/memory_mb/disk_mb/pids override its fields"`
	AllowHosts []string          `json:"allow_hosts,omitempty" jsonschema:"give the sandbox egress to these host names only (globs like *.pypi.org), through Paddock's proxy on ports 80/443; default: no network at all"`
	DenyHosts  []string          `json:"deny_hosts,omitempty" jsonschema:"host names (globs) always refused, checked before allow_hosts"`
}

// SandboxOutput wraps one sandbox.
type SandboxOutput struct {
	Sandbox SandboxInfo `json:"sandbox"`
}

// ListInput is sandbox_list's input.
type ListInput struct {
	Labels map[string]string `json:"labels,omitempty" jsonschema:"only sandboxes carrying all of these labels"`
}

// ListOutput is sandbox_list's output.
type ListOutput struct {
	Sandboxes []SandboxInfo `json:"sandboxes"`
	Note      string        `json:"note,omitempty"`
}

// DestroyInput is sandbox_destroy's input.
type DestroyInput struct {
	Sandbox string `json:"sandbox" jsonschema:"id or name of the sandbox to destroy"`
}

// DestroyOutput is sandbox_destroy's output.
type DestroyOutput struct {
	Destroyed string `json:"destroyed"`
}

func (s *Server) addSandboxTools() {
	mcpsdk.AddTool(s.srv, &mcpsdk.Tool{
		Name:  "sandbox_create",
		Title: "Create a sandbox",
		Description: `Create a new isolated Linux sandbox and return its id. Takes about a second (the first use of an image may take longer).
You rarely need this: every tool works on this session's default sandbox when you leave "sandbox" empty. Create one when you need a different image, runtime or size, or several sandboxes side by side.
A sandbox made here outlives this session: destroy it with sandbox_destroy when you are done. It has no network access unless you list allow_hosts: then it reaches exactly those hosts (for example pypi.org and *.pythonhosted.org to pip install), on ports 80 and 443, through Paddock's proxy.`,
		Annotations: &mcpsdk.ToolAnnotations{OpenWorldHint: ptr(false)},
	}, s.sandboxCreate)
	mcpsdk.AddTool(s.srv, &mcpsdk.Tool{
		Name:        "sandbox_list",
		Title:       "List sandboxes",
		Description: `List the sandboxes on this Paddock daemon with their state, image and size. Cheap. The session's default sandbox is marked "default": true once it exists.`,
		Annotations: &mcpsdk.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: ptr(false)},
	}, s.sandboxList)
	mcpsdk.AddTool(s.srv, &mcpsdk.Tool{
		Name:  "sandbox_destroy",
		Title: "Destroy a sandbox",
		Description: `Destroy a sandbox and everything in it: its files, processes and state are gone for good. Takes under a second.
Destroying this session's default sandbox is allowed; the next call that names no sandbox then gets a fresh one.`,
		Annotations: &mcpsdk.ToolAnnotations{DestructiveHint: ptr(true), IdempotentHint: true, OpenWorldHint: ptr(false)},
	}, s.sandboxDestroy)
}

func ptr[T any](v T) *T { return &v }

func (s *Server) sandboxCreate(ctx context.Context, req *mcpsdk.CallToolRequest, in CreateInput) (*mcpsdk.CallToolResult, SandboxOutput, error) {
	cr := api.CreateSandboxRequest{
		Name: in.Name, Image: in.Image, Runtime: strings.ToLower(in.Runtime), Env: in.Env, Labels: in.Labels,
		Resources:  api.Resources{CPU: in.CPU, MemoryMB: in.MemoryMB, DiskMB: in.DiskMB, Pids: in.Pids},
		SleepAfter: in.SleepAfter, Timeout: in.Timeout, Template: in.Template, Size: in.Size,
	}
	if len(in.AllowHosts) > 0 || len(in.DenyHosts) > 0 {
		cr.Network = &api.NetworkPolicy{Mode: api.NetworkEgress, AllowHosts: in.AllowHosts, DenyHosts: in.DenyHosts}
	}
	if cr.Runtime == "runsc" {
		cr.Runtime = api.RuntimeGVisor
	}
	if cr.Resources.CPU < 0 || cr.Resources.MemoryMB < 0 || cr.Resources.DiskMB < 0 || cr.Resources.Pids < 0 {
		return nil, SandboxOutput{}, errors.New("cpu, memory_mb, disk_mb and pids must not be negative")
	}
	sb, err := s.c.Create(ctx, cr)
	if err != nil {
		return nil, SandboxOutput{}, toolError("sandbox_create failed", err)
	}
	return nil, SandboxOutput{Sandbox: info(sb, s.defaultOf(req))}, nil
}

func (s *Server) sandboxList(ctx context.Context, req *mcpsdk.CallToolRequest, in ListInput) (*mcpsdk.CallToolResult, ListOutput, error) {
	list, err := s.c.List(ctx, in.Labels)
	if err != nil {
		return nil, ListOutput{}, toolError("sandbox_list failed", err)
	}
	def := s.defaultOf(req)
	out := ListOutput{Sandboxes: make([]SandboxInfo, 0, min(len(list), maxListEntries))}
	for i := range list {
		if len(out.Sandboxes) == maxListEntries {
			out.Note = fmt.Sprintf("showing %d of %d sandboxes; filter with labels to see others", maxListEntries, len(list))
			break
		}
		out.Sandboxes = append(out.Sandboxes, info(&list[i], def))
	}
	return nil, out, nil
}

func (s *Server) sandboxDestroy(ctx context.Context, req *mcpsdk.CallToolRequest, in DestroyInput) (*mcpsdk.CallToolResult, DestroyOutput, error) {
	if in.Sandbox == "" {
		return nil, DestroyOutput{}, errors.New("name the sandbox to destroy (its id or name; see sandbox_list)")
	}
	if err := checkRef(in.Sandbox); err != nil {
		return nil, DestroyOutput{}, err
	}
	// Resolve a name to its id first, so that destroying the default by
	// name also clears it.
	id := in.Sandbox
	if sb, err := s.c.Get(ctx, in.Sandbox); err == nil {
		id = sb.ID
	} else if errors.Is(err, paddock.ErrNotFound) {
		return nil, DestroyOutput{}, toolError("sandbox_destroy failed", err)
	}
	if err := s.c.Delete(ctx, id); err != nil {
		return nil, DestroyOutput{}, toolError("sandbox_destroy failed", err)
	}
	s.forget(req, id)
	return nil, DestroyOutput{Destroyed: id}, nil
}
