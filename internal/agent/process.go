package agent

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"strings"
	"syscall"
	"time"

	"connectrpc.com/connect"

	"github.com/paddock-dev/paddock/internal/agent/osproc"
	"github.com/paddock-dev/paddock/internal/agent/reply"
	"github.com/paddock-dev/paddock/internal/agent/safefs"
	"github.com/paddock-dev/paddock/internal/agent/users"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/proto/gen/process"
	"github.com/paddock-dev/paddock/proto/gen/process/processconnect"
)

// DefaultPath is given to processes when the sandbox environment has none.
const DefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Bounds on one start request, well under what exec itself accepts.
const (
	maxArgs     = 64 << 10
	maxEnvs     = 16 << 10
	maxTagBytes = 256
)

type processService struct{ a *Agent }

var _ processconnect.ProcessHandler = (*processService)(nil)

func (s *processService) Start(ctx context.Context, req *connect.Request[process.StartRequest], stream *connect.ServerStream[process.StartResponse]) error {
	p, sub, err := s.a.startProcess(ctx, req.Msg)
	if err != nil {
		return reply.RPC(err)
	}
	return s.a.follow(ctx, p, sub, func(ev *process.ProcessEvent) error {
		return stream.Send(&process.StartResponse{Event: ev})
	})
}

func (s *processService) Connect(ctx context.Context, req *connect.Request[process.ConnectRequest], stream *connect.ServerStream[process.ConnectResponse]) error {
	p, err := s.a.procs.get(req.Msg.GetProcess())
	if err != nil {
		return reply.RPC(err)
	}
	return s.a.follow(ctx, p, p.subscribeReplay(), func(ev *process.ProcessEvent) error {
		return stream.Send(&process.ConnectResponse{Event: ev})
	})
}

func (s *processService) List(ctx context.Context, _ *connect.Request[process.ListRequest]) (*connect.Response[process.ListResponse], error) {
	return connect.NewResponse(&process.ListResponse{Processes: s.a.procs.list()}), nil
}

func (s *processService) Update(ctx context.Context, req *connect.Request[process.UpdateRequest]) (*connect.Response[process.UpdateResponse], error) {
	p, err := s.a.procs.get(req.Msg.GetProcess())
	if err != nil {
		return nil, reply.RPC(err)
	}
	if req.Msg.Pty != nil {
		if err := p.resize(req.Msg.GetPty().GetSize()); err != nil {
			return nil, reply.RPC(err)
		}
	}
	return connect.NewResponse(&process.UpdateResponse{}), nil
}

func (s *processService) SendInput(ctx context.Context, req *connect.Request[process.SendInputRequest]) (*connect.Response[process.SendInputResponse], error) {
	p, err := s.a.procs.get(req.Msg.GetProcess())
	if err != nil {
		return nil, reply.RPC(err)
	}
	if err := writeProcessInput(ctx, p, req.Msg.GetInput()); err != nil {
		return nil, reply.RPC(err)
	}
	return connect.NewResponse(&process.SendInputResponse{}), nil
}

func writeProcessInput(ctx context.Context, p *proc, in *process.ProcessInput) error {
	switch v := in.GetInput().(type) {
	case *process.ProcessInput_Stdin:
		return p.writeInput(ctx, v.Stdin, false)
	case *process.ProcessInput_Pty:
		return p.writeInput(ctx, v.Pty, true)
	default:
		return errdefs.Invalid("input must be stdin or pty bytes")
	}
}

func (s *processService) StreamInput(ctx context.Context, stream *connect.ClientStream[process.StreamInputRequest]) (*connect.Response[process.StreamInputResponse], error) {
	var p *proc
	for stream.Receive() {
		switch e := stream.Msg().GetEvent().(type) {
		case *process.StreamInputRequest_Start:
			var err error
			if p, err = s.a.procs.get(e.Start.GetProcess()); err != nil {
				return nil, reply.RPC(err)
			}
		case *process.StreamInputRequest_Data:
			if p == nil {
				return nil, reply.RPC(errdefs.Invalid("the input stream must start with a start event"))
			}
			if err := writeProcessInput(ctx, p, e.Data.GetInput()); err != nil {
				return nil, reply.RPC(err)
			}
		case *process.StreamInputRequest_Keepalive:
		default:
			return nil, reply.RPC(errdefs.Invalid("unknown input stream event"))
		}
	}
	if err := stream.Err(); err != nil {
		return nil, err
	}
	return connect.NewResponse(&process.StreamInputResponse{}), nil
}

