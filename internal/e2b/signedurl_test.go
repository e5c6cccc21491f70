package e2b

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/internal/errdefs"
)

// Vectors computed outside Go from the documented formula, e.g.
//
//	printf '%s' 'hello.txt:read::tok' | openssl dgst -sha256 -binary | base64 | tr -d =
func TestFileSignatureVectors(t *testing.T) {
	exp := int64(1700000000)
	tests := []struct {
		path, op, user, token string
		expires               *int64
		want                  string
	}{
		{"hello.txt", signOpRead, "", "tok", nil, "v1_dEkXrS/Y6p/Op9rMpEpzXeRJ5bBL0LYkjrRJr9/Zz44"},
		{"/home/user/a b.txt", signOpWrite, "root", "secret-access-token", &exp, "v1_cvQeys7UruHdXxFcCsSXfAHFQ2cqepn8y+PYYIHdx7o"},
	}
	for _, tt := range tests {
		if got := fileSignature(tt.path, tt.op, tt.user, tt.token, tt.expires); got != tt.want {
			t.Errorf("fileSignature(%q, %q, %q, …) = %q, want %q", tt.path, tt.op, tt.user, got, tt.want)
		}
	}
}

func TestAuthorizeEnvd(t *testing.T) {
	const token = "secret-access-token"
	now := time.Unix(1700000000, 0)
	later, earlier := now.Unix()+60, now.Unix()-1
	signed := func(method, path, user string, expires *int64) string {
		op := signOpRead
		if method == http.MethodPost {
			op = signOpWrite
		}
		q := url.Values{}
		if path != "" {
			q.Set("path", path)
		}
		if user != "" {
			q.Set("username", user)
		}
		q.Set("signature", fileSignature(path, op, user, token, expires))
		if expires != nil {
			q.Set("signature_expiration", itoa(*expires))
		}
		return "/files?" + q.Encode()
	}
	tests := []struct {
		name, method, target string
		header               map[string]string
		token                string
		want                 error // nil: admitted
		wantMsg              string
	}{
		{name: "insecure sandbox needs nothing", method: "GET", target: "/files?path=a", token: ""},
		{name: "token opens files", method: "GET", target: "/files?path=a", header: map[string]string{headerAccessToken: token}, token: token},
		{name: "token opens other routes", method: "POST", target: "/process.Process/Start", header: map[string]string{headerAccessToken: token}, token: token},
		{name: "other routes need the token", method: "POST", target: "/process.Process/Start", token: token, want: errdefs.ErrUnauthenticated},
		{name: "a signature does not open other routes", method: "GET", target: "/health?" + mustQuery(signed("GET", "", "", nil)), token: token, want: errdefs.ErrUnauthenticated},
		{name: "signed read", method: "GET", target: signed("GET", "hello.txt", "", nil), token: token},
		{name: "signed read as root, expiring later", method: "GET", target: signed("GET", "/root/x", "root", &later), token: token},
		{name: "signed upload without a path", method: "POST", target: signed("POST", "", "", &later), token: token},
		{name: "expired", method: "GET", target: signed("GET", "hello.txt", "", &earlier), token: token, want: errSigExpired, wantMsg: "signature is already expired"},
		{name: "missing", method: "GET", target: "/files?path=hello.txt", token: token, want: errSigMissing, wantMsg: "missing signature query parameter"},
		{name: "wrong header token wins over a good signature", method: "GET", target: signed("GET", "hello.txt", "", nil), header: map[string]string{headerAccessToken: "wrong"}, token: token, want: errSigHeaderMismatch, wantMsg: "access token present in header but does not match"},
		{name: "read signature used to write", method: "POST", target: signed("GET", "hello.txt", "", nil), token: token, want: errSigInvalid, wantMsg: "invalid signature"},
		{name: "signed for another path", method: "GET", target: replaceParam(signed("GET", "hello.txt", "", nil), "path", "other.txt"), token: token, want: errSigInvalid},
		{name: "signed for another user", method: "GET", target: replaceParam(signed("GET", "hello.txt", "", nil), "username", "root"), token: token, want: errSigInvalid},
		{name: "expiration moved later", method: "GET", target: replaceParam(signed("GET", "hello.txt", "", &earlier), "signature_expiration", itoa(later)), token: token, want: errSigInvalid},
		{name: "expiration dropped", method: "GET", target: replaceParam(signed("GET", "hello.txt", "", &earlier), "signature_expiration", ""), token: token, want: errSigInvalid},
		{name: "another sandbox's token", method: "GET", target: signed("GET", "hello.txt", "", nil), token: "another-token", want: errSigInvalid},
		{name: "empty signature", method: "GET", target: "/files?path=a&signature=", token: token, want: errSigInvalid},
		{name: "expiration not a number", method: "GET", target: "/files?path=a&signature=v1_x&signature_expiration=soon", token: token, want: errdefs.ErrInvalidArgument},
		{name: "expiration overflows", method: "GET", target: "/files?path=a&signature=v1_x&signature_expiration=99999999999999999999", token: token, want: errdefs.ErrInvalidArgument},
		{name: "path given twice", method: "GET", target: signed("GET", "hello.txt", "", nil) + "&path=other.txt", token: token, want: errdefs.ErrInvalidArgument},
		{name: "bad query", method: "GET", target: "/files?path=%zz&signature=v1_x", token: token, want: errdefs.ErrInvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(tt.method, tt.target, nil)
			for k, v := range tt.header {
				r.Header.Set(k, v)
			}
			err := authorizeEnvd(r, tt.token, now)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			if tt.wantMsg != "" && err.Error() != tt.wantMsg {
				t.Fatalf("message %q, want envd's %q", err.Error(), tt.wantMsg)
			}
		})
	}
}

