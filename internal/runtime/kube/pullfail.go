package kube

import (
	"strings"
	"time"
)

// pullGiveUp is how long a pod's image pull may keep failing in a way
// that will not mend by itself (pullFailsForGood) before its create fails,
// instead of at the start timeout. The kubelet retries a pull 10 s after
// the first failure: a create gives up at the second, which also outlasts
// a registry that was a moment behind its own push.
const pullGiveUp = 10 * time.Second

// pullProblems are the words of a failed pull that a retry will not change:
// the node's runtime and the registry disagree on TLS, the registry wants
// credentials the pod's pull Secret does not give, or has no such image.
// Each comes with what to do about it.
var pullProblems = []struct{ words, hint string }{
	{"http response to https client", "the registry speaks plain HTTP and the node pulls over HTTPS: serve the registry over TLS, or tell the nodes' container runtime to pull from it over HTTP (containerd: a hosts.toml for the registry's host)"},
	{"x509:", "the node does not trust the registry's certificate"},
	{"tls:", "the node cannot make a TLS connection to the registry"},
	{"401 unauthorized", credsHint},
	{"403 forbidden", credsHint},
	{"pull access denied", credsHint},
	{"not found", exportHint},
	{"manifest unknown", exportHint},
}

// credsHint is what to do when the registry refuses the node.
const credsHint = "the registry refused the node's credentials: check the pull Secret the pods name (PADDOCK_KUBE_IMAGE_PULL_SECRET) in the sandboxes' namespace"

// exportHint is what to do when the nodes lack Paddock's image.
const exportHint = "the nodes need Paddock's image: `paddock images export` (an image) or `paddock template export` (a template built with steps) writes it for `ctr images import` or a registry"

// imageMissing says whether a pod's reason is its image not pulled.
func imageMissing(reason string) bool {
	return strings.HasPrefix(reason, "ErrImagePull") || strings.HasPrefix(reason, "ImagePullBackOff") || strings.HasPrefix(reason, "ErrImageNeverPull")
}

// pullFailsForGood says whether a pod's reason (podReason) is a pull that
// will fail again as it did, and what to do about it. An image name the
// runtime refuses, or one a node must not pull and does not hold, fails
// the same way each time too.
func pullFailsForGood(reason string) (hint string, ok bool) {
	switch {
	case strings.HasPrefix(reason, "InvalidImageName"):
		return "", true
	case strings.HasPrefix(reason, "ErrImageNeverPull"):
		return exportHint, true
	case !imageMissing(reason):
		return "", false
	}
	lower := strings.ToLower(reason)
	for _, p := range pullProblems {
		if strings.Contains(lower, p.words) {
			return p.hint, true
		}
	}
	return "", false
}

// pullWatch follows a pod's pull failures across its changes: failing
// says, at each change, whether its pull has failed for good for
// pullGiveUp (at once for an image name refused or one the node must not
// pull: nothing is retried for those).
type pullWatch struct {
	since time.Time
	hint  string
}

func (w *pullWatch) failing(reason string, now time.Time) bool {
	hint, ok := pullFailsForGood(reason)
	if !ok {
		w.since = time.Time{}
		return false
	}
	w.hint = hint
	if !imageMissing(reason) || strings.HasPrefix(reason, "ErrImageNeverPull") {
		return true
	}
	if w.since.IsZero() {
		w.since = now
	}
	return now.Sub(w.since) >= pullGiveUp
}

// hintSuffix is "; hint", or "" without one.
func hintSuffix(hint string) string {
	if hint == "" {
		return ""
	}
	return "; " + hint
}