func (s *processService) SendSignal(ctx context.Context, req *connect.Request[process.SendSignalRequest]) (*connect.Response[process.SendSignalResponse], error) {
	p, err := s.a.procs.get(req.Msg.GetProcess())
	if err != nil {
		return nil, reply.RPC(err)
	}
	var sig syscall.Signal
	switch req.Msg.GetSignal() {
	case process.Signal_SIGNAL_SIGTERM:
		sig = syscall.SIGTERM
	case process.Signal_SIGNAL_SIGKILL:
		sig = syscall.SIGKILL
	default:
		return nil, reply.RPC(errdefs.Invalid("signal must be SIGTERM or SIGKILL"))
	}
	if err := p.signal(sig); err != nil {
		return nil, reply.RPC(err)
	}
	return connect.NewResponse(&process.SendSignalResponse{}), nil
}

func (s *processService) CloseStdin(ctx context.Context, req *connect.Request[process.CloseStdinRequest]) (*connect.Response[process.CloseStdinResponse], error) {
	p, err := s.a.procs.get(req.Msg.GetProcess())
	if err != nil {
		return nil, reply.RPC(err)
	}
	if p.ptmx != nil {
		return nil, reply.RPC(fmt.Errorf("a terminal has no stdin to close; send 0x04 (Ctrl-D) instead"+": %w", errdefs.ErrFailedPrecondition))
	}
	p.closeStdin()
	return connect.NewResponse(&process.CloseStdinResponse{}), nil
}

