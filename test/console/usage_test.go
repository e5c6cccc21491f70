package console

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/testdaemon"
	"github.com/paddock-dev/paddock/sdk/go/paddock"
)

// TestEventStreamUsage: a stream that asks for usage gets the CPU and
// memory of its caller's running sandboxes, from real cgroups, and never
// another tenant's.
func TestEventStreamUsage(t *testing.T) {
	d := testdaemon.Start(t, testdaemon.Options{Listen: true})
	ctx := testdaemon.Ctx(t, 5*time.Minute)
	keyA, err := d.Client.CreateKey(ctx, testdaemon.UniqueName("usage-a"))
	if err != nil {
		t.Fatal(err)
	}
	keyB, err := d.Client.CreateKey(ctx, testdaemon.UniqueName("usage-b"))
	if err != nil {
		t.Fatal(err)
	}
	asA := &paddock.Client{URL: "http://" + d.Listen, APIKey: keyA.Secret}
	asB := &paddock.Client{URL: "http://" + d.Listen, APIKey: keyB.Secret}
	mine := testdaemon.Create(t, asA, api.CreateSandboxRequest{Image: "busybox"})
	theirs := testdaemon.Create(t, asB, api.CreateSandboxRequest{Image: "busybox"})
	// Keep one CPU busy in mine.
	if _, err := asA.StartProcess(ctx, mine.ID, api.StartProcessRequest{Cmd: []string{"sh", "-c", "while :; do :; done"}}); err != nil {
		t.Fatal(err)
	}

	sctx, cancel := context.WithTimeout(ctx, 3*api.UsageInterval+30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(sctx, http.MethodGet, "http://"+d.Listen+"/v1/events?usage=true", nil)
	req.Header.Set("Authorization", "Bearer "+keyA.Secret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 16<<20)
	samples := 0
	for sc.Scan() {
		var ev api.Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("event %q: %v", sc.Text(), err)
		}
		if ev.Type != api.StreamUsage {
			continue
		}
		samples++
		var got *api.SandboxUsage
		for i, u := range ev.Usage {
			if u.ID == theirs.ID {
				t.Fatalf("a usage sample named another key's sandbox: %+v", u)
			}
			if u.ID == mine.ID {
				got = &ev.Usage[i]
			}
		}
		if got == nil || got.MemoryBytes == 0 || got.MemoryLimitBytes == 0 || got.DiskTotalBytes == 0 {
			t.Fatalf("sample %d: %+v; want mine with its memory and disk", samples, ev.Usage)
		}
		if samples == 1 {
			if got.CPUPercent != nil {
				t.Errorf("the first sample has a CPU figure (%v) with nothing to compare", *got.CPUPercent)
			}
			continue
		}
		// A busy loop: most of one CPU, whatever else the machine does.
		if got.CPUPercent == nil || *got.CPUPercent < 20 || *got.CPUPercent > 150 {
			t.Errorf("sample %d: cpu %v; want about 100%% of one CPU", samples, got.CPUPercent)
		}
		return
	}
	t.Fatalf("the stream ended after %d usage samples: %v", samples, sc.Err())
}
