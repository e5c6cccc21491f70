// Package objstore is a small client for S3-compatible object storage:
// the few operations Paddock's backups need (put, multipart upload, get,
// head, delete, list), signed with AWS Signature Version 4.
//
// It is written from the documented protocol rather than pulled from an
// SDK so the daemon keeps a small dependency graph and so every request it
// sends (and every secret it could leak into an error) is visible here.
package objstore

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"
)

const (
	sigAlgorithm = "AWS4-HMAC-SHA256"
	amzDateFmt   = "20060102T150405Z"
	dateFmt      = "20060102"
	service      = "s3"

	// EmptySHA256 is the hex sha256 of no bytes.
	EmptySHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
	// UnsignedPayload stands in for the payload hash of a body streamed
	// without hashing it first; only used over TLS.
	UnsignedPayload = "UNSIGNED-PAYLOAD"
)

// Credentials authenticate requests. SessionToken is set for temporary
// credentials.
type Credentials struct {
	AccessKeyID     string
	SecretAccessKey string
	SessionToken    string
}

// signer computes SigV4 Authorization headers for one region.
type signer struct {
	creds  Credentials
	region string
}

// sign adds x-amz-date, x-amz-content-sha256 (payloadHash), the session
// token if any, and Authorization to req. Every header already set on req
// is signed along with host, so callers set the headers they want covered
// (such as Range or Content-Type) before signing.
func (s signer) sign(req *http.Request, payloadHash string, now time.Time) {
	now = now.UTC()
	amzDate := now.Format(amzDateFmt)
	req.Header.Set("X-Amz-Date", amzDate)
	req.Header.Set("X-Amz-Content-Sha256", payloadHash)
	if s.creds.SessionToken != "" {
		req.Header.Set("X-Amz-Security-Token", s.creds.SessionToken)
	}
	req.Header.Del("Authorization")

	host := req.Host
	if host == "" {
		host = req.URL.Host
	}
	names := []string{"host"}
	values := map[string]string{"host": host}
	for k, vs := range req.Header {
		lk := strings.ToLower(k)
		if lk == "user-agent" || lk == "content-length" {
			continue
		}
		trimmed := make([]string, len(vs))
		for i, v := range vs {
			trimmed[i] = strings.Join(strings.Fields(v), " ")
		}
		names = append(names, lk)
		values[lk] = strings.Join(trimmed, ",")
	}
	sort.Strings(names)
	var canonHeaders strings.Builder
	for _, n := range names {
		canonHeaders.WriteString(n)
		canonHeaders.WriteByte(':')
		canonHeaders.WriteString(values[n])
		canonHeaders.WriteByte('\n')
	}
	signedHeaders := strings.Join(names, ";")

	canonical := strings.Join([]string{
		req.Method,
		canonicalURI(req.URL),
		canonicalQuery(req.URL.Query()),
		canonHeaders.String(),
		signedHeaders,
		payloadHash,
	}, "\n")
	scope := now.Format(dateFmt) + "/" + s.region + "/" + service + "/aws4_request"
	sum := sha256.Sum256([]byte(canonical))
	toSign := sigAlgorithm + "\n" + amzDate + "\n" + scope + "\n" + hex.EncodeToString(sum[:])

	k := hmacSHA256([]byte("AWS4"+s.creds.SecretAccessKey), now.Format(dateFmt))
	k = hmacSHA256(k, s.region)
	k = hmacSHA256(k, service)
	k = hmacSHA256(k, "aws4_request")
	sig := hex.EncodeToString(hmacSHA256(k, toSign))

	req.Header.Set("Authorization", sigAlgorithm+" Credential="+s.creds.AccessKeyID+"/"+scope+
		",SignedHeaders="+signedHeaders+",Signature="+sig)
}

func hmacSHA256(key []byte, data string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(data))
	return m.Sum(nil)
}

// canonicalURI is the path with each segment URI-encoded once (S3 does not
// double-encode).
func canonicalURI(u *url.URL) string {
	p := u.Path
	if p == "" {
		return "/"
	}
	segs := strings.Split(p, "/")
	for i, s := range segs {
		segs[i] = uriEncode(s)
	}
	return strings.Join(segs, "/")
}

func canonicalQuery(q url.Values) string {
	keys := make([]string, 0, len(q))
	for k := range q {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		vs := append([]string(nil), q[k]...)
		sort.Strings(vs)
		for _, v := range vs {
			parts = append(parts, uriEncode(k)+"="+uriEncode(v))
		}
	}
	return strings.Join(parts, "&")
}

// uriEncode percent-encodes every byte except the RFC 3986 unreserved
// characters, in upper-case hex, as SigV4 requires.
func uriEncode(s string) string {
	const hexdig = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hexdig[c>>4])
		b.WriteByte(hexdig[c&15])
	}
	return b.String()
}
