package config

import (
	"fmt"
	"net"
	"strings"
)

// DefaultPreviewListen keeps preview URLs on the host unless the operator
// chooses to publish them.
const DefaultPreviewListen = "127.0.0.1:8090"

// PreviewOff disables the preview listener.
const PreviewOff = "off"

func (c *Config) validatePreview() []error {
	var errs []error
	if c.PreviewListen != PreviewOff {
		if _, _, err := net.SplitHostPort(c.PreviewListen); err != nil {
			errs = append(errs, fmt.Errorf("preview listen %q: want host:port or %q", c.PreviewListen, PreviewOff))
		}
	}
	if !validDomain(c.PreviewDomain) {
		errs = append(errs, fmt.Errorf("preview domain %q: want a DNS name such as localhost or preview.example.com", c.PreviewDomain))
	}
	return errs
}

// validDomain accepts lowercase DNS names: preview hosts are matched
// against it after the Host header is lowercased.
func validDomain(d string) bool {
	if d == "" || len(d) > 200 {
		return false
	}
	for _, label := range strings.Split(d, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
				return false
			}
		}
	}
	return true
}
