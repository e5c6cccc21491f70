//go:build !race

package wjs

const raceEnabled = false
