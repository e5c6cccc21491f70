package mcp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strings"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// ReadInput is read_file's input.
type ReadInput struct {
	Sandbox string `json:"sandbox,omitempty" jsonschema:"sandbox id or name; empty means this session's default sandbox"`
	Path    string `json:"path" jsonschema:"file path; relative paths start at /home/user"`
	Offset  int    `json:"offset,omitempty" jsonschema:"first line to return, 1-based; default 1"`
	Limit   int    `json:"limit,omitempty" jsonschema:"how many lines to return; default 2000"`
}

// ReadOutput is read_file's output.
type ReadOutput struct {
	Path       string `json:"path"`
	Content    string `json:"content" jsonschema:"the lines asked for, exactly as in the file (long lines are cut)"`
	StartLine  int    `json:"start_line"`
	EndLine    int    `json:"end_line" jsonschema:"last line returned; less than start_line when none were"`
	TotalLines int    `json:"total_lines"`
	Truncated  bool   `json:"truncated,omitempty" jsonschema:"true when more lines follow end_line; read them with offset=end_line+1"`
	Note       string `json:"note,omitempty"`
}

// WriteInput is write_file's input.
type WriteInput struct {
	Sandbox string `json:"sandbox,omitempty" jsonschema:"sandbox id or name; empty means this session's default sandbox"`
	Path    string `json:"path" jsonschema:"file path; relative paths start at /home/user; missing parent directories are created"`
	Content string `json:"content" jsonschema:"the whole new content of the file (at most 2 MiB)"`
	// Executable sets mode 0755 instead of 0644.
	Executable bool `json:"executable,omitempty" jsonschema:"make the file executable (mode 0755)"`
}

// WriteOutput is write_file's output.
type WriteOutput struct {
	Path  string `json:"path"`
	Bytes int    `json:"bytes"`
}

// EditInput is edit_file's input.
type EditInput struct {
	Sandbox    string `json:"sandbox,omitempty" jsonschema:"sandbox id or name; empty means this session's default sandbox"`
	Path       string `json:"path" jsonschema:"file path; relative paths start at /home/user"`
	OldString  string `json:"old_string" jsonschema:"exact text to replace, including whitespace and indentation; must occur exactly once unless replace_all"`
	NewString  string `json:"new_string" jsonschema:"the replacement text"`
	ReplaceAll bool   `json:"replace_all,omitempty" jsonschema:"replace every occurrence instead of requiring exactly one"`
}

// EditOutput is edit_file's output.
type EditOutput struct {
	Path         string `json:"path"`
	Replacements int    `json:"replacements"`
}

// ListDirInput is list_dir's input.
type ListDirInput struct {
	Sandbox string `json:"sandbox,omitempty" jsonschema:"sandbox id or name; empty means this session's default sandbox"`
	Path    string `json:"path,omitempty" jsonschema:"directory; default /home/user"`
}

// DirEntry is one list_dir entry.
type DirEntry struct {
	Name          string    `json:"name"`
	Type          string    `json:"type" jsonschema:"file, dir, symlink or other"`
	Size          int64     `json:"size"`
	Mode          string    `json:"mode" jsonschema:"permissions in octal, e.g. 0644"`
	ModifiedAt    time.Time `json:"modified_at"`
	SymlinkTarget string    `json:"symlink_target,omitempty"`
}

// ListDirOutput is list_dir's output.
type ListDirOutput struct {
	Path    string     `json:"path"`
	Entries []DirEntry `json:"entries"`
	Note    string     `json:"note,omitempty"`
}

