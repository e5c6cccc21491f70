package sqlite

import (
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/store"
)

// Bounds on what one record may hold. They are far above anything the API
// lets through; they exist so a bug upstream cannot grow the database file
// without limit or build a query SQLite refuses.
const (
	maxIDLen         = 128
	maxNameLen       = 256
	maxTextLen       = 4 << 10  // image, digest, runtime, key prefix
	maxReasonLen     = 16 << 10 // error and transition reasons
	maxMapEntries    = 1024
	maxMapKeyLen     = 1 << 10
	maxMapValueLen   = 64 << 10
	maxMapBytes      = 1 << 20
	maxLabelFilter   = 64
	secretHashLength = 32 // sha256
)

var knownStates = map[string]bool{
	api.StateCreating:    true,
	api.StateRunning:     true,
	api.StatePaused:      true,
	api.StateHibernating: true,
	api.StateHibernated:  true,
	api.StateStopping:    true,
	api.StateStopped:     true,
	api.StateDestroying:  true,
	api.StateDestroyed:   true,
	api.StateError:       true,
}

// checkText rejects strings SQLite or JSON would not give back unchanged:
// JSON replaces invalid UTF-8, and NUL ends a string in C APIs.
func checkText(field, v string, max int) error {
	if len(v) > max {
		return errdefs.Invalid("%s is longer than %d bytes", field, max)
	}
	if !utf8.ValidString(v) {
		return errdefs.Invalid("%s is not valid UTF-8", field)
	}
	if strings.IndexByte(v, 0) >= 0 {
		return errdefs.Invalid("%s contains a NUL byte", field)
	}
	return nil
}

func checkID(field, v string) error {
	if v == "" {
		return errdefs.Invalid("%s is empty", field)
	}
	return checkText(field, v, maxIDLen)
}

func checkState(field, v string) error {
	if !knownStates[v] {
		return errdefs.Invalid("%s %q is not a sandbox state", field, truncate(v))
	}
	return nil
}

// checkTime rejects times that unix nanoseconds cannot hold (before 1678 or
// after 2262), which would otherwise come back as a different instant.
func checkTime(field string, t time.Time) error {
	if t.IsZero() {
		return nil
	}
	if !time.Unix(0, t.UnixNano()).Equal(t) {
		return errdefs.Invalid("%s %s is outside the storable range", field, t.UTC().Format(time.RFC3339))
	}
	return nil
}

func checkMap(field string, m map[string]string) error {
	if len(m) > maxMapEntries {
		return errdefs.Invalid("%s has more than %d entries", field, maxMapEntries)
	}
	total := 0
	for k, v := range m {
		if err := checkText(field+" key", k, maxMapKeyLen); err != nil {
			return err
		}
		if err := checkText(field+" value", v, maxMapValueLen); err != nil {
			return err
		}
		total += len(k) + len(v)
	}
	if total > maxMapBytes {
		return errdefs.Invalid("%s is larger than %d bytes", field, maxMapBytes)
	}
	return nil
}

func checkResources(r api.Resources) error {
	if math.IsNaN(r.CPU) || math.IsInf(r.CPU, 0) || r.CPU < 0 {
		return errdefs.Invalid("resources: cpu must be a finite, non-negative number")
	}
	if r.MemoryMB < 0 || r.DiskMB < 0 || r.Pids < 0 {
		return errdefs.Invalid("resources: sizes must not be negative")
	}
	return nil
}

func validateSandbox(s *store.Sandbox) error {
	if s == nil {
		return errdefs.Invalid("sandbox is nil")
	}
	if err := checkID("sandbox id", s.ID); err != nil {
		return err
	}
	if err := checkState("sandbox state", s.State); err != nil {
		return err
	}
	texts := []struct {
		field, v string
		max      int
	}{
		{"sandbox name", s.Name, maxNameLen},
		{"error reason", s.ErrorReason, maxReasonLen},
		{"image", s.Image, maxTextLen},
		{"image digest", s.ImageDigest, maxTextLen},
		{"runtime", s.Runtime, maxTextLen},
	}
	for _, f := range texts {
		if err := checkText(f.field, f.v, f.max); err != nil {
			return err
		}
	}
	if err := checkResources(s.Resources); err != nil {
		return err
	}
	if err := checkMap("env", s.Env); err != nil {
		return err
	}
	if err := checkMap("labels", s.Labels); err != nil {
		return err
	}
	if s.SleepAfter < 0 {
		return errdefs.Invalid("sleep_after must not be negative")
	}
	if s.Timeout < 0 {
		return errdefs.Invalid("timeout must not be negative")
	}
	for _, f := range []struct {
		field string
		t     time.Time
	}{
		{"created_at", s.CreatedAt},
		{"updated_at", s.UpdatedAt},
		{"last_activity_at", s.LastActivityAt},
	} {
		if err := checkTime(f.field, f.t); err != nil {
			return err
		}
	}
	return nil
}

func validateKey(k *store.Key) error {
	if k == nil {
		return errdefs.Invalid("key is nil")
	}
	if err := checkID("key id", k.ID); err != nil {
		return err
	}
	if err := checkText("key name", k.Name, maxNameLen); err != nil {
		return err
	}
	if err := checkText("key prefix", k.Prefix, maxTextLen); err != nil {
		return err
	}
	if len(k.SecretHash) != secretHashLength {
		return errdefs.Invalid("key secret hash must be %d bytes", secretHashLength)
	}
	switch k.Scope {
	case "", api.KeyScopeOwn, api.KeyScopeAll:
	default:
		return errdefs.Invalid("key scope %q: want %s or %s", truncate(k.Scope), api.KeyScopeOwn, api.KeyScopeAll)
	}
	if err := checkText("key creator", k.CreatedBy, maxNameLen); err != nil {
		return err
	}
	return checkTime("created_at", k.CreatedAt)
}

func validateStateChange(c store.StateChange) error {
	if err := checkID("sandbox id", c.SandboxID); err != nil {
		return err
	}
	if c.From != "" {
		if err := checkState("from state", c.From); err != nil {
			return err
		}
	}
	if err := checkState("to state", c.To); err != nil {
		return err
	}
	if err := checkText("reason", c.Reason, maxReasonLen); err != nil {
		return err
	}
	return checkTime("at", c.At)
}

// truncate keeps a bad value short enough to echo back in a message.
func truncate(s string) string {
	const n = 64
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
