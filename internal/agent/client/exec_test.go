package client_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/paddock-dev/paddock/internal/agent"
	"github.com/paddock-dev/paddock/internal/agent/client"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/proto/gen/process"
)

func TestExec(t *testing.T) {
	e := newEnv(t)
	sub := filepath.Join(e.root, "work")
	if err := os.Mkdir(sub, 0o777); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		opts       client.ExecOptions
		wantCode   int
		wantStdout string
		wantStderr string
		wantErr    error
	}{
		{name: "echo", opts: client.ExecOptions{Cmd: []string{"echo", "hello", "world"}}, wantStdout: "hello world\n"},
		{name: "exit code", opts: client.ExecOptions{Cmd: []string{"sh", "-c", "exit 3"}}, wantCode: 3},
		{name: "stderr", opts: client.ExecOptions{Cmd: []string{"sh", "-c", "echo oops >&2; exit 1"}}, wantCode: 1, wantStderr: "oops\n"},
		{name: "request env over sandbox env", opts: client.ExecOptions{
			Cmd: []string{"sh", "-c", `echo "$SANDBOX_WIDE $FOO"`}, Env: map[string]string{"FOO": "bar"}}, wantStdout: "yes bar\n"},
		{name: "identity env", opts: client.ExecOptions{Cmd: []string{"sh", "-c", `echo "$HOME $USER $LOGNAME"`}},
			wantStdout: e.home + " user user\n"},
		{name: "cwd defaults to home", opts: client.ExecOptions{Cmd: []string{"pwd"}}, wantStdout: e.home + "\n"},
		{name: "explicit cwd", opts: client.ExecOptions{Cmd: []string{"pwd"}, Cwd: sub}, wantStdout: sub + "\n"},
		{name: "relative cwd from home", opts: client.ExecOptions{Cmd: []string{"pwd"}, Cwd: "."}, wantStdout: e.home + "\n"},
		{name: "stdin", opts: client.ExecOptions{Cmd: []string{"cat"}, Stdin: []byte("from stdin")}, wantStdout: "from stdin"},
		{name: "no stdin reads EOF", opts: client.ExecOptions{Cmd: []string{"cat"}}, wantStdout: ""},
		{name: "empty stdin", opts: client.ExecOptions{Cmd: []string{"wc", "-c"}, Stdin: []byte{}}, wantStdout: "0\n"},
		{name: "background child keeps stdout open", opts: client.ExecOptions{Cmd: []string{"sh", "-c", "sleep 3 & echo hi"}}, wantStdout: "hi\n"},
		{name: "killed by a signal", opts: client.ExecOptions{Cmd: []string{"sh", "-c", "kill -9 $$"}}, wantCode: -1},
		{name: "command not found", opts: client.ExecOptions{Cmd: []string{"no-such-command-xyz"}}, wantCode: -1, wantErr: errdefs.ErrNotFound},
		{name: "missing cwd", opts: client.ExecOptions{Cmd: []string{"pwd"}, Cwd: "/no/such/dir"}, wantCode: -1, wantErr: errdefs.ErrInvalidArgument},
		{name: "empty argv", opts: client.ExecOptions{}, wantCode: -1, wantErr: errdefs.ErrInvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			start := time.Now()
			res, stdout, stderr, err := e.run(t, ctx, tt.opts)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
				if tt.wantErr == errdefs.ErrNotFound && !strings.Contains(err.Error(), "not found") {
					t.Errorf("error message %q does not say what was not found", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("exec: %v", err)
			}
			if res.ExitCode != tt.wantCode || res.Pid == 0 {
				t.Errorf("exit code %d pid %d, want code %d", res.ExitCode, res.Pid, tt.wantCode)
			}
			if time.Since(start) > 2*time.Second {
				t.Errorf("took %v", time.Since(start))
			}
			if stdout != tt.wantStdout || stderr != tt.wantStderr {
				t.Errorf("stdout %q stderr %q, want %q and %q", stdout, stderr, tt.wantStdout, tt.wantStderr)
			}
		})
	}
}

