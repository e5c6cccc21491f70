package egress

import (
	"fmt"
	"net/textproto"
	"strings"

	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/lazyre"
)

// Limits on injection rules and templates: they are outside input.
const (
	MaxInjections     = 64
	maxTemplateLen    = 8 << 10
	maxTemplateParts  = 16
	secretRefPrefix   = "{{secret:"
	secretRefSuffix   = "}}"
	maxHeaderNameLen  = 128
	MaxSecretValueLen = 64 << 10
)

var secretNameRE = lazyre.New(`^[a-z0-9][a-z0-9._-]{0,62}$`)

// ValidSecretName checks a secret's name.
func ValidSecretName(name string) error {
	if !secretNameRE.MatchString(name) {
		return errdefs.Invalid("secret name %q: want 1 to 63 of a-z, 0-9, '.', '_', '-', starting with a letter or digit", trunc(name))
	}
	return nil
}

// ValidSecretValue checks a secret's value without ever quoting it: it
// becomes a header value, so CR, LF and NUL would split or end a header.
func ValidSecretValue(v []byte) error {
	if len(v) == 0 || len(v) > MaxSecretValueLen {
		return errdefs.Invalid("secret value must be 1 byte to %d KiB, got %d bytes", MaxSecretValueLen>>10, len(v))
	}
	for _, c := range v {
		switch c {
		case 0:
			return errdefs.Invalid("secret value contains a NUL byte")
		case '\r', '\n':
			return errdefs.Invalid("secret value contains a line break (CR or LF); a trailing newline from a file must be removed")
		}
	}
	return nil
}

// forbiddenHeaders are those a proxy must own: framing, routing and
// hop-by-hop fields. Setting them would let a rule desynchronise or
// redirect the request rather than authenticate it.
var forbiddenHeaders = map[string]bool{
	"Host": true, "Content-Length": true, "Transfer-Encoding": true, "Connection": true,
	"Upgrade": true, "Keep-Alive": true, "Te": true, "Trailer": true, "Expect": true,
}

// NormalizeHeaderName checks an injected header's name and returns its
// canonical form.
func NormalizeHeaderName(h string) (string, error) {
	if h == "" || len(h) > maxHeaderNameLen {
		return "", errdefs.Invalid("header name: 1 to %d characters", maxHeaderNameLen)
	}
	for i := 0; i < len(h); i++ {
		if !isTokenChar(h[i]) {
			return "", errdefs.Invalid("header name %q: character %q is not allowed in an HTTP field name", trunc(h), h[i])
		}
	}
	c := textproto.CanonicalMIMEHeaderKey(h)
	if forbiddenHeaders[c] || strings.HasPrefix(c, "Proxy-") {
		return "", errdefs.Invalid("header %s cannot be injected: it is the proxy's own (framing, routing or hop-by-hop)", c)
	}
	return c, nil
}

// isTokenChar reports whether c may appear in an RFC 9110 token.
func isTokenChar(c byte) bool {
	if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// Template is a parsed header value: literal text and secret references.
type Template []TemplatePart

// TemplatePart is literal Text, or the secret named Secret when set.
type TemplatePart struct {
	Text   string
	Secret string
}

// ParseTemplate parses a header value template: "{{secret:NAME}}" stands
// for a secret, everything else is literal and must itself be a valid
// header value (no control characters but tab).
func ParseTemplate(s string) (Template, error) {
	if s == "" || len(s) > maxTemplateLen {
		return nil, errdefs.Invalid("header value template: 1 to %d bytes", maxTemplateLen)
	}
	var t Template
	rest := s
	for rest != "" {
		i := strings.Index(rest, secretRefPrefix)
		if i < 0 {
			t = append(t, TemplatePart{Text: rest})
			break
		}
		if i > 0 {
			t = append(t, TemplatePart{Text: rest[:i]})
		}
		rest = rest[i+len(secretRefPrefix):]
		j := strings.Index(rest, secretRefSuffix)
		if j < 0 {
			return nil, errdefs.Invalid("header value template: %q is not closed by %q", secretRefPrefix, secretRefSuffix)
		}
		name := rest[:j]
		if err := ValidSecretName(name); err != nil {
			return nil, fmt.Errorf("header value template: %w", err)
		}
		t = append(t, TemplatePart{Secret: name})
		rest = rest[j+len(secretRefSuffix):]
		if len(t) > maxTemplateParts {
			return nil, errdefs.Invalid("header value template: more than %d parts", maxTemplateParts)
		}
	}
	for _, p := range t {
		for k := 0; k < len(p.Text); k++ {
			if c := p.Text[k]; c < 0x20 && c != '\t' || c == 0x7f {
				return nil, errdefs.Invalid("header value template: control character %q not allowed", c)
			}
		}
	}
	return t, nil
}

// Secrets lists the secret names the template references.
func (t Template) Secrets() []string {
	var out []string
	for _, p := range t {
		if p.Secret != "" {
			out = append(out, p.Secret)
		}
	}
	return out
}

// Render fills in the secrets. Errors never carry a secret's value.
func (t Template) Render(lookup func(name string) (string, error)) (string, error) {
	v, _, err := t.render(lookup)
	return v, err
}

// render is Render that also returns the secret values it used.
func (t Template) render(lookup func(name string) (string, error)) (string, []string, error) {
	var b strings.Builder
	var secrets []string
	for _, p := range t {
		if p.Secret == "" {
			b.WriteString(p.Text)
			continue
		}
		if lookup == nil {
			return "", nil, fmt.Errorf("secret %q: no secret store: %w", p.Secret, errdefs.ErrUnavailable)
		}
		v, err := lookup(p.Secret)
		if err != nil {
			return "", nil, fmt.Errorf("secret %q: %w", p.Secret, err)
		}
		b.WriteString(v)
		secrets = append(secrets, v)
	}
	return b.String(), secrets, nil
}

// Injection is one credential injection rule (normalised).
type Injection struct {
	Host   string // glob, same syntax as the allow rules
	Header string // canonical field name
	Value  string // template
}

// NormalizeInjection validates a rule and canonicalises its host and header.
func NormalizeInjection(in Injection) (Injection, error) {
	h, err := NormalizeGlob(in.Host)
	if err != nil {
		return Injection{}, fmt.Errorf("injection host: %w", err)
	}
	name, err := NormalizeHeaderName(in.Header)
	if err != nil {
		return Injection{}, err
	}
	if _, err := ParseTemplate(in.Value); err != nil {
		return Injection{}, err
	}
	return Injection{Host: h, Header: name, Value: in.Value}, nil
}

// injectionsFor returns, per header, the first rule whose host matches.
func (p Policy) injectionsFor(host string) []Injection {
	if len(p.Inject) == 0 {
		return nil
	}
	h, err := NormalizeHost(host)
	if err != nil {
		return nil
	}
	var out []Injection
	seen := map[string]bool{}
	for _, in := range p.Inject {
		if !seen[in.Header] && MatchGlob(in.Host, h) {
			seen[in.Header] = true
			out = append(out, in)
		}
	}
	return out
}
