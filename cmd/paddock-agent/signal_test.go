package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMain lets the test binary run as the agent itself (runAsAgent).
func TestMain(m *testing.M) {
	if os.Getenv(runAsAgent) == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

const runAsAgent = "PADDOCK_AGENT_TEST_RUN_AS_AGENT"

// TestExitRecordOfAnEarlySignal: a SIGTERM sent the moment the agent's
// socket appears (when the daemon takes the sandbox for running) is the
// reason the agent records, never "status 0": the daemon reads that
// record to say why a sandbox stopped while it was not watching.
func TestExitRecordOfAnEarlySignal(t *testing.T) {
	for i := range 10 {
		dir := t.TempDir()
		sock := filepath.Join(dir, "agent.sock")
		cmd := exec.Command(os.Args[0], "agent", "--socket", sock)
		cmd.Env = append(os.Environ(), runAsAgent+"=1")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(20 * time.Second)
		for {
			if _, err := os.Lstat(sock); err == nil {
				break
			}
			if time.Now().After(deadline) {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
				t.Fatalf("round %d: the agent never listened", i)
			}
			time.Sleep(time.Millisecond)
		}
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()
		b, err := os.ReadFile(filepath.Join(dir, "agent.exit"))
		if got := strings.TrimSpace(string(b)); err != nil || got != "signal 15" {
			t.Fatalf("round %d: exit record %q (%v), want signal 15", i, got, err)
		}
	}
}
