//go:build race

package wjs

// raceEnabled: the race detector reserves terabytes of address space, so
// the child sets no address-space limit under it (tests only).
const raceEnabled = true
