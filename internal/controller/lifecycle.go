package controller

import (
	"fmt"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/errdefs"
)

// transitions is the sandbox lifecycle (docs/architecture.md): creating ->
// running <-> paused, running or paused -> hibernating -> hibernated ->
// running (memory on disk, hibernate.go), running -> stopping -> stopped
// -> running, any -> destroying -> destroyed, and error from anywhere a
// step can fail. A stopped sandbox starts again through creating (its
// filesystem is kept); a hibernated one that is stopped drops its memory.
var transitions = map[string][]string{
	api.StateCreating:    {api.StateRunning, api.StateError, api.StateDestroying},
	api.StateRunning:     {api.StatePaused, api.StateHibernating, api.StateStopping, api.StateError, api.StateDestroying},
	api.StatePaused:      {api.StateRunning, api.StateHibernating, api.StateStopping, api.StateError, api.StateDestroying},
	api.StateHibernating: {api.StateHibernated, api.StateRunning, api.StateStopped, api.StateError, api.StateDestroying},
	api.StateHibernated:  {api.StateRunning, api.StateStopping, api.StateError, api.StateDestroying},
	api.StateStopping:    {api.StateStopped, api.StateError, api.StateDestroying},
	api.StateStopped:     {api.StateCreating, api.StateError, api.StateDestroying},
	api.StateError:       {api.StateCreating, api.StateStopped, api.StateDestroying},
	api.StateDestroying:  {api.StateDestroyed, api.StateError},
	api.StateDestroyed:   {},
}

// InvalidTransitionError says a sandbox cannot go from its state to another.
type InvalidTransitionError struct {
	ID, From, To string
}

func (e *InvalidTransitionError) Error() string {
	return fmt.Sprintf("sandbox %s is %s and cannot become %s", e.ID, e.From, e.To)
}

// Unwrap makes the error an errdefs.ErrConflict for the API.
func (e *InvalidTransitionError) Unwrap() error { return errdefs.ErrConflict }

func canTransition(from, to string) bool {
	for _, s := range transitions[from] {
		if s == to {
			return true
		}
	}
	return false
}

func checkTransition(id, from, to string) error {
	if !canTransition(from, to) {
		return &InvalidTransitionError{ID: id, From: from, To: to}
	}
	return nil
}
