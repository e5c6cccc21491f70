package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/sdk/go/paddock"
)

// Feature items: each measures one feature against its baseline in the
// same interleaved run.
const (
	ItemSession  = "session"
	ItemProcPort = "proc-port"
	ItemPreview  = "preview"
	ItemContext  = "context"
	ItemPool     = "pool"
	ItemSnapshot = "snapshot"
	ItemNetwork  = "network"
)

// FeatureItems lists the feature items in run order.
var FeatureItems = []string{ItemSession, ItemProcPort, ItemPreview, ItemContext, ItemPool, ItemPoolBurst, ItemSnapshot, ItemNetwork, ItemProxy, ItemImages, ItemGVisor, ItemMemory, ItemConsole, ItemUserns, ItemWorkspace}

// featureIterations are each feature item's recorded rounds: smaller than
// the core items' so a default run stays within a few minutes on two
// cores. -n lowers them (never raises them).
var featureIterations = map[string]int{
	ItemSession: 30, ItemProcPort: 10, ItemPreview: 20, ItemContext: 20,
	ItemPool: 10, ItemSnapshot: 3, ItemNetwork: 5, ItemProxy: 30, ItemImages: 10, ItemGVisor: 10, ItemMemory: 5, ItemConsole: 10, ItemUserns: 20, ItemWorkspace: 20,
}

// Figure is a measured quantity that is not a latency series: a size, a
// rate, a throughput; Baseline and Ratio are set when it has one.
type Figure struct {
	ID       string  `json:"id"`
	Name     string  `json:"name"`
	Value    float64 `json:"value"`
	Unit     string  `json:"unit"`
	Baseline string  `json:"baseline,omitempty"`
	BaseVal  float64 `json:"baseline_value,omitempty"`
	Ratio    float64 `json:"ratio,omitempty"`
	Note     string  `json:"note,omitempty"`
	Error    string  `json:"error,omitempty"`
}

// interleaveN is interleave with a feature item's own iteration count.
func (s *Suite) interleaveN(ctx context.Context, item string, variants []Variant) []Series {
	n := min(s.o.Iterations, featureIterations[item])
	return Interleave(ctx, InterleaveOptions{
		Iterations: max(n, 1), Warmup: min(s.o.Warmup, 2), Timeout: 3 * time.Minute, Logger: s.log,
	}, variants)
}

// execOut runs a command and returns its stdout, failing on a non-zero exit.
func (s *Suite) execOut(ctx context.Context, id string, opts paddock.ExecOptions) (string, error) {
	var out, errb limitedBuffer
	opts.Stdout, opts.Stderr = &out, &errb
	res, err := s.c.Exec(ctx, id, opts)
	if err != nil {
		return "", err
	}
	if res.ExitCode != 0 {
		return "", fmt.Errorf("%s exited %d: %s", opts.Cmd[0], res.ExitCode, strings.TrimSpace(errb.String()))
	}
	return out.String(), nil
}

// measureSession compares exec in the default shell session with a plain
// exec of `true` on the same sandbox.
func (s *Suite) measureSession(ctx context.Context) Comparison {
	const id, title = "session-exec", "Session exec round trip: `true` in the default session vs plain exec (busybox, runc)"
	names := []string{"exec in session (SDK)", "plain exec (SDK)"}
	sb, err := s.create(ctx, "busybox", api.RuntimeRunc)
	if err != nil {
		return failedComparison(id, title, err, names...)
	}
	defer s.destroy(ctx, sb.ID)
	sessionTrue := func(ctx context.Context) error {
		res, err := s.c.Exec(ctx, sb.ID, paddock.ExecOptions{Cmd: []string{"true"}, Session: api.DefaultSession})
		if err != nil {
			return err
		}
		if res.ExitCode != 0 {
			return fmt.Errorf("true in session exited %d", res.ExitCode)
		}
		return nil
	}
	series := s.interleaveN(ctx, ItemSession, []Variant{
		{Name: names[0], Run: func(ctx context.Context) (time.Duration, error) {
			return Timed(func() error { return sessionTrue(ctx) })
		}},
		{Name: names[1], Run: func(ctx context.Context) (time.Duration, error) {
			return Timed(func() error { return s.execTrue(ctx, sb.ID) })
		}},
	})
	note := "Both on one running sandbox. The session runs the command in its long-lived shell (state such as cwd and variables persists between calls); plain exec forks a fresh process through the agent."
	return NewComparison(id, title, note, series)
}

