package pools

import "time"

// claimRefillDelay holds back the refill a claim triggers. A claimed
// sandbox's first exec follows within milliseconds, and a refill started
// at once (runtime processes, a filesystem mount, an agent starting) would
// compete with it for the CPU on a small host; against the hundred-odd
// milliseconds a refill takes, the delay costs the pool little.
const claimRefillDelay = 150 * time.Millisecond

// KickAfterClaim asks the pool loop to refill once the claimed sandbox's
// first requests have had the host to themselves.
func (p *State) KickAfterClaim() {
	time.AfterFunc(claimRefillDelay, p.Kick)
}
