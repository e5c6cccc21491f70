package client_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/internal/agent/client"
	"github.com/paddock-dev/paddock/internal/errdefs"
)

// TestClaimPoolAgent: a pool's agent over real TCP takes one claim; a
// retry of that claim passes, a claim with another token is a conflict,
// and only the claimed token reaches the agent afterwards.
func TestClaimPoolAgent(t *testing.T) {
	pool, mine, theirs := strings.Repeat("p0", 32), strings.Repeat("m1", 32), strings.Repeat("t2", 32)
	addr := tcpAgentWith(t, "", pool)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	before := client.NewTCP(addr, pool)
	defer before.Close()
	short, scancel := context.WithTimeout(ctx, 300*time.Millisecond)
	err := before.WaitReady(short)
	scancel()
	if err == nil {
		t.Fatal("an unclaimed agent answered its pool's token")
	}
	if err := client.Claim(ctx, addr, pool, mine); err != nil {
		t.Fatalf("claim: %v", err)
	}
	if err := client.Claim(ctx, addr, pool, mine); err != nil {
		t.Fatalf("the same claim again: %v", err)
	}
	if err := client.Claim(ctx, addr, pool, theirs); !errors.Is(err, errdefs.ErrConflict) {
		t.Fatalf("a second claim with another token: %v, want a conflict", err)
	}
	c := client.NewTCP(addr, mine)
	defer c.Close()
	if err := c.WaitReady(ctx); err != nil {
		t.Fatalf("the claimed token: %v", err)
	}
	other := client.NewTCP(addr, theirs)
	defer other.Close()
	short, scancel = context.WithTimeout(ctx, 300*time.Millisecond)
	err = other.WaitReady(short)
	scancel()
	if err == nil {
		t.Fatal("the agent answered a token it refused to be claimed with")
	}
}

// TestClaimWaitsForTheAgent: a claim sent before anything listens ends
// when its context does, as unavailable or past its deadline.
func TestClaimWaitsForTheAgent(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	err := client.Claim(ctx, "127.0.0.1:1", strings.Repeat("p", 64), strings.Repeat("m", 64))
	if !errors.Is(err, errdefs.ErrDeadlineExceeded) {
		t.Fatalf("claim with no agent: %v, want a deadline", err)
	}
}
