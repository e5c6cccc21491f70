package adversarial

import (
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/api"
)

// TestRestartAnswersStarting: while a restarted daemon starts (runtimes,
// networks, re-adopting its sandboxes), its socket answers 503 starting
// with a Retry-After instead of refusing connections, then serves.
func TestRestartAnswersStarting(t *testing.T) {
	d := startDaemon(t, daemonOpts{})
	sb := create(t, d, api.CreateSandboxRequest{Image: "busybox"})
	d.stop()

	c := unixHTTP(d.socket)
	c.Timeout = 5 * time.Second
	type seen struct {
		status     int
		retryAfter string
		state      string
	}
	var (
		mu      sync.Mutex
		answers []seen
		refused int // connection errors after the first answer
	)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			default:
			}
			resp, err := c.Get("http://paddock/v1/health")
			mu.Lock()
			if err != nil {
				if len(answers) > 0 && answers[len(answers)-1].status != http.StatusOK {
					refused++
				}
			} else {
				b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
				resp.Body.Close()
				var body struct{ Status string }
				_ = json.Unmarshal(b, &body)
				answers = append(answers, seen{resp.StatusCode, resp.Header.Get("Retry-After"), body.Status})
			}
			mu.Unlock()
			time.Sleep(2 * time.Millisecond)
		}
	}()
	d.start()
	close(done)
	wg.Wait()

	starting := 0
	for _, a := range answers {
		if a.status == http.StatusServiceUnavailable {
			starting++
			if a.retryAfter == "" || a.state != "starting" {
				t.Errorf("a 503 while starting without Retry-After or status starting: %+v", a)
			}
		}
	}
	t.Logf("%d answers while restarting, %d of them 503 starting, %d refused connections between", len(answers), starting, refused)
	if starting == 0 {
		t.Errorf("no 503 starting answer during the restart: the socket answered only once the daemon was ready (answers %v)", answers)
	}
	if refused > 0 {
		t.Errorf("%d connections were refused after the socket first answered", refused)
	}
	if out, code := execOut(t, d, sb.ID, "true"); code != 0 {
		t.Fatalf("sandbox after the restart: %d %s", code, out)
	}
}