func (s *Server) addFileTools() {
	mcpsdk.AddTool(s.srv, &mcpsdk.Tool{
		Name:  "read_file",
		Title: "Read a text file",
		Description: `Read a text file in a sandbox, optionally a range of lines (offset, limit). Cheap.
Returns at most 2000 lines and 64 KiB per call; when truncated is true, call again with offset=end_line+1. Lines longer than 2000 characters are cut.
Binary files are refused: inspect them with exec (e.g. od, file). Files over 8 MiB are refused: use grep, or exec with sed -n.`,
		Annotations: &mcpsdk.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: ptr(false)},
	}, s.readFile)
	mcpsdk.AddTool(s.srv, &mcpsdk.Tool{
		Name:  "write_file",
		Title: "Write a file",
		Description: `Create or replace a file in a sandbox with the given content, creating missing parent directories. Cheap.
Replaces the whole file: to change part of an existing file, prefer edit_file.`,
		Annotations: &mcpsdk.ToolAnnotations{DestructiveHint: ptr(true), IdempotentHint: true, OpenWorldHint: ptr(false)},
	}, s.writeFile)
	mcpsdk.AddTool(s.srv, &mcpsdk.Tool{
		Name:  "edit_file",
		Title: "Edit a file by exact replacement",
		Description: `Replace an exact piece of text in a file with new text. old_string must match the file byte for byte (whitespace and indentation included) and occur exactly once; otherwise nothing is changed and the error says how many times it occurred, so include more surrounding lines to make it unique (or set replace_all).
Cheaper and safer than rewriting the file with write_file; read_file first to copy the text exactly.`,
		Annotations: &mcpsdk.ToolAnnotations{DestructiveHint: ptr(true), OpenWorldHint: ptr(false)},
	}, s.editFile)
	mcpsdk.AddTool(s.srv, &mcpsdk.Tool{
		Name:        "list_dir",
		Title:       "List a directory",
		Description: `List the entries of one directory in a sandbox (not recursive) with their type, size, mode and modification time. Cheap; at most 500 entries. Use find to search a tree.`,
		Annotations: &mcpsdk.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: ptr(false)},
	}, s.listDir)
}

// download reads a whole file, refusing ones over maxReadBytes.
func (s *Server) download(ctx context.Context, id, path string) ([]byte, error) {
	w := &limitWriter{n: maxReadBytes}
	if err := s.c.ReadFile(ctx, id, path, w); err != nil {
		if errors.Is(err, errTooLarge) {
			return nil, fmt.Errorf("%s is larger than %d MiB; search it with grep, or show a part with exec (sed -n '100,200p' FILE)", path, maxReadBytes>>20)
		}
		return nil, toolError("reading "+path+" failed", err)
	}
	return w.buf.Bytes(), nil
}

func (s *Server) readFile(ctx context.Context, req *mcpsdk.CallToolRequest, in ReadInput) (*mcpsdk.CallToolResult, ReadOutput, error) {
	if err := checkPath("path", in.Path); err != nil {
		return nil, ReadOutput{}, err
	}
	if in.Offset < 0 || in.Limit < 0 {
		return nil, ReadOutput{}, errors.New("offset and limit must not be negative (offset is 1-based)")
	}
	limit := in.Limit
	if limit == 0 {
		limit = 2000
	}
	id, err := s.resolve(ctx, req, in.Sandbox)
	if err != nil {
		return nil, ReadOutput{}, err
	}
	data, err := s.download(ctx, id, in.Path)
	if err != nil {
		return nil, ReadOutput{}, err
	}
	if bytes.IndexByte(data[:min(len(data), 8192)], 0) >= 0 {
		return nil, ReadOutput{}, fmt.Errorf("%s looks binary (%d bytes, contains NUL bytes); inspect it with exec, e.g. od -c %s | head", in.Path, len(data), in.Path)
	}
	return nil, readOutput(in.Path, sliceLines(string(data), in.Offset, limit, maxReadChars)), nil
}

// readOutput is read_file's answer for the window r of the file at p.
func readOutput(p string, r lineRange) ReadOutput {
	out := ReadOutput{Path: p, Content: r.text, StartLine: r.start, EndLine: r.end, TotalLines: r.total}
	switch {
	case r.start > r.total && r.total > 0:
		out.Note = fmt.Sprintf("offset %d is past the end: the file has %d lines", r.start, r.total)
	case r.total == 0:
		out.Note = "the file is empty"
	case r.end < r.total:
		out.Truncated = true
		out.Note = fmt.Sprintf("showing lines %d-%d of %d; read on with offset=%d", r.start, r.end, r.total, r.end+1)
	}
	if r.cutLines > 0 {
		out.Note = strings.TrimSpace(out.Note + fmt.Sprintf(" %d long lines were cut at %d characters.", r.cutLines, maxLineChars))
	}
	return out
}

func (s *Server) writeFile(ctx context.Context, req *mcpsdk.CallToolRequest, in WriteInput) (*mcpsdk.CallToolResult, WriteOutput, error) {
	if err := checkPath("path", in.Path); err != nil {
		return nil, WriteOutput{}, err
	}
	if len(in.Content) > maxWriteBytes {
		return nil, WriteOutput{}, fmt.Errorf("content is %d bytes, at most %d per call; write the file in parts (write_file, then exec with cat part2 >> file)", len(in.Content), maxWriteBytes)
	}
	id, err := s.resolve(ctx, req, in.Sandbox)
	if err != nil {
		return nil, WriteOutput{}, err
	}
	mode := fs.FileMode(0o644)
	if in.Executable {
		mode = 0o755
	}
	fi, err := s.c.WriteFile(ctx, id, in.Path, strings.NewReader(in.Content), mode)
	if err != nil {
		return nil, WriteOutput{}, toolError("write_file failed", err)
	}
	p := in.Path
	if fi.Path != "" {
		p = fi.Path
	}
	return nil, WriteOutput{Path: p, Bytes: len(in.Content)}, nil
}

