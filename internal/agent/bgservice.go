package agent

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"time"

	"connectrpc.com/connect"

	"github.com/paddock-dev/paddock/internal/agent/osproc"
	"github.com/paddock-dev/paddock/internal/agent/reply"
	"github.com/paddock-dev/paddock/internal/errdefs"
	agentv1 "github.com/paddock-dev/paddock/proto/gen/paddock/agent/v1"
	"github.com/paddock-dev/paddock/proto/gen/paddock/agent/v1/agentv1connect"
)

// Bounds on waits and log reads.
const (
	maxWaitTimeout  = time.Hour
	maxPatternBytes = 1 << 10
	// maxLineBytes bounds the line a log wait matches against; a longer
	// line is matched in pieces.
	maxLineBytes = 64 << 10
	logChunk     = 32 << 10
	pollEvery    = 100 * time.Millisecond
)

type bgService struct{ a *Agent }

var _ agentv1connect.ProcessServiceHandler = (*bgService)(nil)

func (s *bgService) StartProcess(ctx context.Context, req *connect.Request[agentv1.StartProcessRequest]) (*connect.Response[agentv1.StartProcessResponse], error) {
	b, err := s.a.startBackground(ctx, req.Msg)
	if err != nil {
		return nil, reply.RPC(err)
	}
	return connect.NewResponse(&agentv1.StartProcessResponse{Process: b.info()}), nil
}

func (s *bgService) ListProcesses(ctx context.Context, _ *connect.Request[agentv1.ListProcessesRequest]) (*connect.Response[agentv1.ListProcessesResponse], error) {
	var out []*agentv1.BackgroundProcess
	for _, b := range s.a.bg.list() {
		out = append(out, b.info())
	}
	return connect.NewResponse(&agentv1.ListProcessesResponse{Processes: out}), nil
}

func (s *bgService) GetProcess(ctx context.Context, req *connect.Request[agentv1.GetProcessRequest]) (*connect.Response[agentv1.GetProcessResponse], error) {
	b, err := s.a.bg.get(req.Msg.GetId())
	if err != nil {
		return nil, reply.RPC(err)
	}
	return connect.NewResponse(&agentv1.GetProcessResponse{Process: b.info()}), nil
}

func (s *bgService) KillProcess(ctx context.Context, req *connect.Request[agentv1.KillProcessRequest]) (*connect.Response[agentv1.KillProcessResponse], error) {
	b, err := s.a.bg.get(req.Msg.GetId())
	if err != nil {
		return nil, reply.RPC(err)
	}
	sig, err := parseSignal(req.Msg.GetSignal())
	if err != nil {
		return nil, reply.RPC(err)
	}
	grace := time.Duration(req.Msg.GetGraceMs()) * time.Millisecond
	if grace < 0 || grace > maxWaitTimeout {
		return nil, reply.RPC(errdefs.Invalid("grace must be between 0 and %s", maxWaitTimeout))
	}
	if err := s.a.killBackground(ctx, b, sig, grace); err != nil {
		return nil, reply.RPC(err)
	}
	return connect.NewResponse(&agentv1.KillProcessResponse{Process: b.info()}), nil
}

// streams resolves a stream selector to the rings it names.
func streams(b *bgProc, which string) ([]string, []*osproc.Ring, error) {
	switch which {
	case "", "both":
		return []string{"stdout", "stderr"}, []*osproc.Ring{b.stdout, b.stderr}, nil
	case "stdout":
		return []string{"stdout"}, []*osproc.Ring{b.stdout}, nil
	case "stderr":
		return []string{"stderr"}, []*osproc.Ring{b.stderr}, nil
	}
	return nil, nil, errdefs.Invalid("stream %q: want stdout, stderr or both", which)
}

