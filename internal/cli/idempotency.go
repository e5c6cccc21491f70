package cli

import (
	"fmt"

	"github.com/paddock-dev/paddock/sdk/go/paddock"
	"github.com/spf13/cobra"
)

const idemFlagHelp = "make this command safe to retry: each mutating call it makes carries an Idempotency-Key derived from `KEY` " +
	"and the call, so the same command run again with the same KEY (within 24h) gets its first results instead of running again"

// longRunning are the commands that serve many unrelated calls, where one
// key for all of them would replay a call that was meant to run again.
var longRunning = map[string]bool{"serve": true, "agent": true, "mcp": true}

// applyIdempotencyKey puts --idempotency-key into the command's context,
// where the SDK finds it for every mutating call (paddock.WithIdempotencyKeyBase).
func applyIdempotencyKey(cmd *cobra.Command, key string) error {
	if !cmd.Flags().Changed("idempotency-key") {
		return nil
	}
	for c := cmd; c != nil; c = c.Parent() {
		if longRunning[c.Name()] {
			return fmt.Errorf("--idempotency-key is for one command's calls; paddock %s serves many, each of which must run", c.Name())
		}
	}
	if key == "" || len(key) > paddock.MaxIdempotencyKeyBase {
		return fmt.Errorf("--idempotency-key must be 1 to %d characters (a UUID is a good key)", paddock.MaxIdempotencyKeyBase)
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x21 || key[i] > 0x7e {
			return fmt.Errorf("--idempotency-key must be visible ASCII characters (a UUID is a good key)")
		}
	}
	cmd.SetContext(paddock.WithIdempotencyKeyBase(cmd.Context(), key))
	return nil
}
