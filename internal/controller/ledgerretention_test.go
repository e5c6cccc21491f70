package controller

import (
	"testing"
	"time"
)

func TestLedgerPurgeEvery(t *testing.T) {
	for _, c := range []struct{ retention, want time.Duration }{
		{30 * 24 * time.Hour, time.Hour},
		{2 * time.Hour, 30 * time.Minute},
		{5 * time.Second, 1250 * time.Millisecond},
		{time.Second, time.Second},
		{time.Millisecond, time.Second},
	} {
		if got := ledgerPurgeEvery(c.retention); got != c.want {
			t.Errorf("ledgerPurgeEvery(%s) = %s, want %s", c.retention, got, c.want)
		}
	}
}
