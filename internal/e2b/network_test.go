package e2b

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/config"
	"github.com/paddock-dev/paddock/internal/egress"
	"github.com/paddock-dev/paddock/internal/errdefs"
)

func egressPolicy(allow, deny []string, inject ...api.Injection) *api.NetworkPolicy {
	p := &api.NetworkPolicy{Mode: api.NetworkEgress, AllowHosts: allow, DenyHosts: deny}
	if len(inject) > 0 {
		p.Inject = inject
	}
	return p
}

func cidrPolicy(hosts, allow, deny []string) *api.NetworkPolicy {
	p := egressPolicy(hosts, nil)
	p.AllowCIDRs, p.DenyCIDRs = allow, deny
	return p
}

func TestCreateNetwork(t *testing.T) {
	const none, all = config.E2BNetworkNone, config.E2BNetworkAll
	bearer := `{"transform":{"headers":{"Authorization":"Bearer ${e2b.secrets.TOK}"}}}`
	tests := []struct {
		name string
		def  string
		body string
		want *api.NetworkPolicy // nil: mode none
		bad  string             // part of the error, for refusals
	}{
		{name: "nothing said, default none", def: none, body: `{}`},
		{name: "nothing said, default empty means none", def: "", body: `{}`},
		{name: "nothing said, default all", def: all, body: `{}`, want: egressPolicy([]string{"*"}, nil)},
		{name: "internet off", def: all, body: `{"allow_internet_access":false}`},
		{name: "internet on", def: none, body: `{"allow_internet_access":true}`, want: egressPolicy([]string{"*"}, nil)},
		{name: "allowOut hosts", def: none, body: `{"network":{"allowOut":["API.GitHub.com.","*.pypi.org"]}}`, want: egressPolicy([]string{"api.github.com", "*.pypi.org"}, nil)},
		{name: "allowOut duplicate once", def: none, body: `{"network":{"allowOut":["a.test","A.test"]}}`, want: egressPolicy([]string{"a.test"}, nil)},
		{name: "ALL_TRAFFIC allowed", def: none, body: `{"network":{"allowOut":["0.0.0.0/0"]}}`, want: egressPolicy([]string{"*"}, nil)},
		{name: "bare star is ALL_TRAFFIC", def: none, body: `{"network":{"allowOut":["*"]}}`, want: egressPolicy([]string{"*"}, nil)},
		{name: "deny all but allowOut, default all", def: all, body: `{"network":{"allowOut":["a.test"],"denyOut":["0.0.0.0/0"]}}`, want: egressPolicy([]string{"a.test"}, nil)},
		{name: "deny all beats internet on", def: none, body: `{"allow_internet_access":true,"network":{"denyOut":["0.0.0.0/0"]}}`, want: egressPolicy(nil, nil)},
		{name: "deny all alone keeps egress for later rules", def: none, body: `{"network":{"denyOut":["0.0.0.0/0"]}}`, want: egressPolicy(nil, nil)},
		{name: "allowOut wins over internet off", def: none, body: `{"allow_internet_access":false,"network":{"allowOut":["a.test"]}}`, want: egressPolicy([]string{"a.test"}, nil)},
		{name: "internet on minus a name", def: none, body: `{"allow_internet_access":true,"network":{"denyOut":["evil.test"]}}`, want: egressPolicy([]string{"*"}, []string{"evil.test"})},
		{name: "allow a glob, deny inside it", def: none, body: `{"network":{"allowOut":["*.x.test"],"denyOut":["bad.x.test"]}}`, want: egressPolicy([]string{"*.x.test"}, []string{"bad.x.test"})},
		{name: "deny names only, default none", def: none, body: `{"network":{"denyOut":["evil.test"]}}`, want: egressPolicy(nil, []string{"evil.test"})},
		{name: "deny names with internet off", def: none, body: `{"allow_internet_access":false,"network":{"denyOut":["evil.test"]}}`},
		{name: "empty lists are nothing", def: none, body: `{"network":{"allowOut":[],"denyOut":[]}}`},
		{name: "public traffic only", def: none, body: `{"network":{"allowPublicTraffic":false}}`},
		{name: "egressProxy null", def: none, body: `{"network":{"egressProxy":null}}`},
		{name: "transform rule", def: none, body: `{"network":{"allowOut":["api.test"],"rules":{"API.test":[` + bearer + `]}}}`,
			want: egressPolicy([]string{"api.test"}, nil, api.Injection{Host: "api.test", Header: "Authorization", Value: "Bearer {{secret:tok}}"})},
		{name: "rule without transform", def: none, body: `{"network":{"rules":{"api.test":[{}]}}}`, want: egressPolicy(nil, nil)},
		{name: "literal header and two rules", def: none, body: `{"network":{"allowOut":["0.0.0.0/0"],"rules":{"*.b.test":[{"transform":{"headers":{"x-a":"1"}}},{"transform":{"headers":{"X-B":"k=${e2b.secrets.s1}&${e2b.secrets.s2}"}}}]}}}`,
			want: egressPolicy([]string{"*"}, nil, api.Injection{Host: "*.b.test", Header: "X-A", Value: "1"}, api.Injection{Host: "*.b.test", Header: "X-B", Value: "k={{secret:s1}}&{{secret:s2}}"})},

		{name: "IPv4 address", def: none, body: `{"network":{"allowOut":["8.8.8.8"]}}`, want: cidrPolicy(nil, []string{"8.8.8.8/32"}, nil)},
		{name: "deny all but an address", def: all, body: `{"network":{"denyOut":["0.0.0.0/0"],"allowOut":["1.1.1.1","10.1.2.3/8"]}}`, want: cidrPolicy(nil, []string{"1.1.1.1/32", "10.0.0.0/8"}, nil)},
		{name: "hosts and addresses", def: none, body: `{"network":{"allowOut":["a.test","9.9.9.9"],"denyOut":["8.8.8.8"]}}`, want: cidrPolicy([]string{"a.test"}, []string{"9.9.9.9/32"}, []string{"8.8.8.8/32"})},
		{name: "internet on minus an address", def: none, body: `{"allow_internet_access":true,"network":{"denyOut":["8.8.8.0/24"]}}`, want: cidrPolicy([]string{"*"}, nil, []string{"8.8.8.0/24"})},
		{name: "IPv6", body: `{"network":{"allowOut":["[::1]"]}}`, bad: "IPv6 is not supported"},
		{name: "IPv6 all traffic", body: `{"network":{"allowOut":["::/0"]}}`, bad: "IPv6 is not supported"},
		{name: "deny IPv6", body: `{"network":{"denyOut":["2001:db8::/32"]}}`, bad: "network.denyOut"},
		{name: "bad prefix", body: `{"network":{"allowOut":["1.2.3.4/40"]}}`, bad: "not an IPv4 address or CIDR block"},
		{name: "allow holds deny: allow wins", def: none, body: `{"network":{"allowOut":["10.0.0.0/8"],"denyOut":["10.1.0.0/16"]}}`, want: cidrPolicy(nil, []string{"10.0.0.0/8"}, nil)},
		{name: "deny holds allow: carved", def: none, body: `{"network":{"allowOut":["8.8.8.8"],"denyOut":["8.8.8.8/30","9.9.9.9"]}}`,
			want: cidrPolicy(nil, []string{"8.8.8.8/32"}, []string{"8.8.8.10/31", "8.8.8.9/32", "9.9.9.9/32"})},
		{name: "carving leaves too many blocks", body: fmt.Sprintf(`{"network":{"denyOut":["10.0.0.0/8"],"allowOut":[%s]}}`, strings.TrimSuffix(strings.Repeat(`"10.0.0.1",`, 1)+`"10.128.0.1","10.64.0.1",`, ",")), bad: "address rules, at most"},
		{name: "not a host", body: `{"network":{"allowOut":["exa mple.com"]}}`, bad: "network.allowOut"},
		{name: "path is not a host", body: `{"network":{"allowOut":["example.com/x"]}}`, bad: "network.allowOut"},
		{name: "both lists", body: `{"network":{"allowOut":["a.test"],"denyOut":["A.test"]}}`, bad: "in both allowOut and denyOut"},
		{name: "egress proxy", body: `{"network":{"egressProxy":{"address":"proxy.example.com:1080"}}}`, bad: "egressProxy is not supported"},
		{name: "rules without a network", body: `{"allow_internet_access":false,"network":{"rules":{"api.test":[` + bearer + `]}}}`, bad: "network.rules need a network"},
		{name: "rule for every host", body: `{"network":{"rules":{"*":[` + bearer + `]}}}`, bad: `a bare "*" is not allowed`},
		{name: "rule glob in the middle", body: `{"network":{"rules":{"a.*.test":[` + bearer + `]}}}`, bad: `leading "*." wildcard`},
		{name: "overlapping rule hosts", body: `{"network":{"rules":{"*.x.test":[` + bearer + `],"a.x.test":[` + bearer + `]}}}`, bad: "can both match one host"},
		{name: "overlapping rule globs", body: `{"network":{"rules":{"*.x.test":[` + bearer + `],"*.a.x.test":[` + bearer + `]}}}`, bad: "can both match one host"},
		{name: "rule host twice", body: `{"network":{"rules":{"a.test":[` + bearer + `],"A.test":[` + bearer + `]}}}`, bad: "is given twice"},
		{name: "header twice", body: `{"network":{"rules":{"a.test":[{"transform":{"headers":{"x-k":"1"}}},{"transform":{"headers":{"X-K":"2"}}}]}}}`, bad: "is set twice"},
		{name: "proxy's own header", body: `{"network":{"rules":{"a.test":[{"transform":{"headers":{"Host":"x"}}}]}}}`, bad: "cannot be injected"},
		{name: "identity token", body: `{"network":{"rules":{"a.test":[{"transform":{"headers":{"A":"${e2b.identity.tokens.aws}"}}}]}}}`, bad: "no workload identity tokens"},
		{name: "Paddock reference written literally", body: `{"network":{"rules":{"a.test":[{"transform":{"headers":{"A":"{{secret:tok}}"}}}]}}}`, bad: "reads as a secret reference"},
		{name: "unclosed placeholder", body: `{"network":{"rules":{"a.test":[{"transform":{"headers":{"A":"${e2b.secrets.tok"}}}]}}}`, bad: "is not closed"},
		{name: "bad secret name", body: `{"network":{"rules":{"a.test":[{"transform":{"headers":{"A":"${e2b.secrets.a b}"}}}]}}}`, bad: "secret name"},
		{name: "control character in a value", body: `{"network":{"rules":{"a.test":[{"transform":{"headers":{"A":"x\ny"}}}]}}}`, bad: "control character"},
		{name: "too many entries", body: fmt.Sprintf(`{"network":{"allowOut":[%s]}}`, strings.TrimSuffix(strings.Repeat(`"a.test",`, egress.MaxRules+1), ",")), bad: "at most"},
		{name: "wrong type", body: `{"network":{"allowOut":"a.test"}}`, bad: "not valid JSON"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var b newSandbox
			err := json.Unmarshal([]byte(tc.body), &b)
			var got *api.NetworkPolicy
			if err == nil {
				got, err = createNetwork(&b, tc.def)
			} else {
				err = errdefs.Invalid("request body is not valid JSON: %v", err)
			}
			if tc.bad != "" {
				if !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), tc.bad) {
					t.Fatalf("err = %v, want invalid argument containing %q", err, tc.bad)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("policy = %+v, want %+v", got, tc.want)
			}
			if got != nil {
				if _, err := egress.NormalizePolicy(egress.Policy{Allow: got.AllowHosts, Deny: got.DenyHosts}); err != nil {
					t.Fatalf("the policy is not one Paddock accepts: %v", err)
				}
			}
		})
	}
}

