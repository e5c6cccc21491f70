package objstore

import (
	"bytes"
	"net/http"
	"strings"
	"testing"
	"time"
)

// The worked examples of AWS's "Signature Calculations for the
// Authorization Header" page for S3: bucket examplebucket, access key
// AKIAIOSFODNN7EXAMPLE, 24 May 2013.
func TestSignDocumentedExamples(t *testing.T) {
	creds := Credentials{AccessKeyID: "AKIAIOSFODNN7EXAMPLE", SecretAccessKey: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"}
	at := time.Date(2013, 5, 24, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name, method, url string
		header            map[string]string
		payload           string
		wantSigned        string
		wantSig           string
	}{
		{
			name: "GET object with Range", method: "GET", url: "https://examplebucket.s3.amazonaws.com/test.txt",
			header:     map[string]string{"Range": "bytes=0-9"},
			payload:    EmptySHA256,
			wantSigned: "host;range;x-amz-content-sha256;x-amz-date",
			wantSig:    "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41",
		},
		{
			name: "GET bucket lifecycle", method: "GET", url: "https://examplebucket.s3.amazonaws.com/?lifecycle",
			payload:    EmptySHA256,
			wantSigned: "host;x-amz-content-sha256;x-amz-date",
			wantSig:    "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543",
		},
		{
			name: "list objects", method: "GET", url: "https://examplebucket.s3.amazonaws.com/?max-keys=2&prefix=J",
			payload:    EmptySHA256,
			wantSigned: "host;x-amz-content-sha256;x-amz-date",
			wantSig:    "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(tt.method, tt.url, nil)
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range tt.header {
				req.Header.Set(k, v)
			}
			signer{creds: creds, region: "us-east-1"}.sign(req, tt.payload, at)
			want := "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,SignedHeaders=" +
				tt.wantSigned + ",Signature=" + tt.wantSig
			if got := req.Header.Get("Authorization"); got != want {
				t.Errorf("Authorization\n got %s\nwant %s", got, want)
			}
			if got := req.Header.Get("X-Amz-Date"); got != "20130524T000000Z" {
				t.Errorf("x-amz-date = %q", got)
			}
		})
	}
}

func TestSignSessionTokenIsSigned(t *testing.T) {
	req, _ := http.NewRequest("GET", "https://b.example/k", nil)
	signer{creds: Credentials{AccessKeyID: "A", SecretAccessKey: "S", SessionToken: "tok"}, region: "r"}.sign(req, EmptySHA256, time.Now())
	if req.Header.Get("X-Amz-Security-Token") != "tok" || !strings.Contains(req.Header.Get("Authorization"), "x-amz-security-token") {
		t.Fatalf("session token not sent and signed: %v", req.Header)
	}
}

func TestURIEncode(t *testing.T) {
	for in, want := range map[string]string{
		"abc-._~XYZ09": "abc-._~XYZ09",
		"a b":          "a%20b",
		"a+b=c&d":      "a%2Bb%3Dc%26d",
		"é":            "%C3%A9",
		"":             "",
	} {
		if got := uriEncode(in); got != want {
			t.Errorf("uriEncode(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestObjectURL(t *testing.T) {
	tests := []struct {
		endpoint  string
		pathStyle bool
		want      string
	}{
		{"http://127.0.0.1:9000", true, "http://127.0.0.1:9000/bkt/a/b%20c.tgz"},
		{"https://s3.example.com/base/", true, "https://s3.example.com/base/bkt/a/b%20c.tgz"},
		{"s3.example.com", false, "https://bkt.s3.example.com/a/b%20c.tgz"},
	}
	for _, tt := range tests {
		c, err := New(Options{Endpoint: tt.endpoint, PathStyle: tt.pathStyle, Credentials: Credentials{AccessKeyID: "a", SecretAccessKey: "b"}})
		if err != nil {
			t.Fatal(err)
		}
		if got := c.objectURL("bkt", "a/b c.tgz", nil).String(); got != tt.want {
			t.Errorf("%s: got %s, want %s", tt.endpoint, got, tt.want)
		}
	}
}

func TestNewRejects(t *testing.T) {
	good := Credentials{AccessKeyID: "a", SecretAccessKey: "b"}
	for name, o := range map[string]Options{
		"no endpoint":    {Credentials: good},
		"ftp":            {Endpoint: "ftp://x", Credentials: good},
		"userinfo":       {Endpoint: "https://u:p@x", Credentials: good},
		"no credentials": {Endpoint: "https://x"},
		"bad region":     {Endpoint: "https://x", Region: "a/b", Credentials: good},
		"tiny parts":     {Endpoint: "https://x", Credentials: good, PartSize: 1 << 20},
	} {
		if _, err := New(o); err == nil {
			t.Errorf("%s: New accepted %+v", name, o)
		}
	}
}

func TestValidKeyAndBucket(t *testing.T) {
	for k, want := range map[string]bool{"a/b.tgz": true, "": false, "/a": false, "a/../b": false, "a/./b": false, "a b": false, "a\x00": false} {
		if ValidKey(k) != want {
			t.Errorf("ValidKey(%q) != %v", k, want)
		}
	}
	for b, want := range map[string]bool{"backups": true, "my-b.1": true, "ab": false, "-ab": false, "AB": false, "a_b": false} {
		if ValidBucket(b) != want {
			t.Errorf("ValidBucket(%q) != %v", b, want)
		}
	}
}

func TestParseList(t *testing.T) {
	page := `<?xml version="1.0" encoding="UTF-8"?>
<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>b</Name><IsTruncated>true</IsTruncated>
<NextContinuationToken>tok1</NextContinuationToken>
<Contents><Key>p/a</Key><Size>3</Size><ETag>"e1"</ETag><LastModified>2026-11-29T10:00:00.000Z</LastModified></Contents>
<Contents><Key>p/b</Key><Size>0</Size></Contents></ListBucketResult>`
	p, err := parseList(strings.NewReader(page))
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Objects) != 2 || p.Objects[0].Key != "p/a" || p.Objects[0].Size != 3 || p.Objects[0].ETag != "e1" || p.Next != "tok1" || p.Objects[0].LastModified.IsZero() {
		t.Fatalf("parsed %+v", p)
	}
	for name, bad := range map[string]string{
		"not xml":          "hello",
		"other element":    "<Error><Code>x</Code></Error>",
		"negative size":    "<ListBucketResult><Contents><Key>a</Key><Size>-1</Size></Contents></ListBucketResult>",
		"dotdot key":       "<ListBucketResult><Contents><Key>../a</Key><Size>1</Size></Contents></ListBucketResult>",
		"truncated no tok": "<ListBucketResult><IsTruncated>true</IsTruncated></ListBucketResult>",
	} {
		if _, err := parseList(strings.NewReader(bad)); err == nil {
			t.Errorf("%s: parseList accepted %q", name, bad)
		}
	}
}

func FuzzParseList(f *testing.F) {
	f.Add([]byte(`<ListBucketResult><IsTruncated>false</IsTruncated><Contents><Key>a/b</Key><Size>1</Size></Contents></ListBucketResult>`))
	f.Add([]byte(`<ListBucketResult><IsTruncated>true</IsTruncated><NextContinuationToken>x</NextContinuationToken></ListBucketResult>`))
	f.Add([]byte(`<Error><Code>NoSuchBucket</Code></Error>`))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := parseList(bytes.NewReader(b))
		if err != nil {
			return
		}
		for _, o := range p.Objects {
			if !ValidKey(o.Key) || o.Size < 0 {
				t.Fatalf("parseList let through %+v", o)
			}
		}
	})
}