func (s *Server) editFile(ctx context.Context, req *mcpsdk.CallToolRequest, in EditInput) (*mcpsdk.CallToolResult, EditOutput, error) {
	if err := checkPath("path", in.Path); err != nil {
		return nil, EditOutput{}, err
	}
	if in.OldString == "" {
		return nil, EditOutput{}, errors.New("old_string is empty; give the exact text to replace (use write_file to create a file)")
	}
	if in.OldString == in.NewString {
		return nil, EditOutput{}, errors.New("old_string and new_string are the same; nothing to change")
	}
	id, err := s.resolve(ctx, req, in.Sandbox)
	if err != nil {
		return nil, EditOutput{}, err
	}
	fi, err := s.c.Stat(ctx, id, in.Path)
	if err != nil {
		return nil, EditOutput{}, toolError("edit_file failed", err)
	}
	if fi.Type != "file" {
		return nil, EditOutput{}, fmt.Errorf("%s is a %s, not a regular file", in.Path, fi.Type)
	}
	data, err := s.download(ctx, id, in.Path)
	if err != nil {
		return nil, EditOutput{}, err
	}
	text := string(data)
	n := strings.Count(text, in.OldString)
	if n == 0 || (n > 1 && !in.ReplaceAll) {
		return nil, EditOutput{}, editRefusal(in.Path, n, strings.Contains(text, strings.TrimSpace(in.OldString)))
	}
	if in.ReplaceAll {
		text = strings.ReplaceAll(text, in.OldString, in.NewString)
	} else {
		text = strings.Replace(text, in.OldString, in.NewString, 1)
	}
	if len(text) > maxReadBytes {
		return nil, EditOutput{}, fmt.Errorf("the edited file would be %d bytes, over %d MiB; nothing was changed", len(text), maxReadBytes>>20)
	}
	// Keep the file's permissions: an edited script stays executable.
	mode := fs.FileMode(fi.Mode & 0o777)
	if _, err := s.c.WriteFile(ctx, id, in.Path, strings.NewReader(text), mode); err != nil {
		return nil, EditOutput{}, toolError("edit_file failed while writing", err)
	}
	return nil, EditOutput{Path: in.Path, Replacements: n}, nil
}

// editRefusal says why edit_file changed nothing: old_string occurred n
// times (0, or more than once without replace_all); trimmed says that it
// occurs once its surrounding whitespace is taken off.
func editRefusal(p string, n int, trimmed bool) error {
	if n == 0 {
		hint := "read_file to copy the current text exactly"
		if trimmed {
			hint = "it occurs with different leading or trailing whitespace; " + hint
		}
		return fmt.Errorf("old_string was not found in %s; nothing was changed (%s)", p, hint)
	}
	return fmt.Errorf("old_string occurs %d times in %s; nothing was changed. Include more surrounding lines to make it unique, or set replace_all", n, p)
}

func (s *Server) listDir(ctx context.Context, req *mcpsdk.CallToolRequest, in ListDirInput) (*mcpsdk.CallToolResult, ListDirOutput, error) {
	p := in.Path
	if p == "" {
		p = "/home/user"
	}
	if err := checkPath("path", p); err != nil {
		return nil, ListDirOutput{}, err
	}
	id, err := s.resolve(ctx, req, in.Sandbox)
	if err != nil {
		return nil, ListDirOutput{}, err
	}
	list, err := s.c.ListDir(ctx, id, p)
	if err != nil {
		return nil, ListDirOutput{}, toolError("list_dir failed", err)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Name < list[j].Name })
	out := ListDirOutput{Path: p, Entries: make([]DirEntry, 0, min(len(list), maxListEntries))}
	for _, e := range list {
		if len(out.Entries) == maxListEntries {
			out.Note = fmt.Sprintf("showing %d of %d entries; use find with a pattern to narrow", maxListEntries, len(list))
			break
		}
		out.Entries = append(out.Entries, DirEntry{Name: validUTF8(e.Name), Type: e.Type, Size: e.Size,
			Mode: fmt.Sprintf("%04o", e.Mode&0o7777), ModifiedAt: e.ModifiedAt, SymlinkTarget: validUTF8(e.SymlinkTarget)})
	}
	if len(list) == 0 {
		out.Note = "the directory is empty"
	}
	return nil, out, nil
}
