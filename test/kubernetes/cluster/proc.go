package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// proc is one component of the cluster, run as a child process whose output
// goes to logs/<name>.log in the cluster's directory.
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

func (c *Cluster) start(name, bin string, args ...string) (*proc, error) {
	return c.startEnv(name, bin, nil, args...)
}

// startEnv starts bin (a name under the build's bin/, or an absolute path)
// with env added to this process's environment.
func (c *Cluster) startEnv(name, bin string, env []string, args ...string) (*proc, error) {
	logf, err := os.OpenFile(filepath.Join(c.Dir, "logs", name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	if !filepath.IsAbs(bin) {
		bin = filepath.Join(c.binDir, "bin", bin)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Dir = c.Dir
	// Its own process group, and killed with the test binary if that dies
	// first, so an aborted run does not leave an apiserver behind.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		logf.Close()
		close(p.done)
	}()
	c.procs = append(c.procs, p)
	c.log.Info("started", "component", name, "pid", cmd.Process.Pid)
	return p, nil
}

// exited reports an error when the process is no longer running.
func (p *proc) exited() error {
	select {
	case <-p.done:
		return fmt.Errorf("%s exited: %v", p.name, p.err)
	default:
		return nil
	}
}

// stop sends SIGTERM, then SIGKILL to the process group after grace.
func (p *proc) stop(grace time.Duration) {
	select {
	case <-p.done:
		return
	default:
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
		return
	case <-time.After(grace):
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

// waitFor polls check until it returns nil, a component in watch exits, or
// ctx ends; the last check error is in the result.
func waitFor(ctx context.Context, what string, every time.Duration, watch []*proc, check func(context.Context) error) error {
	var last error
	for {
		for _, p := range watch {
			if err := p.exited(); err != nil {
				return fmt.Errorf("waiting for %s: %w", what, err)
			}
		}
		if last = check(ctx); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w (last: %v)", what, ctx.Err(), last)
		case <-time.After(every):
		}
	}
}

// freePorts returns n distinct loopback TCP ports free at the time of the
// call. Another process may take one before the component binds it; the
// component then fails to start and the run says so.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func isNotExist(err error) bool { return errors.Is(err, os.ErrNotExist) }

// logTails is the last n lines of each component's log, for the error of a
// start that failed: Stop removes the logs with the cluster's directory.
func (c *Cluster) logTails(n int) string {
	var b strings.Builder
	for _, p := range c.procs {
		tailTo(&b, p.name, filepath.Join(c.Dir, "logs", p.name+".log"), n)
	}
	return b.String()
}

// LogTails is the last n lines of each component's log, for a run whose
// tests failed: call it before Stop, which removes the logs.
func (c *Cluster) LogTails(n int) string { return c.logTails(n) }

func tailTo(b *strings.Builder, name, path string, n int) {
	data, err := os.ReadFile(path)
	if err != nil {
		return
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	fmt.Fprintf(b, "\n--- %s (last %d lines) ---\n%s", name, len(lines), strings.Join(lines, "\n"))
}