// measureProcPort compares `proc start` of an HTTP server plus a wait for
// its port with a plain exec of a shell that starts the same server and
// polls the port itself.
func (s *Suite) measureProcPort(ctx context.Context) Comparison {
	const id, title = "proc-port", "Background process to port-ready: `python3 -m http.server` (base, runc)"
	names := []string{"proc start + wait port (SDK)", "exec of sh: start server, poll port"}
	sb, err := s.create(ctx, "base", api.RuntimeRunc)
	if err != nil {
		return failedComparison(id, title, err, names...)
	}
	defer s.destroy(ctx, sb.ID)
	const procPort, shPort = 8101, 8102
	// The shell baseline polls with bash's /dev/tcp every 10 ms, then
	// stops the server so the next round can bind again.
	script := fmt.Sprintf(`python3 -m http.server %d --bind 127.0.0.1 >/dev/null 2>&1 & p=$!
while ! (exec 3<>/dev/tcp/127.0.0.1/%d) 2>/dev/null; do sleep 0.01; done
kill $p; wait $p 2>/dev/null; exit 0`, shPort, shPort)
	series := s.interleaveN(ctx, ItemProcPort, []Variant{
		{Name: names[0], Run: func(ctx context.Context) (time.Duration, error) {
			var pid string
			d, err := Timed(func() error {
				p, err := s.c.StartProcess(ctx, sb.ID, api.StartProcessRequest{
					Cmd: []string{"python3", "-m", "http.server", strconv.Itoa(procPort), "--bind", "127.0.0.1"},
				})
				if err != nil {
					return err
				}
				pid = p.ID
				_, err = s.c.WaitPort(ctx, sb.ID, pid, procPort, time.Minute)
				return err
			})
			if pid != "" {
				kctx := context.WithoutCancel(ctx)
				if _, kerr := s.c.KillProcess(kctx, sb.ID, pid, api.KillProcessRequest{Grace: "5s"}); kerr != nil && err == nil {
					err = fmt.Errorf("kill: %w", kerr)
				}
			}
			return d, err
		}},
		{Name: names[1], Run: func(ctx context.Context) (time.Duration, error) {
			return Timed(func() error {
				_, err := s.execOut(ctx, sb.ID, paddock.ExecOptions{Cmd: []string{"bash", "-c", script}})
				return err
			})
		}},
	})
	note := "Both start the same server in the same sandbox and end once its port accepts connections. " +
		"The baseline is one plain exec of a bash script that starts the server in the background and polls the port every 10 ms (then stops it); " +
		"the process API's wait polls inside the agent. Stopping the process API's server is not timed."
	return NewComparison(id, title, note, series)
}