func TestExecLargeStdin(t *testing.T) {
	e := newEnv(t)
	// More than a pipe buffer both ways: input must be fed while output
	// is read, or the two deadlock.
	in := []byte(strings.Repeat("0123456789abcdef", 1<<16)) // 1 MiB
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, stdout, _, err := e.run(t, ctx, client.ExecOptions{Cmd: []string{"cat"}, Stdin: in})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("exec: %v (code %d)", err, res.ExitCode)
	}
	if stdout != string(in) {
		t.Fatalf("got %d bytes back, want %d", len(stdout), len(in))
	}
}

func TestExecStreamsWithoutBuffering(t *testing.T) {
	e := newEnv(t)
	const size = 200 << 20
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	var got int64
	var peak uint64
	var ms runtime.MemStats
	chunks := 0
	res, err := e.c.Exec(ctx, client.ExecOptions{Cmd: []string{"head", "-c", strconv.Itoa(size), "/dev/zero"}}, nil,
		func(stream int, p []byte) error {
			got += int64(len(p))
			if chunks++; chunks%256 == 0 {
				runtime.ReadMemStats(&ms)
				peak = max(peak, ms.HeapInuse)
			}
			return nil
		})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("exec: %v (code %d)", err, res.ExitCode)
	}
	if got != size {
		t.Fatalf("got %d bytes, want %d", got, size)
	}
	// Agent and client share this process: together they must stay far
	// below the stream's size.
	if peak > 64<<20 {
		t.Errorf("heap in use peaked at %d MiB while streaming %d MiB", peak>>20, size>>20)
	}
}