func TestUpdateNetwork(t *testing.T) {
	tests := []struct {
		name string
		body string
		want *api.NetworkPolicy
		bad  bool
	}{
		// A field left out is cleared: nothing said is the default (none).
		{name: "empty clears to none", body: `{}`},
		{name: "internet off", body: `{"allow_internet_access":false}`},
		{name: "allow a host", body: `{"allowOut":["up.test"],"denyOut":["0.0.0.0/0"]}`, want: egressPolicy([]string{"up.test"}, nil)},
		{name: "internet on", body: `{"allow_internet_access":true}`, want: egressPolicy([]string{"*"}, nil)},
		{name: "address", body: `{"allowOut":["1.1.1.1"],"denyOut":["0.0.0.0/0"]}`, want: cidrPolicy(nil, []string{"1.1.1.1/32"}, nil)},
		{name: "IPv6 address", body: `{"allowOut":["::1"]}`, bad: true},
		{name: "egress proxy", body: `{"egressProxy":{"address":"p:1"}}`, bad: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var b networkUpdate
			if err := json.Unmarshal([]byte(tc.body), &b); err != nil {
				t.Fatal(err)
			}
			got, err := updateNetwork(&b, config.E2BNetworkNone)
			if tc.bad {
				if !errors.Is(err, errdefs.ErrInvalidArgument) {
					t.Fatalf("err = %v, want invalid", err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

func TestEgressInfo(t *testing.T) {
	tests := []struct {
		name        string
		p           *api.NetworkPolicy
		allow, deny []string
		internet    bool
	}{
		{name: "none", p: nil, allow: []string{}, deny: []string{allTraffic}},
		{name: "mode none recorded", p: &api.NetworkPolicy{Mode: api.NetworkNone}, allow: []string{}, deny: []string{allTraffic}},
		{name: "some hosts", p: egressPolicy([]string{"a.test"}, []string{"b.test"}), allow: []string{"a.test"}, deny: []string{allTraffic, "b.test"}},
		{name: "nothing allowed", p: egressPolicy(nil, nil), allow: []string{}, deny: []string{allTraffic}},
		{name: "every host", p: egressPolicy([]string{"*", "a.test"}, []string{"b.test"}), allow: []string{allTraffic, "a.test"}, deny: []string{"b.test"}, internet: true},
		{name: "addresses", p: cidrPolicy([]string{"a.test"}, []string{"1.1.1.1/32", "10.0.0.0/8"}, []string{"10.1.0.0/16"}), allow: []string{"a.test", "1.1.1.1", "10.0.0.0/8"}, deny: []string{allTraffic, "10.1.0.0/16"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			allow, deny, _ := egressInfo(tc.p)
			if !slices.Equal(allow, tc.allow) || !slices.Equal(deny, tc.deny) || internetAccess(tc.p) != tc.internet {
				t.Fatalf("allow %q deny %q internet %v; want %q %q %v", allow, deny, internetAccess(tc.p), tc.allow, tc.deny, tc.internet)
			}
		})
	}
	rules := rulesInfo([]api.Injection{{Host: "a.test", Header: "Authorization", Value: "Bearer {{secret:tok}}"}, {Host: "a.test", Header: "X-K", Value: "v"}})
	want := map[string][]networkRule{"a.test": {{Transform: &networkTransform{Headers: map[string]string{"Authorization": "Bearer ${e2b.secrets.tok}", "X-K": "v"}}}}}
	if !reflect.DeepEqual(rules, want) {
		t.Fatalf("rules info = %+v", rules)
	}
}

func TestCheckPorts(t *testing.T) {
	str := func(s string) *string { return &s }
	tests := []struct {
		name        string
		n           *networkConfig
		mask, https string
		bad         bool
	}{
		{name: "nothing", n: nil},
		{name: "mask with port", n: &networkConfig{MaskRequestHost: str("localhost:${PORT}")}, mask: "localhost:${PORT}"},
		{name: "empty mask", n: &networkConfig{MaskRequestHost: str("")}},
		{name: "mask with a space", n: &networkConfig{MaskRequestHost: str("a b")}, bad: true},
		{name: "mask with CRLF", n: &networkConfig{MaskRequestHost: str("a\r\nX-Evil: 1")}, bad: true},
		{name: "mask of a port only", n: &networkConfig{MaskRequestHost: str(":80")}, bad: true},
		{name: "mask too long", n: &networkConfig{MaskRequestHost: str(strings.Repeat("a", maxMaskHostLen+1))}, bad: true},
		{name: "https ports", n: &networkConfig{HTTPSPorts: []int{443, 8443, 443}}, https: "443,8443"},
		{name: "envd port", n: &networkConfig{HTTPSPorts: []int{EnvdPort}}, bad: true},
		{name: "interpreter port", n: &networkConfig{HTTPSPorts: []int{CodeInterpreterPort}}, bad: true},
		{name: "port zero", n: &networkConfig{HTTPSPorts: []int{0}}, bad: true},
		{name: "too many ports", n: &networkConfig{HTTPSPorts: make([]int, maxHTTPSPorts+1)}, bad: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mask, https, err := checkPorts(tc.n)
			if tc.bad {
				if !errors.Is(err, errdefs.ErrInvalidArgument) {
					t.Fatalf("err = %v, want invalid", err)
				}
				return
			}
			if err != nil || mask != tc.mask || https != tc.https {
				t.Fatalf("got %q %q %v", mask, https, err)
			}
			if got := parseHTTPSPorts(https); len(got) != len(strings.FieldsFunc(https, func(r rune) bool { return r == ',' })) {
				t.Fatalf("label %q reads back as %v", https, got)
			}
		})
	}
	if got := outHost("8080-abc.example.com", "", 8080); got != "8080-abc.example.com" {
		t.Fatalf("no mask: %q", got)
	}
	if got := outHost("8080-abc.example.com", "localhost:${PORT}", 8080); got != "localhost:8080" {
		t.Fatalf("mask: %q", got)
	}
}

func TestForkCopy(t *testing.T) {
	src := &api.Sandbox{
		Labels:  map[string]string{labelTemplate: "base", labelEnvdToken: "old-envd", labelTrafficToken: "old-traffic", "app": "x"},
		Network: egressPolicy([]string{"a.test"}, []string{"b.test"}, api.Injection{Host: "a.test", Header: "A", Value: "{{secret:s}}"}),
	}
	req := &api.CreateSandboxRequest{Labels: map[string]string{labelTemplate: "base", labelEnvdToken: "old-envd", labelTrafficToken: "old-traffic", "app": "x"}}
	forkCopy(src, req)
	if req.Labels[labelEnvdToken] == "old-envd" || len(req.Labels[labelEnvdToken]) != 64 || req.Labels[labelTrafficToken] == "old-traffic" {
		t.Fatalf("a copy kept the source's tokens: %v", req.Labels)
	}
	if !reflect.DeepEqual(req.Network, src.Network) || &req.Network.AllowHosts[0] == &src.Network.AllowHosts[0] {
		t.Fatalf("network not copied as its own: %+v", req.Network)
	}
	plain := &api.CreateSandboxRequest{Labels: map[string]string{labelTemplate: "base"}}
	forkCopy(&api.Sandbox{Labels: map[string]string{labelTemplate: "base"}}, plain)
	if _, ok := plain.Labels[labelEnvdToken]; ok || plain.Network != nil {
		t.Fatalf("a copy of an insecure sandbox without network got %v %+v", plain.Labels, plain.Network)
	}
}

func TestSecretNames(t *testing.T) {
	for _, tc := range []struct {
		raw, want string
		bad       bool
	}{
		{raw: "OpenAI-Key", want: "openai-key"},
		{raw: "a.b_c", want: "a.b_c"},
		{raw: "sec_x", bad: true},
		{raw: "SEC_x", bad: true},
		{raw: "", bad: true},
		{raw: "a b", bad: true},
		{raw: strings.Repeat("a", 64), bad: true},
	} {
		got, err := secretName(tc.raw)
		if tc.bad != (err != nil) || (!tc.bad && got != tc.want) {
			t.Errorf("secretName(%q) = %q, %v", tc.raw, got, err)
		}
	}
	if secretRef("sec_tok") != "tok" || secretRef("TOK") != "tok" {
		t.Fatal("secretRef")
	}
	info := toSecretInfo(&api.Secret{Name: "tok"})
	if info.SecretID != "sec_tok" || info.Metadata == nil || info.CurrentVersion != 1 {
		t.Fatalf("%+v", info)
	}
	v := "x"
	for _, b := range []secretBody{{}, {Value: &v, Metadata: map[string]string{"a": "b"}}, {Value: new(string)}} {
		if _, err := checkSecretBody(&b); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("checkSecretBody(%+v) = %v", b, err)
		}
	}
}

// FuzzCreateNetworkBody feeds create bodies through the decoding and the
// network mapping: whatever is accepted must be a policy Paddock's egress
// accepts, with no address rules, a match-all rule only where internet
// access or ALL_TRAFFIC was asked for, and injection templates that parse;
// and an egress policy reported back through getInfo must map to itself.
func FuzzCreateNetworkBody(f *testing.F) {
	for _, s := range []string{
		`{}`, `{"allow_internet_access":true}`, `{"allow_internet_access":false}`,
		`{"network":{"allowOut":["a.test","*.b.test"],"denyOut":["c.test"]}}`,
		`{"network":{"allowOut":["0.0.0.0/0"],"denyOut":["x.test"]}}`,
		`{"network":{"denyOut":["0.0.0.0/0"]}}`,
		`{"network":{"allowOut":["10.0.0.1"]}}`,
		`{"network":{"rules":{"api.test":[{"transform":{"headers":{"Authorization":"Bearer ${e2b.secrets.t}"}}}]},"allowOut":["api.test"]}}`,
		`{"network":{"rules":{"*.x.test":[{}],"y.test":[{"transform":{"headers":{"a":"${e2b.identity.tokens.x}"}}}]}}}`,
		`{"network":{"egressProxy":null,"maskRequestHost":"localhost:${PORT}","httpsPorts":[443]}}`,
	} {
		f.Add([]byte(s), false)
	}
	f.Fuzz(func(t *testing.T, data []byte, defAll bool) {
		def := config.E2BNetworkNone
		if defAll {
			def = config.E2BNetworkAll
		}
		var b newSandbox
		if json.Unmarshal(data, &b) != nil {
			return
		}
		_, _, _ = checkPorts(b.Network)
		p, err := createNetwork(&b, def)
		if err != nil {
			if !errors.Is(err, errdefs.ErrInvalidArgument) {
				t.Fatalf("error %v is not invalid-argument", err)
			}
			return
		}
		if p == nil {
			return
		}
		asked := b.AllowInternetAccess != nil && *b.AllowInternetAccess || defAll && b.AllowInternetAccess == nil
		if n := b.Network; n != nil {
			asked = asked || slices.ContainsFunc(n.AllowOut, func(s string) bool {
				g, err := egress.NormalizeGlob(s)
				return strings.TrimSpace(s) == allTraffic || err == nil && g == matchAll
			})
		}
		if internetAccess(p) && !asked {
			t.Fatalf("match-all rule nobody asked for: %s -> %+v", data, p)
		}
		for _, h := range append(slices.Clone(p.AllowHosts), p.DenyHosts...) {
			if isAddress(h) {
				t.Fatalf("address rule %q from %s", h, data)
			}
		}
		if _, err := egress.NormalizePolicy(egress.Policy{Allow: p.AllowHosts, Deny: p.DenyHosts}); err != nil {
			t.Fatalf("policy %+v not accepted by egress: %v", p, err)
		}
		for _, in := range p.Inject {
			if _, err := egress.NormalizeInjection(egress.Injection{Host: in.Host, Header: in.Header, Value: in.Value}); err != nil {
				t.Fatalf("injection %+v not accepted by egress: %v", in, err)
			}
		}
		allow, deny, rules := egressInfo(p)
		var back newSandbox
		back.Network = &networkConfig{AllowOut: allow, DenyOut: deny, Rules: rules}
		again, err := createNetwork(&back, config.E2BNetworkNone)
		if err != nil {
			t.Fatalf("getInfo's network %v %v %v does not map back: %v", allow, deny, rules, err)
		}
		if !reflect.DeepEqual(canonical(again), canonical(p)) {
			t.Fatalf("round trip: %+v -> %+v", p, again)
		}
	})
}

// canonical makes policies comparable regardless of nil against empty.
func canonical(p *api.NetworkPolicy) api.NetworkPolicy {
	if p == nil {
		return api.NetworkPolicy{}
	}
	c := *p
	for _, s := range []*[]string{&c.AllowHosts, &c.DenyHosts} {
		if len(*s) == 0 {
			*s = nil
		}
	}
	if len(c.Inject) == 0 {
		c.Inject = nil
	}
	return c
}

func FuzzHeaderTemplate(f *testing.F) {
	for _, s := range []string{"Bearer ${e2b.secrets.tok}", "${e2b.secrets.A}${e2b.secrets.b}", "x${e2b.", "{{secret:a}}", "${e2b.identity.tokens.x}", "plain", "${notours}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		tmpl, err := headerTemplate(v)
		if err != nil {
			return
		}
		parsed, err := egress.ParseTemplate(tmpl)
		if err != nil {
			t.Fatalf("headerTemplate(%q) = %q, which does not parse: %v", v, tmpl, err)
		}
		want := strings.Count(v, e2bSecretRef)
		n := 0
		for _, p := range parsed {
			if p.Secret != "" {
				n++
			}
		}
		if n != want {
			t.Fatalf("headerTemplate(%q) = %q: %d secret references, want %d", v, tmpl, n, want)
		}
		if back := e2bValue(tmpl); !strings.EqualFold(back, v) {
			t.Fatalf("e2bValue(headerTemplate(%q)) = %q", v, back)
		}
	})
}

// TestCarveCIDRs: an address is in the carved deny list exactly when it
// is in a deny block and in no allow block.
func TestCarveCIDRs(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 13))
	// Blocks in 10.0.0.0/16, so random addresses often fall in them.
	block := func() netip.Prefix {
		b := [4]byte{10, 0, byte(rng.IntN(256)), byte(rng.IntN(256))}
		return netip.PrefixFrom(netip.AddrFrom4(b), 16+rng.IntN(17)).Masked()
	}
	in := func(ps []netip.Prefix, a netip.Addr) bool {
		for _, p := range ps {
			if p.Contains(a) {
				return true
			}
		}
		return false
	}
	for round := 0; round < 300; round++ {
		var deny, allow []netip.Prefix
		var denyS, allowS []string
		for i := rng.IntN(4); i >= 0; i-- {
			p := block()
			deny, denyS = append(deny, p), append(denyS, p.String())
		}
		for i := rng.IntN(4); i >= 0; i-- {
			p := block()
			allow, allowS = append(allow, p), append(allowS, p.String())
		}
		got, err := carveCIDRs(denyS, allowS)
		if err != nil {
			continue // too many blocks: refused, which the create test covers
		}
		var carved []netip.Prefix
		for _, c := range got {
			carved = append(carved, netip.MustParsePrefix(c))
		}
		for k := 0; k < 2000; k++ {
			a := netip.AddrFrom4([4]byte{10, 0, byte(rng.IntN(256)), byte(rng.IntN(256))})
			want := in(deny, a) && !in(allow, a)
			if in(carved, a) != want {
				t.Fatalf("deny %v allow %v: %s in carved %v = %v, want %v", denyS, allowS, a, got, !want, want)
			}
		}
	}
}
