package egress_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock/internal/egress"
	"github.com/paddock-dev/paddock/internal/errdefs"
)

func TestParseTemplate(t *testing.T) {
	secrets := map[string]string{"gh-token": "s3cr3t", "a.b_c": "X"}
	lookup := func(n string) (string, error) {
		if v, ok := secrets[n]; ok {
			return v, nil
		}
		return "", errdefs.NotFound("secret %q", n)
	}
	tests := []struct {
		in      string
		want    string // rendered
		names   []string
		wantErr string
	}{
		{in: "Bearer {{secret:gh-token}}", want: "Bearer s3cr3t", names: []string{"gh-token"}},
		{in: "{{secret:gh-token}}", want: "s3cr3t", names: []string{"gh-token"}},
		{in: "token {{secret:a.b_c}}:{{secret:gh-token}} end", want: "token X:s3cr3t end", names: []string{"a.b_c", "gh-token"}},
		{in: "plain literal", want: "plain literal"},
		{in: "{{other}} stays", want: "{{other}} stays"},
		{in: "tab\tok", want: "tab\tok"},
		{in: "", wantErr: "1 to"},
		{in: "Bearer {{secret:gh-token", wantErr: "not closed"},
		{in: "{{secret:}}", wantErr: "secret name"},
		{in: "{{secret:Upper}}", wantErr: "secret name"},
		{in: "{{secret:-lead}}", wantErr: "secret name"},
		{in: "{{secret:" + strings.Repeat("a", 64) + "}}", wantErr: "secret name"},
		{in: "a\r\nX-Evil: 1", wantErr: "control character"},
		{in: "a\nb", wantErr: "control character"},
		{in: "nul\x00", wantErr: "control character"},
		{in: strings.Repeat("{{secret:a}}", 17), wantErr: "more than"},
		{in: strings.Repeat("x", 9000), wantErr: "1 to"},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			tmpl, err := egress.ParseTemplate(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !errors.Is(err, errdefs.ErrInvalidArgument) {
					t.Fatalf("err = %v, want %q (invalid argument)", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(tmpl.Secrets(), ","); got != strings.Join(tc.names, ",") {
				t.Errorf("secrets = %q, want %q", got, tc.names)
			}
			got, err := tmpl.Render(lookup)
			if err != nil || got != tc.want {
				t.Errorf("render = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestRenderMissingSecretNamesItOnly(t *testing.T) {
	tmpl, err := egress.ParseTemplate("Bearer {{secret:gone}}")
	if err != nil {
		t.Fatal(err)
	}
	_, err = tmpl.Render(func(string) (string, error) { return "", errdefs.NotFound("no such secret") })
	if err == nil || !strings.Contains(err.Error(), `"gone"`) || !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("err = %v", err)
	}
}

func TestNormalizeHeaderName(t *testing.T) {
	tests := []struct {
		in, want string
		ok       bool
	}{
		{"authorization", "Authorization", true},
		{"X-Api-Key", "X-Api-Key", true},
		{"x-goog-api-key", "X-Goog-Api-Key", true},
		{"PRIVATE-TOKEN", "Private-Token", true},
		{"Host", "", false},
		{"content-length", "", false},
		{"Transfer-Encoding", "", false},
		{"Connection", "", false},
		{"upgrade", "", false},
		{"Keep-Alive", "", false},
		{"TE", "", false},
		{"Trailer", "", false},
		{"Proxy-Authorization", "", false},
		{"proxy-anything", "", false},
		{"", "", false},
		{"Bad Header", "", false},
		{"Bad:Header", "", false},
		{"X-\r\nInjected", "", false},
		{strings.Repeat("a", 129), "", false},
	}
	for _, tc := range tests {
		got, err := egress.NormalizeHeaderName(tc.in)
		if tc.ok != (err == nil) || got != tc.want {
			t.Errorf("NormalizeHeaderName(%q) = %q, %v; want %q ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

func TestValidSecret(t *testing.T) {
	names := map[string]bool{"gh-token": true, "a": true, "0.x_y-z": true, "": false, "A": false, "-a": false, ".a": false, "a/b": false, strings.Repeat("a", 63): true, strings.Repeat("a", 64): false}
	for n, ok := range names {
		if err := egress.ValidSecretName(n); (err == nil) != ok {
			t.Errorf("ValidSecretName(%q) = %v", n, err)
		}
	}
	values := []struct {
		v  string
		ok bool
	}{{"x", true}, {"Bearer abc", true}, {"", false}, {"a\nb", false}, {"a\r", false}, {"a\x00b", false}, {strings.Repeat("v", 64<<10), true}, {strings.Repeat("v", 64<<10+1), false}}
	for _, tc := range values {
		err := egress.ValidSecretValue([]byte(tc.v))
		if (err == nil) != tc.ok {
			t.Errorf("ValidSecretValue(len %d) = %v", len(tc.v), err)
		}
		if err != nil && len(tc.v) > 2 && strings.Contains(err.Error(), tc.v) {
			t.Errorf("error quotes the value: %v", err)
		}
	}
}

func TestNormalizePolicyInjections(t *testing.T) {
	p, err := egress.NormalizePolicy(egress.Policy{Inject: []egress.Injection{
		{Host: "API.GitHub.com.", Header: "authorization", Value: "Bearer {{secret:a}}"},
		{Host: "*.example.com", Header: "x-key", Value: "{{secret:b}}"},
		{Host: "api.github.com", Header: "Authorization", Value: "token {{secret:c}}"}, // replaces the first
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Inject) != 2 || p.Inject[0] != (egress.Injection{Host: "api.github.com", Header: "Authorization", Value: "token {{secret:c}}"}) {
		t.Fatalf("got %+v", p.Inject)
	}
	bad := []egress.Injection{
		{Host: "10.0.0.1", Header: "A", Value: "x"},
		{Host: "a*.b", Header: "A", Value: "x"},
		{Host: "ok.test", Header: "Host", Value: "x"},
		{Host: "ok.test", Header: "A", Value: "{{secret:"},
	}
	for _, in := range bad {
		if _, err := egress.NormalizePolicy(egress.Policy{Inject: []egress.Injection{in}}); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("%+v: err = %v", in, err)
		}
	}
	many := make([]egress.Injection, egress.MaxInjections+1)
	for i := range many {
		many[i] = egress.Injection{Host: "h.test", Header: "A", Value: "x"}
	}
	if _, err := egress.NormalizePolicy(egress.Policy{Inject: many}); err == nil {
		t.Error("too many injection rules accepted")
	}
}

// FuzzParseTemplate: whatever the input, parsing does not panic, and what
// is accepted renders to a valid header value (no CR, LF or NUL) when the
// secrets are valid.
func FuzzParseTemplate(f *testing.F) {
	for _, s := range []string{"Bearer {{secret:gh-token}}", "{{secret:a}}{{secret:b}}", "{{secret:", "}}{{", "a\r\nb", "{{secret:x}}}}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tmpl, err := egress.ParseTemplate(s)
		if err != nil {
			return
		}
		for _, n := range tmpl.Secrets() {
			if egress.ValidSecretName(n) != nil {
				t.Fatalf("accepted invalid secret name %q", n)
			}
		}
		v, err := tmpl.Render(func(string) (string, error) { return "value", nil })
		if err != nil {
			t.Fatal(err)
		}
		if strings.ContainsAny(v, "\r\n\x00") {
			t.Fatalf("rendered %q contains a line break or NUL", v)
		}
	})
}
