package kube

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/paddock-dev/paddock/internal/errdefs"
)

type netTimeout struct{}

func (netTimeout) Error() string   { return "i/o timeout" }
func (netTimeout) Timeout() bool   { return true }
func (netTimeout) Temporary() bool { return true }

// TestAPIErrTimeouts: a call the API server never answered says so, in
// every form client-go reports it, and is unavailable (retryable), not a
// bare transport error.
func TestAPIErrTimeouts(t *testing.T) {
	gr := schema.GroupResource{Resource: "secrets"}
	for name, err := range map[string]error{
		"client deadline": &url.Error{Op: "Get", URL: "https://api/x", Err: fmt.Errorf("wrapped: %w", context.DeadlineExceeded)},
		"net timeout":     &url.Error{Op: "Get", URL: "https://api/x", Err: netTimeout{}},
		"server timeout":  apierrors.NewServerTimeout(gr, "get", 1),
		"gateway timeout": apierrors.NewTimeoutError("slow", 1),
	} {
		got := apiErr(err)
		if !strings.Contains(got.Error(), "API server did not answer in time") || !errors.Is(got, errdefs.ErrUnavailable) {
			t.Errorf("%s: apiErr = %v", name, got)
		}
	}
	if got := apiErr(apierrors.NewNotFound(gr, "x")); !errors.Is(got, errdefs.ErrNotFound) || strings.Contains(got.Error(), "in time") {
		t.Errorf("not found: apiErr = %v", got)
	}
}
