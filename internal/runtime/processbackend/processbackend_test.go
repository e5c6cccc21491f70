package processbackend_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/internal/agent/client"
	"github.com/paddock-dev/paddock/internal/runtime"
	"github.com/paddock-dev/paddock/internal/runtime/processbackend"
	"github.com/paddock-dev/paddock/internal/runtime/runtimetest"
)

func TestMain(m *testing.M) {
	processbackend.RunAgentIfChild()
	os.Exit(m.Run())
}

func TestSuite(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	runtimetest.Run(t, func(t *testing.T) runtime.Backend {
		return processbackend.ForTest(t, processbackend.Options{StopGrace: 5 * time.Second})
	}, runtimetest.Options{AgentBinary: self, Unisolated: true})
}

// TestWaitSaysWhy: an agent that dies unasked is reported by Wait with
// its signal, so the controller records the death.
func TestWaitSaysWhy(t *testing.T) {
	b := processbackend.ForTest(t, processbackend.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id := runtimetest.NewID(t)
	info, err := b.Start(ctx, runtime.Spec{ID: id, Resources: runtime.Resources{CPUMillis: 100, MemoryBytes: 64 << 20}})
	if err != nil {
		t.Fatal(err)
	}
	c := client.New(info.AgentSocket)
	defer c.Close()
	if err := c.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.Signal(ctx, id, 9); err != nil {
		t.Fatal(err)
	}
	exit, err := b.Wait(ctx, id)
	if err != nil || !exit.Known || !strings.Contains(exit.Reason, "signal 9") {
		t.Fatalf("Wait = %+v, %v; want a known exit by signal 9", exit, err)
	}
	if st, err := b.Status(ctx, id); err != nil || st != runtime.StatusStopped {
		t.Fatalf("Status after death = %s, %v; want stopped", st, err)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(filepath.Dir(info.AgentSocket)), "home")); err != nil {
		t.Errorf("the sandbox's files went with its agent: %v", err)
	}
}

// TestNewInAnAgentChild: a test binary started as an agent whose TestMain
// forgot RunAgentIfChild runs its tests instead; New refuses there, so
// those tests start no agents of their own (each would run the tests
// again, without end).
func TestNewInAnAgentChild(t *testing.T) {
	t.Setenv("PADDOCK_PROCESSBACKEND_AGENT", "1")
	_, err := processbackend.New(processbackend.Options{Dir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "RunAgentIfChild") {
		t.Fatalf("New in an agent child = %v, want a refusal naming RunAgentIfChild", err)
	}
}