// groupAlive reports whether any process is in process group pgid.
func groupAlive(t *testing.T, pgid int) []int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, de := range ents {
		pid, err := strconv.Atoi(de.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", de.Name(), "stat"))
		if err != nil {
			continue
		}
		// Fields after the parenthesised name: state ppid pgrp ...
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		f := strings.Fields(s[i+1:])
		if len(f) > 2 && f[2] == strconv.Itoa(pgid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

func TestExecDeadlineKillsGroup(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		name    string
		cancel  bool
		wantErr error
	}{
		{name: "deadline", wantErr: errdefs.ErrDeadlineExceeded},
		{name: "cancel", cancel: true, wantErr: context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 700*time.Millisecond)
			defer cancel()
			var pid uint32
			started := time.Now()
			res, err := e.c.Exec(ctx, client.ExecOptions{Cmd: []string{"sh", "-c", "sleep 1000 & sleep 1000"}},
				func(p uint32) {
					pid = p
					if tt.cancel {
						go func() { time.Sleep(200 * time.Millisecond); cancel() }()
					}
				}, nil)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if time.Since(started) > 5*time.Second {
				t.Errorf("exec took %v to return after its context ended", time.Since(started))
			}
			if pid == 0 {
				t.Fatal("onStart was not called")
			}
			if res.ExitCode != -1 || res.Signal != "SIGKILL" {
				t.Errorf("result %+v, want exit -1 by SIGKILL", res)
			}
			deadline := time.Now().Add(3 * time.Second)
			for {
				left := groupAlive(t, int(pid))
				if len(left) == 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("processes %v of group %d still exist", left, pid)
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
}

func TestProcessSignalsConnectAndList(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tag := "sleeper"
	stdin := false
	stream, err := e.c.Process().Start(ctx, connect.NewRequest(&process.StartRequest{
		Process: &process.ProcessConfig{Cmd: "sh", Args: []string{"-c", "echo ready; exec sleep 1000"}},
		Tag:     &tag,
		Stdin:   &stdin,
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	if !stream.Receive() || stream.Msg().GetEvent().GetStart() == nil {
		t.Fatalf("first event is not start: %v", stream.Err())
	}
	pid := stream.Msg().GetEvent().GetStart().GetPid()
	// Wait for output so the sleep is in place.
	for stream.Receive() {
		if d := stream.Msg().GetEvent().GetData(); d != nil && strings.Contains(string(d.GetStdout()), "ready") {
			break
		}
	}

	list, err := e.c.Process().List(ctx, connect.NewRequest(&process.ListRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, p := range list.Msg.GetProcesses() {
		if p.GetPid() == pid && p.GetTag() == tag && p.GetConfig().GetCmd() == "sh" {
			found = true
		}
	}
	if !found {
		t.Fatalf("process %d not in list %v", pid, list.Msg.GetProcesses())
	}

	byTag := &process.ProcessSelector{Selector: &process.ProcessSelector_Tag{Tag: tag}}
	conn, err := e.c.Process().Connect(ctx, connect.NewRequest(&process.ConnectRequest{Process: byTag}))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if !conn.Receive() || conn.Msg().GetEvent().GetStart().GetPid() != pid {
		t.Fatalf("connect did not start with the pid: %v", conn.Err())
	}

	if _, err := e.c.Process().SendSignal(ctx, connect.NewRequest(&process.SendSignalRequest{
		Process: byTag, Signal: process.Signal_SIGNAL_SIGTERM})); err != nil {
		t.Fatal(err)
	}
	for _, s := range []interface {
		Receive() bool
		Err() error
	}{stream, conn} {
		var end *process.ProcessEvent_EndEvent
		for s.Receive() {
			switch m := s.(type) {
			case *connect.ServerStreamForClient[process.StartResponse]:
				end = m.Msg().GetEvent().GetEnd()
			case *connect.ServerStreamForClient[process.ConnectResponse]:
				end = m.Msg().GetEvent().GetEnd()
			}
			if end != nil {
				break
			}
		}
		if end == nil {
			t.Fatalf("no end event: %v", s.Err())
		}
		if end.GetExited() || end.GetExitCode() != -1 || end.GetStatus() != "signal: terminated" {
			t.Errorf("end = %v, want killed by SIGTERM", end)
		}
	}

	_, err = e.c.Process().SendSignal(ctx, connect.NewRequest(&process.SendSignalRequest{
		Process: byTag, Signal: process.Signal_SIGNAL_SIGKILL}))
	if connect.CodeOf(err) != connect.CodeNotFound {
		t.Errorf("signal to an ended process: %v, want not found", err)
	}
}

func TestProcessPTY(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream, err := e.c.Process().Start(ctx, connect.NewRequest(&process.StartRequest{
		Process: &process.ProcessConfig{Cmd: "sh"},
		Pty:     &process.PTY{Size: &process.PTY_Size{Cols: 100, Rows: 30}},
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	if !stream.Receive() {
		t.Fatal(stream.Err())
	}
	pid := stream.Msg().GetEvent().GetStart().GetPid()
	sel := &process.ProcessSelector{Selector: &process.ProcessSelector_Pid{Pid: pid}}
	if _, err := e.c.Process().Update(ctx, connect.NewRequest(&process.UpdateRequest{
		Process: sel, Pty: &process.PTY{Size: &process.PTY_Size{Cols: 120, Rows: 40}}})); err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.Process().SendInput(ctx, connect.NewRequest(&process.SendInputRequest{
		Process: sel,
		Input:   &process.ProcessInput{Input: &process.ProcessInput_Pty{Pty: []byte("stty size; test -t 0 && echo is-a-tty; exit 7\n")}},
	})); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	var end *process.ProcessEvent_EndEvent
	for stream.Receive() {
		ev := stream.Msg().GetEvent()
		out.Write(ev.GetData().GetPty())
		if end = ev.GetEnd(); end != nil {
			break
		}
	}
	if end == nil || end.GetExitCode() != 7 {
		t.Fatalf("end %v, err %v", end, stream.Err())
	}
	if !strings.Contains(out.String(), "40 120") || !strings.Contains(out.String(), "is-a-tty") {
		t.Errorf("terminal output %q lacks the size or tty check", out.String())
	}
	if _, err := e.c.Process().CloseStdin(ctx, connect.NewRequest(&process.CloseStdinRequest{Process: sel})); connect.CodeOf(err) != connect.CodeNotFound {
		t.Errorf("close stdin of an ended process: %v", err)
	}
}

func TestExecAsUsers(t *testing.T) {
	if !isRoot() {
		t.Skip("needs root: switches uid and gid")
	}
	e := newEnv(t)
	tests := []struct {
		user string
		want string
	}{
		{user: "", want: "1000 1000 1000 4242"},
		{user: "user", want: "1000 1000 1000 4242"},
		{user: "root", want: "0 0 0"},
	}
	for _, tt := range tests {
		t.Run("user="+tt.user, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			res, stdout, stderr, err := e.run(t, ctx, client.ExecOptions{
				Cmd: []string{"sh", "-c", `echo $(id -u) $(id -g) $(id -G)`}, User: tt.user})
			if err != nil || res.ExitCode != 0 {
				t.Fatalf("exec: %v %d %s", err, res.ExitCode, stderr)
			}
			if strings.TrimSpace(stdout) != tt.want {
				t.Errorf("ids %q, want %q", strings.TrimSpace(stdout), tt.want)
			}
		})
	}
	ctx := context.Background()
	_, _, _, err := e.run(t, ctx, client.ExecOptions{Cmd: []string{"true"}, User: "nobody-here"})
	if !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("unknown user: %v, want invalid argument (not found would read as command not found)", err)
	}
}

func TestStreamInputAndKeepalive(t *testing.T) {
	e := newEnv(t, func(o *agent.Options) { o.KeepaliveInterval = 50 * time.Millisecond })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stdin := true
	stream, err := e.c.Process().Start(ctx, connect.NewRequest(&process.StartRequest{
		Process: &process.ProcessConfig{Cmd: "sh", Args: []string{"-c", "sleep 0.3; cat"}},
		Stdin:   &stdin,
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	if !stream.Receive() {
		t.Fatal(stream.Err())
	}
	sel := &process.ProcessSelector{Selector: &process.ProcessSelector_Pid{Pid: stream.Msg().GetEvent().GetStart().GetPid()}}

	in := e.c.Process().StreamInput(ctx)
	msgs := []*process.StreamInputRequest{
		{Event: &process.StreamInputRequest_Start{Start: &process.StreamInputRequest_StartEvent{Process: sel}}},
		{Event: &process.StreamInputRequest_Data{Data: &process.StreamInputRequest_DataEvent{
			Input: &process.ProcessInput{Input: &process.ProcessInput_Stdin{Stdin: []byte("one ")}}}}},
		{Event: &process.StreamInputRequest_Keepalive{Keepalive: &process.StreamInputRequest_KeepAlive{}}},
		{Event: &process.StreamInputRequest_Data{Data: &process.StreamInputRequest_DataEvent{
			Input: &process.ProcessInput{Input: &process.ProcessInput_Stdin{Stdin: []byte("two")}}}}},
	}
	for _, m := range msgs {
		if err := in.Send(m); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := in.CloseAndReceive(); err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.Process().CloseStdin(ctx, connect.NewRequest(&process.CloseStdinRequest{Process: sel})); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	keepalives := 0
	var end *process.ProcessEvent_EndEvent
	for stream.Receive() {
		ev := stream.Msg().GetEvent()
		out.Write(ev.GetData().GetStdout())
		if ev.GetKeepalive() != nil {
			keepalives++
		}
		if end = ev.GetEnd(); end != nil {
			break
		}
	}
	if end == nil || !end.GetExited() || end.GetExitCode() != 0 || end.GetStatus() != "exit status 0" {
		t.Fatalf("end = %v, err %v", end, stream.Err())
	}
	if out.String() != "one two" {
		t.Errorf("output %q, want the input in order", out.String())
	}
	if keepalives == 0 {
		t.Error("no keepalive events on a 300 ms stream with a 50 ms interval")
	}
}

func TestExecOutputErrorStopsCommand(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stop := errors.New("consumer full")
	var pid uint32
	_, err := e.c.Exec(ctx, client.ExecOptions{Cmd: []string{"yes"}}, func(p uint32) { pid = p },
		func(int, []byte) error { return stop })
	if !errors.Is(err, stop) {
		t.Fatalf("err = %v, want the consumer's error", err)
	}
	deadline := time.Now().Add(3 * time.Second)
	for len(groupAlive(t, int(pid))) > 0 {
		if time.Now().After(deadline) {
			t.Fatal("the command kept running after its output was refused")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