// follow streams a process's events to one client: start, output, periodic
// keepalives, end. A client that goes away leaves the process running, as
// in envd; it can attach again with Connect.
func (a *Agent) follow(ctx context.Context, p *proc, sub *subscriber, send func(*process.ProcessEvent) error) error {
	defer p.unsubscribe(sub)
	if err := send(&process.ProcessEvent{Event: &process.ProcessEvent_Start{
		Start: &process.ProcessEvent_StartEvent{Pid: uint32(p.pid)}}}); err != nil {
		return err
	}
	tick := time.NewTicker(a.opts.KeepaliveInterval)
	defer tick.Stop()
	for {
		select {
		case ev := <-sub.ch:
			if err := send(ev); err != nil {
				return err
			}
		case <-p.done:
			// Pumps finished before done closed, so what is left is buffered.
			for {
				select {
				case ev := <-sub.ch:
					if err := send(ev); err != nil {
						return err
					}
					continue
				default:
				}
				break
			}
			err := send(&process.ProcessEvent{Event: &process.ProcessEvent_End{End: p.end}})
			if err == nil && p.term != nil {
				// Someone learned how the terminal ended: no need to keep it.
				a.procs.forgetEnded(p.tag)
			}
			return err
		case <-tick.C:
			if err := send(&process.ProcessEvent{Event: &process.ProcessEvent_Keepalive{
				Keepalive: &process.ProcessEvent_KeepAlive{}}}); err != nil {
				return err
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func validateStart(msg *process.StartRequest) error {
	cfg := msg.GetProcess()
	if cfg == nil || cfg.GetCmd() == "" {
		return errdefs.Invalid("a command is required")
	}
	if len(cfg.GetArgs()) > maxArgs || len(cfg.GetEnvs()) > maxEnvs {
		return errdefs.Invalid("too many arguments or environment variables")
	}
	if strings.IndexByte(cfg.GetCmd(), 0) >= 0 {
		return errdefs.Invalid("command contains a NUL byte")
	}
	for _, s := range cfg.GetArgs() {
		if strings.IndexByte(s, 0) >= 0 {
			return errdefs.Invalid("argument contains a NUL byte")
		}
	}
	for k, v := range cfg.GetEnvs() {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.IndexByte(v, 0) >= 0 {
			return errdefs.Invalid("invalid environment variable %q", k)
		}
	}
	if len(msg.GetTag()) > maxTagBytes {
		return errdefs.Invalid("tag is longer than %d bytes", maxTagBytes)
	}
	return nil
}

// buildEnv layers the environment: sandbox-wide, then the user's identity,
// then the request's own variables.
func buildEnv(base []string, u *users.User, req map[string]string) []string {
	m := make(map[string]string, len(base)+len(req)+4)
	for _, kv := range base {
		if k, v, ok := strings.Cut(kv, "="); ok && k != "" {
			m[k] = v
		}
	}
	m["HOME"], m["USER"], m["LOGNAME"] = u.Home, u.Name, u.Name
	if m["PATH"] == "" {
		m["PATH"] = DefaultPath
	}
	for k, v := range req {
		m[k] = v
	}
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

func (a *Agent) workDir(u *users.User, requested *string) (string, error) {
	if requested == nil || *requested == "" {
		a.mu.RLock()
		def := a.defaultCwd
		a.mu.RUnlock()
		if def == "" {
			def = u.Home
		}
		if fi, err := os.Stat(def); err == nil && fi.IsDir() {
			return def, nil
		}
		return "/", nil
	}
	dir, err := users.ResolvePath(u, *requested)
	if err != nil {
		return "", err
	}
	fi, err := os.Stat(dir)
	if err != nil {
		// Not ErrNotFound: for an exec that means "command not found".
		return "", errdefs.Invalid("working directory %s: %s", dir, safefs.Errno(err))
	}
	if !fi.IsDir() {
		return "", errdefs.Invalid("working directory %s is not a directory", dir)
	}
	return dir, nil
}

// startProcess forks the requested process in its own process group (its
// own session for a terminal) and starts following its output.
func (a *Agent) startProcess(ctx context.Context, msg *process.StartRequest) (*proc, *subscriber, error) {
	if err := validateStart(msg); err != nil {
		return nil, nil, err
	}
	u, err := a.userFor(ctx, "")
	if err != nil {
		if errors.Is(err, errdefs.ErrNotFound) {
			// Not ErrNotFound: for an exec that means "command not found".
			return nil, nil, errdefs.Invalid("%s", reply.Public(err))
		}
		return nil, nil, err
	}
	cfg := msg.GetProcess()
	cwd, err := a.workDir(u, cfg.Cwd)
	if err != nil {
		return nil, nil, err
	}
	env := buildEnv(a.sandboxEnv(), u, cfg.GetEnvs())
	path, err := osproc.LookPath(cfg.GetCmd(), osproc.EnvValue(env, "PATH"), cwd)
	if err != nil {
		return nil, nil, err
	}
	tag := msg.GetTag()
	if tag != "" && a.procs.tagInUse(tag) {
		return nil, nil, fmt.Errorf("a process with tag %q is running: %w", tag, errdefs.ErrConflict)
	}

	p := &proc{tag: tag, subs: make(map[*subscriber]struct{}), done: make(chan struct{})}
	sys := &syscall.SysProcAttr{}
	if os.Geteuid() == 0 {
		sys.Credential = &syscall.Credential{Uid: u.UID, Gid: u.GID, Groups: u.Groups}
	}
	var childFiles []*os.File
	defer func() {
		for _, f := range childFiles {
			_ = f.Close()
		}
	}()
	var files []*os.File
	type output struct {
		f    *os.File
		wrap func([]byte) *process.ProcessEvent_DataEvent
	}
	var outs []output
	if msg.Pty != nil {
		ptmx, tty, err := osproc.OpenPTY()
		if err != nil {
			return nil, nil, fmt.Errorf("open a terminal: %v: %w", err, errdefs.ErrResourceExhausted)
		}
		childFiles = append(childFiles, tty)
		size := msg.GetPty().GetSize()
		cols, rows := uint16(80), uint16(24)
		if size.GetCols() > 0 && size.GetRows() > 0 && size.GetCols() <= 10000 && size.GetRows() <= 10000 {
			cols, rows = uint16(size.GetCols()), uint16(size.GetRows())
		}
		_ = osproc.SetWinsize(ptmx, cols, rows)
		p.ptmx = ptmx
		files = []*os.File{tty, tty, tty}
		sys.Setsid, sys.Setctty, sys.Ctty = true, true, 0
		outs = append(outs, output{ptmx, func(b []byte) *process.ProcessEvent_DataEvent {
			return &process.ProcessEvent_DataEvent{Output: &process.ProcessEvent_DataEvent_Pty{Pty: b}}
		}})
	} else {
		sys.Setpgid = true
		var stdin *os.File
		if msg.Stdin == nil || msg.GetStdin() {
			r, w, err := os.Pipe()
			if err != nil {
				return nil, nil, fmt.Errorf("create stdin pipe: %v: %w", err, errdefs.ErrResourceExhausted)
			}
			childFiles = append(childFiles, r)
			stdin, p.stdin = r, w
		} else {
			devnull, err := os.Open(os.DevNull)
			if err != nil {
				return nil, nil, fmt.Errorf("open %s: %v: %w", os.DevNull, err, errdefs.ErrFailedPrecondition)
			}
			childFiles = append(childFiles, devnull)
			stdin = devnull
		}
		outR, outW, err := os.Pipe()
		if err != nil {
			p.closeStdin()
			return nil, nil, fmt.Errorf("create stdout pipe: %v: %w", err, errdefs.ErrResourceExhausted)
		}
		errR, errW, err := os.Pipe()
		if err != nil {
			p.closeStdin()
			_, _ = outR.Close(), outW.Close()
			return nil, nil, fmt.Errorf("create stderr pipe: %v: %w", err, errdefs.ErrResourceExhausted)
		}
		childFiles = append(childFiles, outW, errW)
		files = []*os.File{stdin, outW, errW}
		outs = append(outs,
			output{outR, func(b []byte) *process.ProcessEvent_DataEvent {
				return &process.ProcessEvent_DataEvent{Output: &process.ProcessEvent_DataEvent_Stdout{Stdout: b}}
			}},
			output{errR, func(b []byte) *process.ProcessEvent_DataEvent {
				return &process.ProcessEvent_DataEvent{Output: &process.ProcessEvent_DataEvent_Stderr{Stderr: b}}
			}})
	}
	closeParent := func() {
		p.closeStdin()
		for _, o := range outs {
			_ = o.f.Close()
		}
	}

	argv := append([]string{cfg.GetCmd()}, cfg.GetArgs()...)
	attr := &os.ProcAttr{Dir: cwd, Env: env, Files: files, Sys: sys}
	pid, exitc, err := a.startChild(func() (int, error) { return osproc.StartProcess(path, argv, attr) })
	if err != nil {
		closeParent()
		return nil, nil, startError(cfg.GetCmd(), err)
	}
	p.pid = pid
	p.info = &process.ProcessInfo{Config: cfg, Pid: uint32(pid)}
	if tag != "" {
		p.info.Tag = &tag
	}
	if p.ptmx != nil && isTerminalTag(tag) {
		p.term = newTermKeep(int(msg.GetPty().GetSize().GetCols()), int(msg.GetPty().GetSize().GetRows()))
	}
	sub := p.subscribe()
	a.procs.add(p)
	for _, o := range outs {
		p.outputs = append(p.outputs, o.f)
		p.pumps.Add(1)
		go p.pump(o.f, o.wrap)
	}
	go func() { p.finish(<-exitc, a.procs) }()
	a.log.Debug("process started", "pid", pid, "cmd", cfg.GetCmd(), "user", u.Name)
	return p, sub, nil
}

func startError(cmd string, err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return errdefs.NotFound("command %q not found", cmd)
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("cannot start %q as this user: the command or working directory is not accessible: %w", cmd, errdefs.ErrPermissionDenied)
	case errors.Is(err, syscall.E2BIG):
		return errdefs.Invalid("arguments and environment are too long")
	case errors.Is(err, syscall.ENOEXEC):
		return errdefs.Invalid("command %q is not an executable format", cmd)
	case errors.Is(err, syscall.EAGAIN), errors.Is(err, syscall.ENOMEM):
		return fmt.Errorf("start %q: %v: %w", cmd, safefs.Errno(err), errdefs.ErrResourceExhausted)
	}
	return fmt.Errorf("start %q: %v", cmd, safefs.Errno(err))
}
