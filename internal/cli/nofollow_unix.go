//go:build unix

package cli

import "syscall"

// noFollow makes opening a final-component symlink fail instead of
// following it.
const noFollow = syscall.O_NOFOLLOW