// ProcessLogs sends what the rings hold from the offset on; following, it
// then sends new output as it comes and ends with the process's final
// record once both streams are closed, so an end always means "ended".
func (s *bgService) ProcessLogs(ctx context.Context, req *connect.Request[agentv1.ProcessLogsRequest], stream *connect.ServerStream[agentv1.ProcessLogsEvent]) error {
	b, err := s.a.bg.get(req.Msg.GetId())
	if err != nil {
		return reply.RPC(err)
	}
	names, rings, err := streams(b, req.Msg.GetStream())
	if err != nil {
		return reply.RPC(err)
	}
	if req.Msg.GetOffset() < 0 {
		return reply.RPC(errdefs.Invalid("offset must not be negative"))
	}
	offs := make([]int64, len(rings))
	for i := range offs {
		offs[i] = req.Msg.GetOffset()
	}
	keepalive := time.NewTicker(s.a.opts.KeepaliveInterval)
	defer keepalive.Stop()
	for {
		var waits []<-chan struct{}
		allClosed := true
		for i, r := range rings {
			for {
				data, at, dropped, wait, closed := r.ReadAt(offs[i], logChunk)
				if dropped > 0 {
					if err := stream.Send(&agentv1.ProcessLogsEvent{Event: &agentv1.ProcessLogsEvent_Gap_{
						Gap: &agentv1.ProcessLogsEvent_Gap{Stream: names[i], Offset: offs[i], Dropped: dropped}}}); err != nil {
						return err
					}
				}
				offs[i] = at
				if len(data) == 0 {
					waits = append(waits, wait)
					allClosed = allClosed && closed
					break
				}
				if err := stream.Send(&agentv1.ProcessLogsEvent{Event: &agentv1.ProcessLogsEvent_Data_{
					Data: &agentv1.ProcessLogsEvent_Data{Stream: names[i], Offset: at, Data: data}}}); err != nil {
					return err
				}
				offs[i] = at + int64(len(data))
			}
		}
		if !req.Msg.GetFollow() {
			return nil
		}
		if allClosed {
			<-b.done
			return stream.Send(&agentv1.ProcessLogsEvent{Event: &agentv1.ProcessLogsEvent_End{End: b.info()}})
		}
		if err := waitAny(ctx, waits, keepalive.C, func() error {
			return stream.Send(&agentv1.ProcessLogsEvent{Event: &agentv1.ProcessLogsEvent_Keepalive_{
				Keepalive: &agentv1.ProcessLogsEvent_Keepalive{}}})
		}); err != nil {
			return err
		}
	}
}

