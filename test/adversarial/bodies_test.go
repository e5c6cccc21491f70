package adversarial

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/api"
)

// jsonFlood is a JSON document that never ends: an object whose string
// value goes on for size bytes, so a server must read up to its limit to
// learn the body is too large.
type jsonFlood struct {
	head []byte
	left int64
}

func newJSONFlood(prefix string, size int64) *jsonFlood {
	return &jsonFlood{head: []byte(prefix), left: size}
}

func (f *jsonFlood) Read(p []byte) (int, error) {
	if f.left <= 0 {
		return 0, io.EOF
	}
	n := 0
	for n < len(p) && f.left > 0 {
		if len(f.head) > 0 {
			p[n] = f.head[0]
			f.head = f.head[1:]
		} else {
			p[n] = 'A'
		}
		n++
		f.left--
	}
	return n, nil
}

// unixHTTP is an HTTP client for the daemon's socket that, unlike the SDK,
// sends whatever body it is given.
func unixHTTP(socket string) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
		DisableKeepAlives: true,
	}, Timeout: 2 * time.Minute}
}

type bodyAnswer struct {
	status int
	err    api.Error
}

// sendBody sends size bytes of a never-ending JSON string; declared says
// whether the Content-Length goes with it (else it is chunked).
func sendBody(t *testing.T, c *http.Client, method, url, key string, size int64, declared bool) (bodyAnswer, error) {
	t.Helper()
	req, err := http.NewRequest(method, url, newJSONFlood(`{"cmd":["true"],"stdin":"`, size))
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = -1
	if declared {
		req.ContentLength = size
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("X-API-Key", key)
	}
	resp, err := c.Do(req)
	if err != nil {
		return bodyAnswer{}, err
	}
	defer resp.Body.Close()
	a := bodyAnswer{status: resp.StatusCode}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	_ = json.Unmarshal(b, &a.err)
	if a.err.Code == "" { // E2B's error body: {code: <status>, message}
		var e2b struct{ Message string }
		_ = json.Unmarshal(b, &e2b)
		a.err.Message = e2b.Message
	}
	return a, nil
}

// TestOversizedBodies: a body over its route's limit is answered 413
// payload_too_large with a message that says so, on Paddock's API and
// E2B's, whether or not its length was declared.
func TestOversizedBodies(t *testing.T) {
	d := startDaemon(t, daemonOpts{listen: true})
	key, err := d.client.CreateKey(ctxT(t, time.Minute), uniqueName("bodies"))
	if err != nil {
		t.Fatal(err)
	}
	unix := unixHTTP(d.socket)
	tcp := &http.Client{Timeout: 2 * time.Minute}
	const size = 100 << 20
	for _, tc := range []struct {
		name, method, url, key string
		c                      *http.Client
	}{
		{"exec", "POST", "http://paddock/v1/sandboxes/nosuch/exec", "", unix},
		{"secret put", "PUT", "http://paddock/v1/secrets/big", "", unix},
		{"sandbox create", "POST", "http://paddock/v1/sandboxes", "", unix},
		{"sandbox create over TCP", "POST", "http://" + d.listen + "/v1/sandboxes", key.Secret, tcp},
		{"e2b create", "POST", "http://" + d.listen + "/sandboxes", key.Secret, tcp},
	} {
		for _, declared := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s declared=%v", tc.name, declared), func(t *testing.T) {
				a, err := sendBody(t, tc.c, tc.method, tc.url, tc.key, size, declared)
				if err != nil {
					t.Fatalf("no answer, only %v", err)
				}
				if a.status != http.StatusRequestEntityTooLarge || !strings.Contains(a.err.Message, "request body is") || !strings.Contains(a.err.Message, "at most") {
					t.Fatalf("got %d %+v, want 413 saying how large a body may be", a.status, a.err)
				}
				if !strings.HasPrefix(tc.url, "http://"+d.listen+"/sandboxes") && a.err.Code != api.CodePayloadTooLarge {
					t.Errorf("code %q, want %q", a.err.Code, api.CodePayloadTooLarge)
				}
			})
		}
	}
}

// procStatusKB reads a field (VmRSS, VmHWM) of /proc/<pid>/status in kB.
func procStatusKB(t *testing.T, pid int, field string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// TestBodyMemoryBounded: many large bodies at once, declared and not, do
// not grow the daemon past its body budget (set to 64 MiB here) and a
// margin for the decoder's buffers and the runtime.
func TestBodyMemoryBounded(t *testing.T) {
	d := startDaemon(t, daemonOpts{env: []string{"PADDOCK_REQUEST_BODY_MEMORY=64MiB"}})
	pid := d.Process().Pid
	unix := unixHTTP(d.socket)
	before := procStatusKB(t, pid, "VmHWM")
	const n, size = 8, 100 << 20
	var wg sync.WaitGroup
	answers := make([]bodyAnswer, 2*n)
	errs := make([]error, 2*n)
	for i := range 2 * n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			answers[i], errs[i] = sendBody(t, unix, "POST", "http://paddock/v1/sandboxes/nosuch/exec", "", size, i%2 == 0)
		}()
	}
	wg.Wait()
	after := procStatusKB(t, pid, "VmHWM")
	counts := map[int]int{}
	for i, a := range answers {
		if errs[i] != nil {
			t.Errorf("body %d: no answer, only %v", i, errs[i])
			continue
		}
		counts[a.status]++
		if a.status != http.StatusRequestEntityTooLarge && a.status != http.StatusServiceUnavailable {
			t.Errorf("body %d: %d %+v, want 413 (or 503 while the budget is taken)", i, a.status, a.err)
		}
	}
	grew := (after - before) >> 10
	t.Logf("daemon VmHWM %d MiB before, %d MiB after %d concurrent %d MiB bodies (half declared); answers %v", before>>10, after>>10, 2*n, size>>20, counts)
	// Bytes held are within the budget, but a buffer grown by doubling
	// may hold up to twice what it read, and the collector lets the heap
	// reach twice what is live before it runs: about four times the
	// budget at the peak, plus the runtime's own. Unbounded, the sixteen
	// bodies would be 1.6 GiB.
	if grew > 320 {
		t.Errorf("daemon peak RSS grew by %d MiB, want at most 320 MiB with a 64 MiB body budget (four times the budget and the runtime's own: buffers grown by doubling, and garbage the collector has not yet taken)", grew)
	}
}
