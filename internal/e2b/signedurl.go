package e2b

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/paddock-dev/paddock/internal/errdefs"
)

// Signed file URLs. The SDKs' uploadUrl and downloadUrl of a secure
// sandbox carry, instead of the access token, a signature of what the URL
// may do: one operation ("read" for GET /files, "write" for POST /files)
// on one path as one user, optionally until a Unix time. envd checks it;
// here the daemon does, since the daemon holds the token.
//
// The signature is "v1_" followed by the unpadded standard base64 of
// SHA-256("path:operation:username:token"), with ":expiration" (decimal
// seconds) appended when the URL expires. path and username are the query
// parameters exactly as given (the empty string when absent: the default
// user, or the form's file names for an upload without a path).
const (
	signOpRead  = "read"
	signOpWrite = "write"

	querySignature  = "signature"
	querySigExpires = "signature_expiration"
	querySigPath    = "path"
	querySigUser    = "username"
)

// fileSignature computes envd's v1 signature. expires is nil for a URL
// that does not expire.
func fileSignature(path, op, user, token string, expires *int64) string {
	raw := path + ":" + op + ":" + user + ":" + token
	if expires != nil {
		raw += ":" + strconv.FormatInt(*expires, 10)
	}
	sum := sha256.Sum256([]byte(raw))
	return "v1_" + base64.RawStdEncoding.EncodeToString(sum[:])
}

// envdAuthError is a refusal worded exactly as envd words it: the SDKs and
// E2B's own tests compare the message, so it carries no suffix.
type envdAuthError string

func (e envdAuthError) Error() string { return string(e) }
func (envdAuthError) Unwrap() error   { return errdefs.ErrUnauthenticated }

// envd's refusals of a /files request on a secure sandbox (401 each).
const (
	errSigHeaderMismatch = envdAuthError("access token present in header but does not match")
	errSigMissing        = envdAuthError("missing signature query parameter")
	errSigInvalid        = envdAuthError("invalid signature")
	errSigExpired        = envdAuthError("signature is already expired")
)

// signedFileOp is the operation a request may be signed for: envd accepts
// signatures on GET and POST /files only, every other route needs the
// token itself.
func signedFileOp(r *http.Request) (string, bool) {
	if r.URL.Path != "/files" {
		return "", false
	}
	switch r.Method {
	case http.MethodGet:
		return signOpRead, true
	case http.MethodPost:
		return signOpWrite, true
	}
	return "", false
}

// authorizeEnvd decides whether a request to a sandbox's envd port may
// pass, given the sandbox's envdAccessToken ("" for a sandbox created with
// secure: false, which needs nothing). It follows envd: the token in
// X-Access-Token opens every route; GET and POST /files may instead carry
// a valid, unexpired signature. A signed request is rewritten to be
// exactly what was signed: the signature parameters are dropped (the
// sandbox never sees them) and so is an Authorization header, which would
// otherwise choose a user the signature did not name.
func authorizeEnvd(r *http.Request, token string, now time.Time) error {
	if token == "" {
		return nil
	}
	got := r.Header.Get(headerAccessToken)
	op, signable := signedFileOp(r)
	if !signable {
		if !tokenOK(token, got) {
			return errdefs.ErrUnauthenticatedf("sandbox is secure: send its envdAccessToken as %s", headerAccessToken)
		}
		return nil
	}
	if got != "" {
		if !tokenOK(token, got) {
			return errSigHeaderMismatch
		}
		return nil
	}
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return errdefs.Invalid("query string: %v", err)
	}
	// Each signed parameter once: a second value could be read by one side
	// and not the other.
	for _, k := range []string{querySignature, querySigExpires, querySigPath, querySigUser} {
		if len(q[k]) > 1 {
			return errdefs.Invalid("query parameter %q given more than once", k)
		}
	}
	if !q.Has(querySignature) {
		return errSigMissing
	}
	var expires *int64
	if q.Has(querySigExpires) {
		v, err := parseExpiration(q.Get(querySigExpires))
		if err != nil {
			return err
		}
		expires = &v
	}
	want := fileSignature(q.Get(querySigPath), op, q.Get(querySigUser), token, expires)
	if subtle.ConstantTimeCompare([]byte(want), []byte(q.Get(querySignature))) != 1 {
		return errSigInvalid
	}
	if expires != nil && *expires < now.Unix() {
		return errSigExpired
	}
	q.Del(querySignature)
	q.Del(querySigExpires)
	r.URL.RawQuery = q.Encode()
	r.Header.Del("Authorization")
	return nil
}

// parseExpiration reads signature_expiration: a decimal Unix time in
// seconds, as the SDKs write it (now plus useSignatureExpiration, which may
// be negative). It must fit in 64 bits; any value that does is the
// signer's choice, since a URL signed without one never expires at all.
func parseExpiration(s string) (int64, error) {
	t := strings.TrimPrefix(s, "-")
	if t == "" || len(t) > 19 || strings.Trim(t, "0123456789") != "" {
		return 0, errdefs.Invalid("invalid format for parameter %s: want a Unix time in seconds", querySigExpires)
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, errdefs.Invalid("invalid format for parameter %s: want a Unix time in seconds", querySigExpires)
	}
	return v, nil
}
