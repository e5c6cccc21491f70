package kubernetes_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestGoSDKOnKubernetes runs the Go SDK's suite against the daemon
// (test/sdkdriver, which needs the build tag sdkdriver): create, exec,
// files, tar, a session, a background process, stop and start, a snapshot
// restored into a new sandbox, and delete, all on the cluster.
func TestGoSDKOnKubernetes(t *testing.T) {
	c := clusterFor(t)
	d := startPaddock(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	importImage(ctx, t, d, "busybox")
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	goBin := "go"
	if g := os.Getenv("GO"); g != "" {
		goBin = g
	}
	cmd := exec.CommandContext(ctx, goBin, "test", "-count=1", "-v", "-tags", "sdkdriver", "-run", "^TestGoSDKAgainstDaemon$", "./test/sdkdriver")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "PADDOCK_SOCKET="+d.socket, "PADDOCK_SDK_IMAGE=busybox")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestGoSDKAgainstDaemon") {
		t.Fatalf("the Go SDK suite against the kubernetes backend: %v\n%s", err, out)
	}
	var left struct{ Sandboxes []struct{ ID string } }
	if err := json.Unmarshal([]byte(d.must("--json", "ls")), &left); err != nil {
		t.Fatal(err)
	}
	if len(left.Sandboxes) > 0 {
		t.Errorf("sandboxes left after the SDK suite: %+v", left.Sandboxes)
	}
}
