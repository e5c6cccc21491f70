package osproc

import (
	"errors"
	"os"
	"testing"
	"time"
)

// A read on the master must obey deadlines, also after a resize: gVisor's
// master never reports EIO, so the drain deadline is the only thing that
// ends a terminal's output there. Holding the slave open reproduces the
// "no EIO" condition on Linux.
func TestPTYMasterReadDeadline(t *testing.T) {
	for _, tc := range []struct {
		name   string
		resize bool
	}{{"fresh", false}, {"after resize", true}} {
		t.Run(tc.name, func(t *testing.T) {
			m, s, err := OpenPTY()
			if err != nil {
				t.Skipf("no terminals here: %v", err)
			}
			t.Cleanup(func() { _, _ = m.Close(), s.Close() })
			if tc.resize {
				if err := SetWinsize(m, 100, 30); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := s.Write([]byte("x\n")); err != nil {
				t.Fatal(err)
			}
			got := make(chan error, 1)
			go func() {
				buf := make([]byte, 64)
				var n int
				for {
					_ = m.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
					k, err := m.Read(buf)
					n += k
					if err != nil {
						if n == 0 {
							err = errors.New("the pending output was not read")
						}
						got <- err
						return
					}
				}
			}()
			select {
			case err := <-got:
				if !errors.Is(err, os.ErrDeadlineExceeded) {
					t.Fatalf("read ended with %v, want the deadline", err)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("a read on the master ignored its deadline")
			}
		})
	}
}