// waitAny blocks until one of at most two channels fires, sending
// keepalives meanwhile.
func waitAny(ctx context.Context, waits []<-chan struct{}, tick <-chan time.Time, keepalive func() error) error {
	var w0, w1 <-chan struct{}
	if len(waits) > 0 {
		w0 = waits[0]
	}
	if len(waits) > 1 {
		w1 = waits[1]
	}
	for {
		select {
		case <-w0:
			return nil
		case <-w1:
			return nil
		case <-tick:
			if err := keepalive(); err != nil {
				return err
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (s *bgService) WaitProcess(ctx context.Context, req *connect.Request[agentv1.WaitProcessRequest]) (*connect.Response[agentv1.WaitProcessResponse], error) {
	m := req.Msg
	b, err := s.a.bg.get(m.GetId())
	if err != nil {
		return nil, reply.RPC(err)
	}
	timeout := time.Duration(m.GetTimeoutMs()) * time.Millisecond
	if timeout <= 0 || timeout > maxWaitTimeout {
		return nil, reply.RPC(errdefs.Invalid("timeout must be between 1ms and %s", maxWaitTimeout))
	}
	var check func(context.Context) (bool, string, error)
	var what string
	switch m.GetCondition() {
	case "exit":
		what = "the process to exit"
	case "port", "http":
		port := m.GetPort()
		if port == 0 || port > 65535 {
			return nil, reply.RPC(errdefs.Invalid("port %d: want 1 to 65535", port))
		}
		what = fmt.Sprintf("port %d to accept connections", port)
		check = func(ctx context.Context) (bool, string, error) { return portOpen(ctx, port), "", nil }
		if m.GetCondition() == "http" {
			chk, desc, err := httpCheck(port, m.GetPath(), int(m.GetStatus()))
			if err != nil {
				return nil, reply.RPC(err)
			}
			what, check = desc, chk
		}
	case "log":
		if m.GetPattern() == "" || len(m.GetPattern()) > maxPatternBytes {
			return nil, reply.RPC(errdefs.Invalid("pattern must be 1 to %d bytes", maxPatternBytes))
		}
		re, err := regexp.Compile(m.GetPattern())
		if err != nil {
			return nil, reply.RPC(errdefs.Invalid("pattern is not a valid regular expression: %v", err))
		}
		_, rings, err := streams(b, m.GetStream())
		if err != nil {
			return nil, reply.RPC(err)
		}
		what = fmt.Sprintf("a line matching %q", m.GetPattern())
		check = logMatcher(re, rings)
	default:
		return nil, reply.RPC(errdefs.Invalid("condition %q: want exit, port, http or log", m.GetCondition()))
	}

	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if check == nil {
		select {
		case <-b.done:
			return connect.NewResponse(&agentv1.WaitProcessResponse{Process: b.info()}), nil
		case <-wctx.Done():
			return nil, reply.RPC(s.waitFailed(ctx, b, what, timeout))
		}
	}
	// Poll quickly at first: most servers are up within milliseconds.
	delay := 5 * time.Millisecond
	tick := time.NewTimer(delay)
	defer tick.Stop()
	for {
		// Read "ended" before checking, so output or a port that appeared
		// just before the end still counts.
		ended := b.isDone()
		ok, matched, err := check(wctx)
		if err != nil {
			return nil, reply.RPC(err)
		}
		if ok {
			return connect.NewResponse(&agentv1.WaitProcessResponse{Process: b.info(), Matched: matched}), nil
		}
		if ended {
			return nil, reply.RPC(fmt.Errorf("process %s %s before %s; %s: %w",
				b.id, b.endText(), what, b.lastOutput(), errdefs.ErrFailedPrecondition))
		}
		select {
		case <-tick.C:
			delay = min(2*delay, pollEvery)
			tick.Reset(delay)
		case <-b.done:
		case <-wctx.Done():
			return nil, reply.RPC(s.waitFailed(ctx, b, what, timeout))
		}
	}
}

func (s *bgService) waitFailed(ctx context.Context, b *bgProc, what string, timeout time.Duration) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return fmt.Errorf("timed out after %s waiting for %s; process %s is %s; %s: %w",
		timeout, what, b.id, b.info().GetStatus(), b.lastOutput(), errdefs.ErrDeadlineExceeded)
}

func portOpen(ctx context.Context, port uint32) bool {
	for _, host := range []string{"127.0.0.1", "::1"} {
		d := net.Dialer{Timeout: time.Second}
		c, err := d.DialContext(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(int(port))))
		if err == nil {
			_ = c.Close()
			return true
		}
	}
	return false
}

func httpCheck(port uint32, path string, want int) (func(context.Context) (bool, string, error), string, error) {
	if path == "" {
		path = "/"
	}
	if path[0] != '/' || len(path) > 2048 || bytes.ContainsAny([]byte(path), " \r\n\x00#") {
		return nil, "", errdefs.Invalid("path %q: want an absolute URL path such as /health", path)
	}
	if want == 0 {
		want = http.StatusOK
	}
	if want < 100 || want > 599 {
		return nil, "", errdefs.Invalid("status %d: want 100 to 599", want)
	}
	url := "http://127.0.0.1:" + strconv.Itoa(int(port)) + path
	hc := &http.Client{
		Timeout: 2 * time.Second,
		// A redirect is an answer; its status is what is compared.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Transport:     &http.Transport{Proxy: nil, DisableKeepAlives: true},
	}
	desc := fmt.Sprintf("GET %s on port %d to answer %d", path, port, want)
	return func(ctx context.Context) (bool, string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false, "", errdefs.Invalid("bad path: %v", err)
		}
		resp, err := hc.Do(req)
		if err != nil {
			return false, "", nil
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		_ = resp.Body.Close()
		return resp.StatusCode == want, "", nil
	}, desc, nil
}

// logMatcher scans the rings line by line from the oldest kept byte, so a
// line printed before the wait began counts too. The line in progress is
// tried as well: a prompt may never get its newline.
func logMatcher(re *regexp.Regexp, rings []*osproc.Ring) func(context.Context) (bool, string, error) {
	offs := make([]int64, len(rings))
	partial := make([][]byte, len(rings))
	return func(context.Context) (bool, string, error) {
		for i, r := range rings {
			for {
				data, at, dropped, _, _ := r.ReadAt(offs[i], logChunk)
				if dropped > 0 {
					partial[i] = partial[i][:0]
				}
				if len(data) == 0 {
					break
				}
				offs[i] = at + int64(len(data))
				buf := append(partial[i], data...)
				for {
					nl := bytes.IndexByte(buf, '\n')
					if nl < 0 {
						break
					}
					line := bytes.TrimSuffix(buf[:nl], []byte("\r"))
					if re.Match(line) {
						return true, string(line), nil
					}
					buf = buf[nl+1:]
				}
				if len(buf) > maxLineBytes {
					buf = buf[len(buf)-maxLineBytes:]
				}
				partial[i] = append([]byte(nil), buf...)
			}
			if len(partial[i]) > 0 && re.Match(partial[i]) {
				return true, string(partial[i]), nil
			}
		}
		return false, "", nil
	}
}
