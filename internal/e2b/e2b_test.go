package e2b

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/internal/errdefs"
)

func TestDataPlaneTarget(t *testing.T) {
	tests := []struct {
		name    string
		host    string
		headers map[string]string
		want    target
		ok      bool
		errIs   error
	}{
		{name: "headers", host: "127.0.0.1:3000", headers: map[string]string{"E2b-Sandbox-Id": "abc123", "E2b-Sandbox-Port": "49983"}, want: target{"abc123", 49983}, ok: true},
		{name: "headers win over host", host: "8080-other.localhost", headers: map[string]string{"E2b-Sandbox-Id": "abc", "E2b-Sandbox-Port": "80"}, want: target{"abc", 80}, ok: true},
		{name: "host form", host: "8080-abc123.sandbox.example.com", want: target{"abc123", 8080}, ok: true},
		{name: "host form with port and case", host: "49983-ABC.localhost:3000", want: target{"abc", 49983}, ok: true},
		{name: "api host", host: "127.0.0.1:3000", ok: false},
		{name: "bare label", host: "8080-abc", ok: false},
		{name: "dash in id is not a sandbox host", host: "8080-ab-c.localhost", ok: false},
		{name: "host port out of range", host: "70000-abc.localhost", errIs: errdefs.ErrInvalidArgument},
		{name: "host port zero", host: "0-abc.localhost", errIs: errdefs.ErrInvalidArgument},
		{name: "header port missing", headers: map[string]string{"E2b-Sandbox-Id": "abc"}, errIs: errdefs.ErrInvalidArgument},
		{name: "header port junk", headers: map[string]string{"E2b-Sandbox-Id": "abc", "E2b-Sandbox-Port": "+80"}, errIs: errdefs.ErrInvalidArgument},
		{name: "header id with dash", headers: map[string]string{"E2b-Sandbox-Id": "a-b", "E2b-Sandbox-Port": "80"}, errIs: errdefs.ErrNotFound},
		{name: "header id path trick", headers: map[string]string{"E2b-Sandbox-Id": "../x", "E2b-Sandbox-Port": "80"}, errIs: errdefs.ErrNotFound},
		{name: "port only", headers: map[string]string{"E2b-Sandbox-Port": "80"}, errIs: errdefs.ErrNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "http://x/files", nil)
			r.Host = tc.host
			for k, v := range tc.headers {
				r.Header.Set(k, v)
			}
			got, ok, err := dataPlaneTarget(r)
			if tc.errIs != nil {
				if !errors.Is(err, tc.errIs) {
					t.Fatalf("err = %v, want %v", err, tc.errIs)
				}
				return
			}
			if err != nil || ok != tc.ok || got != tc.want {
				t.Fatalf("got %+v %v %v, want %+v %v", got, ok, err, tc.want, tc.ok)
			}
		})
	}
}

func TestPageToken(t *testing.T) {
	k := pageKey{created: time.Unix(1700000000, 123456789).UTC(), id: "abc123"}
	got, err := parseToken(encodeToken(k))
	if err != nil || !got.created.Equal(k.created) || got.id != k.id {
		t.Fatalf("round trip: %+v %v", got, err)
	}
	for _, bad := range []string{"", "!!", "YWJj", encodeToken(pageKey{id: "a-b"}), strings.Repeat("A", 200)} {
		if _, err := parseToken(bad); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("parseToken(%q) = %v, want invalid", bad, err)
		}
	}
}