// measureContext compares a code-context run of `x + 1` with a plain exec
// of a fresh python3.
func (s *Suite) measureContext(ctx context.Context) Comparison {
	const id, title = "context-run", "Code-context run round trip: `x + 1` vs exec of `python3 -c 'print(1)'` (base, runc)"
	names := []string{"code context run (SDK)", "exec python3 -c"}
	sb, err := s.create(ctx, "base", api.RuntimeRunc)
	if err != nil {
		return failedComparison(id, title, err, names...)
	}
	defer s.destroy(ctx, sb.ID)
	cc, err := s.c.CreateContext(ctx, sb.ID, api.CreateContextRequest{ID: "bench", Language: "python"})
	if err != nil {
		return failedComparison(id, title, err, names...)
	}
	if _, err := s.c.RunCode(ctx, sb.ID, cc.ID, "x = 1", paddock.RunCodeOptions{}); err != nil {
		return failedComparison(id, title, err, names...)
	}
	series := s.interleaveN(ctx, ItemContext, []Variant{
		{Name: names[0], Run: func(ctx context.Context) (time.Duration, error) {
			return Timed(func() error {
				r, err := s.c.RunCode(ctx, sb.ID, cc.ID, "x + 1", paddock.RunCodeOptions{})
				if err != nil {
					return err
				}
				if r.Status != api.RunOK {
					return fmt.Errorf("run status %s", r.Status)
				}
				if m, ok := r.Main(); !ok || strings.TrimSpace(m.Text()) != "2" {
					return fmt.Errorf("x + 1 gave %+v, want 2", r.Results)
				}
				return nil
			})
		}},
		{Name: names[1], Run: func(ctx context.Context) (time.Duration, error) {
			return Timed(func() error {
				out, err := s.execOut(ctx, sb.ID, paddock.ExecOptions{Cmd: []string{"python3", "-c", "print(1)"}})
				if err == nil && strings.TrimSpace(out) != "1" {
					err = fmt.Errorf("python3 printed %q", out)
				}
				return err
			})
		}},
	})
	note := "The context keeps one Python interpreter alive, so a run skips interpreter start-up; the baseline pays it every time."
	return NewComparison(id, title, note, series)
}

// previewFile sizes: a small page for latency, 64 MiB for throughput.
const (
	previewPort     = 8103
	previewBigBytes = 64 << 20
)

// insideFetch fetches a URL from inside the sandbox and prints its own
// elapsed seconds, so exec's overhead stays out of the baseline.
const insideFetch = `import http.client,sys,time
t=time.perf_counter()
c=http.client.HTTPConnection("127.0.0.1",%d,timeout=60)
c.request("GET",sys.argv[1])
r=c.getresponse()
n=0
while True:
    b=r.read(1<<20)
    if not b: break
    n+=len(b)
d=time.perf_counter()-t
if r.status!=200 or n!=int(sys.argv[2]): sys.exit("status %%d, %%d bytes"%%(r.status,n))
print(d)`