// A signed request reaches the sandbox as what was signed: without the
// signature and without an Authorization header choosing another user.
func TestAuthorizeEnvdRewritesSignedRequest(t *testing.T) {
	const token = "tok"
	q := url.Values{"path": {"a.txt"}, "signature": {fileSignature("a.txt", signOpWrite, "", token, nil)}}
	r := httptest.NewRequest("POST", "/files?"+q.Encode(), nil)
	r.Header.Set("Authorization", "Basic cm9vdDo=") // root:
	r.Header.Set("X-Metadata-K", "v")
	if err := authorizeEnvd(r, token, time.Now()); err != nil {
		t.Fatal(err)
	}
	if got := r.URL.RawQuery; got != "path=a.txt" {
		t.Errorf("query relayed: %q, want only the path", got)
	}
	if r.Header.Get("Authorization") != "" || r.Header.Get("X-Metadata-K") != "v" {
		t.Errorf("headers relayed: %v", r.Header)
	}
	// With the token, the request is the caller's own and goes as sent.
	r = httptest.NewRequest("POST", "/files?path=a.txt&username=root", nil)
	r.Header.Set(headerAccessToken, token)
	r.Header.Set("Authorization", "Basic cm9vdDo=")
	if err := authorizeEnvd(r, token, time.Now()); err != nil {
		t.Fatal(err)
	}
	if r.URL.RawQuery != "path=a.txt&username=root" || r.Header.Get("Authorization") == "" {
		t.Errorf("a token request was changed: %q %v", r.URL.RawQuery, r.Header)
	}
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

func mustQuery(target string) string {
	u, err := url.Parse(target)
	if err != nil {
		panic(err)
	}
	return u.RawQuery
}

// replaceParam sets (or, with "", removes) one query parameter of target.
func replaceParam(target, k, v string) string {
	u, err := url.Parse(target)
	if err != nil {
		panic(err)
	}
	q := u.Query()
	if v == "" {
		q.Del(k)
	} else {
		q.Set(k, v)
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// FuzzAuthorizeEnvd: whatever the query, a request without the token is
// admitted only with the signature of what reaches the sandbox, and what
// reaches it carries neither the signature nor an Authorization header.
func FuzzAuthorizeEnvd(f *testing.F) {
	const token = "tok"
	f.Add("GET", "path=a&signature="+url.QueryEscape(fileSignature("a", signOpRead, "", token, nil)))
	f.Add("POST", "username=root&signature=v1_x&signature_expiration=-5")
	f.Add("GET", "path=%zz;x=1&path=b")
	f.Fuzz(func(t *testing.T, method, query string) {
		if method != "GET" && method != "POST" {
			method = "GET"
		}
		r := httptest.NewRequest(method, "/files", nil)
		r.URL.RawQuery = query
		r.Header.Set("Authorization", "Basic cm9vdDo=")
		if err := authorizeEnvd(r, token, time.Unix(1700000000, 0)); err != nil {
			if !errors.Is(err, errdefs.ErrUnauthenticated) && !errors.Is(err, errdefs.ErrInvalidArgument) {
				t.Fatalf("refusal %v is neither a 401 nor a 400", err)
			}
			return
		}
		orig, err := url.ParseQuery(query)
		if err != nil {
			t.Fatalf("admitted an unparsable query %q", query)
		}
		op := signOpRead
		if method == "POST" {
			op = signOpWrite
		}
		var exp *int64
		if orig.Has(querySigExpires) {
			v, _ := strconv.ParseInt(orig.Get(querySigExpires), 10, 64)
			exp = &v
		}
		if orig.Get(querySignature) != fileSignature(orig.Get("path"), op, orig.Get("username"), token, exp) {
			t.Fatalf("admitted %q without its signature", query)
		}
		got := r.URL.Query()
		if got.Has(querySignature) || got.Has(querySigExpires) || r.Header.Get("Authorization") != "" {
			t.Fatalf("relayed %q with %v", r.URL.RawQuery, r.Header)
		}
		if got.Get("path") != orig.Get("path") || got.Get("username") != orig.Get("username") {
			t.Fatalf("relayed path/username %q, signed %q", r.URL.RawQuery, query)
		}
	})
}