func TestParseListQuery(t *testing.T) {
	tests := []struct {
		query string
		check func(listQuery) bool
		bad   bool
	}{
		{query: "", check: func(q listQuery) bool {
			return q.limit == defaultPageSize && q.metadata == nil && q.states == nil && q.desc && q.since.IsZero() && q.template == ""
		}},
		{query: "order=asc", check: func(q listQuery) bool { return !q.desc }},
		{query: "startedAfter=2026-01-02T03:04:05.123456789Z&template=base", check: func(q listQuery) bool {
			return q.since.Equal(time.Date(2026, 1, 2, 3, 4, 5, 123456000, time.UTC)) && q.template == "base"
		}},
		{query: "startedAfter=yesterday", bad: true},
		{query: "template=base:v2", bad: true},
		{query: "startedBefore=2026-01-02T03:04:05Z", bad: true},
		{query: "sort=name", bad: true},
		// The SDK encodes the pairs, then the query string encodes them again.
		{query: "metadata=" + url.QueryEscape("user="+url.QueryEscape("a b")+"&app=x"), check: func(q listQuery) bool {
			return q.metadata["user"] == "a b" && q.metadata["app"] == "x" && len(q.metadata) == 2
		}},
		{query: "state=running,paused&limit=5&order=desc", check: func(q listQuery) bool { return len(q.states) == 2 && q.limit == 5 && q.desc }},
		{query: "state=dead", bad: true},
		{query: "limit=0", bad: true},
		{query: "limit=101", bad: true},
		{query: "order=sideways", bad: true},
		{query: "nextToken=zzz", bad: true},
		{query: "metadata=" + url.QueryEscape("paddock.dev/e2b-envd-token=x"), bad: true},
		{query: "metadata=" + url.QueryEscape("a=1&a=2"), bad: true},
	}
	for _, tc := range tests {
		t.Run(tc.query, func(t *testing.T) {
			v, err := url.ParseQuery(tc.query)
			if err != nil {
				t.Fatal(err)
			}
			q, err := parseListQuery(v)
			if tc.bad {
				if !errors.Is(err, errdefs.ErrInvalidArgument) {
					t.Fatalf("err = %v, want invalid", err)
				}
				return
			}
			if err != nil || !tc.check(q) {
				t.Fatalf("got %+v, %v", q, err)
			}
		})
	}
}

func TestUnsupported(t *testing.T) {
	tests := []struct {
		name string
		body newSandbox
		bad  bool
	}{
		{name: "plain", body: newSandbox{TemplateID: "base"}},
		{name: "volumes", body: newSandbox{VolumeMounts: []any{map[string]string{"name": "v"}}}, bad: true},
		{name: "mcp", body: newSandbox{MCP: map[string]any{"x": 1}}, bad: true},
		{name: "empty mcp", body: newSandbox{MCP: map[string]any{}}, bad: true},
		{name: "iam tokens", body: newSandbox{IAM: map[string]any{"tokens": map[string]any{}}}, bad: true},
		{name: "empty iam", body: newSandbox{IAM: map[string]any{}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := unsupported(&tc.body)
			if tc.bad != (err != nil) {
				t.Fatalf("err = %v, want bad=%v", err, tc.bad)
			}
		})
	}
}

func TestTokenOK(t *testing.T) {
	tests := []struct {
		want, got string
		ok        bool
	}{{"", "", true}, {"", "x", true}, {"abc", "abc", true}, {"abc", "", false}, {"abc", "abd", false}, {"abc", "abcd", false}}
	for _, tc := range tests {
		if tokenOK(tc.want, tc.got) != tc.ok {
			t.Errorf("tokenOK(%q, %q) != %v", tc.want, tc.got, tc.ok)
		}
	}
}

func FuzzHostTarget(f *testing.F) {
	for _, s := range []string{"49983-abc.localhost:3000", "8080-x.y", "1-a.b", "x", "", "99999-a.b", "8080-A.B:"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, host string) {
		tg, ok, err := hostTarget(host)
		if ok && (err != nil || tg.port < 1 || tg.port > 65535 || !validID(tg.id)) {
			t.Fatalf("hostTarget(%q) = %+v, %v", host, tg, err)
		}
	})
}

func FuzzParseToken(f *testing.F) {
	f.Add(encodeToken(pageKey{created: time.Unix(5, 0), id: "abc"}))
	f.Add("")
	f.Add("MTIzLmFi")
	f.Fuzz(func(t *testing.T, s string) {
		k, err := parseToken(s)
		if err == nil && !validID(k.id) {
			t.Fatalf("parseToken(%q) accepted id %q", s, k.id)
		}
	})
}

func FuzzParseMetadataFilter(f *testing.F) {
	f.Add("a=1&b=2")
	f.Add("a%2520b=c")
	f.Add("%")
	f.Fuzz(func(t *testing.T, s string) {
		md, err := parseMetadataFilter(s)
		if err != nil {
			return
		}
		for k := range md {
			if k == "" || strings.HasPrefix(k, reservedPrefix) {
				t.Fatalf("parseMetadataFilter(%q) accepted key %q", s, k)
			}
		}
	})
}