// measurePreview compares GETs through the preview listener with the same
// GETs made inside the sandbox to 127.0.0.1.
func (s *Suite) measurePreview(ctx context.Context) ([]Comparison, []Figure) {
	const smallID, bigID = "preview-small", "preview-64mib"
	smallTitle := "Preview URL: small GET through the preview listener vs inside the sandbox (base, runc)"
	bigTitle := "Preview URL: 64 MiB GET through the preview listener vs inside the sandbox (base, runc)"
	names := []string{"GET via preview URL", "GET inside the sandbox (python, 127.0.0.1)"}
	fail := func(err error) ([]Comparison, []Figure) {
		return []Comparison{failedComparison(smallID, smallTitle, err, names...), failedComparison(bigID, bigTitle, err, names...)}, nil
	}
	sb, err := s.create(ctx, "base", api.RuntimeRunc)
	if err != nil {
		return fail(err)
	}
	defer s.destroy(ctx, sb.ID)
	setup := fmt.Sprintf("mkdir -p /tmp/www && echo hello > /tmp/www/small && head -c %d /dev/zero > /tmp/www/big", previewBigBytes)
	if _, err := s.execOut(ctx, sb.ID, paddock.ExecOptions{Cmd: []string{"sh", "-c", setup}}); err != nil {
		return fail(err)
	}
	p, err := s.c.StartProcess(ctx, sb.ID, api.StartProcessRequest{
		Cmd: []string{"python3", "-m", "http.server", strconv.Itoa(previewPort), "--bind", "127.0.0.1", "--directory", "/tmp/www"},
	})
	if err != nil {
		return fail(err)
	}
	if _, err := s.c.WaitPort(ctx, sb.ID, p.ID, previewPort, time.Minute); err != nil {
		return fail(err)
	}
	pv, err := s.c.Expose(ctx, sb.ID, previewPort)
	if err != nil {
		return fail(err)
	}
	if pv.PathURL == "" {
		return fail(errors.New("expose returned no path URL"))
	}
	// A fresh connection per request, as the inside baseline opens one.
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true, DisableCompression: true}}
	viaPreview := func(ctx context.Context, file string, want int64) (time.Duration, error) {
		return Timed(func() error {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(pv.PathURL, "/")+"/"+file, nil)
			if err != nil {
				return err
			}
			req.Header.Set("X-Paddock-Preview-Token", pv.Token)
			resp, err := hc.Do(req)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			n, err := io.Copy(io.Discard, resp.Body)
			if err != nil {
				return err
			}
			if resp.StatusCode != http.StatusOK || n != want {
				return fmt.Errorf("preview GET: status %d, %d bytes (want %d)", resp.StatusCode, n, want)
			}
			return nil
		})
	}
	inside := func(ctx context.Context, file string, want int64) (time.Duration, error) {
		out, err := s.execOut(ctx, sb.ID, paddock.ExecOptions{Cmd: []string{
			"python3", "-c", fmt.Sprintf(insideFetch, previewPort), "/" + file, strconv.FormatInt(want, 10)}})
		if err != nil {
			return 0, err
		}
		sec, err := strconv.ParseFloat(strings.TrimSpace(out), 64)
		if err != nil || sec < 0 {
			return 0, fmt.Errorf("inside fetch printed %q", out)
		}
		return time.Duration(sec * float64(time.Second)), nil
	}
	small := s.interleaveN(ctx, ItemPreview, []Variant{
		{Name: names[0], Run: func(ctx context.Context) (time.Duration, error) { return viaPreview(ctx, "small", 6) }},
		{Name: names[1], Run: func(ctx context.Context) (time.Duration, error) { return inside(ctx, "small", 6) }},
	})
	big := Interleave(ctx, InterleaveOptions{Iterations: max(1, min(s.o.Iterations, 5)), Warmup: min(s.o.Warmup, 1), Timeout: 3 * time.Minute, Logger: s.log}, []Variant{
		{Name: names[0], Run: func(ctx context.Context) (time.Duration, error) { return viaPreview(ctx, "big", previewBigBytes) }},
		{Name: names[1], Run: func(ctx context.Context) (time.Duration, error) { return inside(ctx, "big", previewBigBytes) }},
	})
	note := "Preview: the harness (on the host) GETs the path-form preview URL with the token header, a new TCP connection each time; the daemon proxies to the agent, which dials the port inside the sandbox. " +
		"Baseline: a Python client inside the sandbox GETs 127.0.0.1 directly and times itself (the exec that runs it is not counted). Same python3 -m http.server for both."
	cs := []Comparison{NewComparison(smallID, smallTitle, note, small), NewComparison(bigID, bigTitle, note, big)}
	var figs []Figure
	if a, b := big[0].Summary, big[1].Summary; a.N > 0 {
		f := Figure{ID: "preview-throughput", Name: "Preview throughput (64 MiB GET, p50)", Unit: "MiB/s",
			Value: mibps(previewBigBytes, a.P50ms), Baseline: names[1]}
		if b.N > 0 {
			f.BaseVal = mibps(previewBigBytes, b.P50ms)
			f.Ratio = Ratio(f.Value, f.BaseVal)
		}
		figs = append(figs, f)
	}
	return cs, figs
}

func mibps(bytes int64, msec float64) float64 {
	if msec <= 0 {
		return 0
	}
	return float64(int64(float64(bytes)/(1<<20)/(msec/1000)*10)) / 10
}
