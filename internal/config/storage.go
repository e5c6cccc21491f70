package config

import (
	"bufio"
	"errors"
	"fmt"
	"math"
	"net/url"
	"os"
	"strconv"
	"strings"

	"github.com/paddock-dev/paddock/internal/lazyre"
)

// BackupS3 configures S3-compatible object storage for backups. The keys
// are kept out of JSON so `serve --print-config` never shows them.
type BackupS3 struct {
	// Endpoint is the service URL ($PADDOCK_BACKUP_S3_ENDPOINT); "" = S3
	// storage is off. Plain http only when the URL says http:// itself.
	Endpoint string `json:"endpoint,omitempty"`
	// Bucket ($PADDOCK_BACKUP_S3_BUCKET) and Prefix, prepended to every key
	// ($PADDOCK_BACKUP_S3_PREFIX).
	Bucket string `json:"bucket,omitempty"`
	Prefix string `json:"prefix,omitempty"`
	// Region signs requests ($PADDOCK_BACKUP_S3_REGION, default us-east-1).
	Region string `json:"region,omitempty"`
	// PathStyle addresses <endpoint>/<bucket>/<key>
	// ($PADDOCK_BACKUP_S3_PATH_STYLE); default virtual-hosted.
	PathStyle bool `json:"path_style,omitempty"`
	// CredentialsFile holds the keys ($PADDOCK_BACKUP_S3_CREDENTIALS_FILE),
	// in the AWS shared-credentials format; otherwise AWS_ACCESS_KEY_ID,
	// AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN.
	CredentialsFile string `json:"credentials_file,omitempty"`

	AccessKeyID     string `json:"-"`
	SecretAccessKey string `json:"-"`
	SessionToken    string `json:"-"`
}

// Enabled reports whether S3 backup storage is configured.
func (b BackupS3) Enabled() bool { return b.Endpoint != "" }

var s3BucketRE = lazyre.New(`^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$`)

var s3PrefixRE = lazyre.New(`^[A-Za-z0-9!_.*'()/-]{0,256}$`)

// applyStorageEnv reads the S3 and snapshot-store settings.
func (c *Config) applyStorageEnv(getenv func(string) string) error {
	s := &c.BackupS3
	for env, dst := range map[string]*string{
		"PADDOCK_BACKUP_S3_ENDPOINT":         &s.Endpoint,
		"PADDOCK_BACKUP_S3_BUCKET":           &s.Bucket,
		"PADDOCK_BACKUP_S3_PREFIX":           &s.Prefix,
		"PADDOCK_BACKUP_S3_REGION":           &s.Region,
		"PADDOCK_BACKUP_S3_CREDENTIALS_FILE": &s.CredentialsFile,
	} {
		if v := getenv(env); v != "" {
			*dst = strings.TrimSpace(v)
		}
	}
	if v := getenv("PADDOCK_BACKUP_S3_PATH_STYLE"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("PADDOCK_BACKUP_S3_PATH_STYLE: want true or false")
		}
		s.PathStyle = b
	}
	if s.Endpoint != "" {
		if s.CredentialsFile != "" {
			if err := s.readCredentialsFile(); err != nil {
				return err
			}
		} else {
			s.AccessKeyID = getenv("AWS_ACCESS_KEY_ID")
			s.SecretAccessKey = getenv("AWS_SECRET_ACCESS_KEY")
			s.SessionToken = getenv("AWS_SESSION_TOKEN")
		}
	}
	if v := getenv("PADDOCK_SNAPSHOT_STORE_MAX"); v != "" {
		n, err := ParseBytes(v)
		if err != nil {
			return fmt.Errorf("PADDOCK_SNAPSHOT_STORE_MAX: %w", err)
		}
		c.SnapshotStoreMax = n
	}
	if v := getenv("PADDOCK_IMAGE_IMPORT_MAX_PER_KEY"); v != "" {
		n, err := ParseBytes(v)
		if err != nil {
			return fmt.Errorf("PADDOCK_IMAGE_IMPORT_MAX_PER_KEY: %w", err)
		}
		c.ImageImportMaxPerKey = n
	}
	return nil
}

// readCredentialsFile reads aws_access_key_id, aws_secret_access_key and
// aws_session_token from the file's [default] section (or from a file
// without sections). Errors never quote the file's lines.
func (s *BackupS3) readCredentialsFile() error {
	f, err := os.Open(s.CredentialsFile)
	if err != nil {
		return fmt.Errorf("PADDOCK_BACKUP_S3_CREDENTIALS_FILE: %w", err)
	}
	defer f.Close()
	section := "default"
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";") {
			continue
		}
		if strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]") {
			section = strings.TrimSpace(line[1 : len(line)-1])
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return fmt.Errorf("PADDOCK_BACKUP_S3_CREDENTIALS_FILE: line %d is not key = value", n)
		}
		if section != "default" {
			continue
		}
		switch strings.ToLower(strings.TrimSpace(k)) {
		case "aws_access_key_id":
			s.AccessKeyID = strings.TrimSpace(v)
		case "aws_secret_access_key":
			s.SecretAccessKey = strings.TrimSpace(v)
		case "aws_session_token":
			s.SessionToken = strings.TrimSpace(v)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("PADDOCK_BACKUP_S3_CREDENTIALS_FILE: %w", err)
	}
	return nil
}

func (c *Config) validateStorage() []error {
	var errs []error
	if c.SnapshotStoreMax < 0 {
		errs = append(errs, errors.New("snapshot_store_max must not be negative"))
	}
	if c.ImageImportMaxPerKey < 1<<20 {
		errs = append(errs, fmt.Errorf("image_import_max_per_key %d: want at least 1 MiB (PADDOCK_IMAGE_IMPORT_MAX_PER_KEY, e.g. 20G)", c.ImageImportMaxPerKey))
	}
	s := c.BackupS3
	if !s.Enabled() {
		if s.Bucket != "" {
			errs = append(errs, errors.New("backup S3 bucket is set but PADDOCK_BACKUP_S3_ENDPOINT is not"))
		}
		return errs
	}
	ep := s.Endpoint
	if !strings.Contains(ep, "://") {
		ep = "https://" + ep
	}
	if u, err := url.Parse(ep); err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") || u.User != nil || u.RawQuery != "" {
		errs = append(errs, errors.New("PADDOCK_BACKUP_S3_ENDPOINT: want http(s)://host[:port][/path], without credentials or a query"))
	}
	if s.Bucket == "" {
		errs = append(errs, errors.New("PADDOCK_BACKUP_S3_BUCKET is required with PADDOCK_BACKUP_S3_ENDPOINT"))
	} else if !s3BucketRE.MatchString(s.Bucket) {
		errs = append(errs, fmt.Errorf("PADDOCK_BACKUP_S3_BUCKET %q: 3-63 lowercase letters, digits, '-' and '.'", s.Bucket))
	}
	if !s3PrefixRE.MatchString(s.Prefix) || strings.HasPrefix(s.Prefix, "/") || strings.Contains(s.Prefix, "..") {
		errs = append(errs, fmt.Errorf("PADDOCK_BACKUP_S3_PREFIX %q: at most 256 of letters, digits and !_.*'()/-, without \"..\" and not starting with /", s.Prefix))
	}
	if s.AccessKeyID == "" || s.SecretAccessKey == "" {
		errs = append(errs, errors.New("S3 backup storage needs credentials: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or PADDOCK_BACKUP_S3_CREDENTIALS_FILE"))
	}
	return errs
}

var sizeRE = lazyre.New(`^([0-9]+(?:\.[0-9]+)?)\s*([a-zA-Z]*)$`)

// ParseSize reads a size such as 512M, 2G, 1.5GiB or 4096 and returns it
// in bytes, unrounded. Units are binary whatever their spelling (M = MiB),
// as memory and disk limits are; a bare number counts in bareUnit bytes.
// The error is a short reason for the caller to put in its own message.
func ParseSize(s string, bareUnit float64) (float64, error) {
	m := sizeRE.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return 0, errors.New("not a size")
	}
	n, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		return 0, errors.New("not a number")
	}
	var mult float64
	switch strings.ToLower(m[2]) {
	case "":
		mult = bareUnit
	case "b":
		mult = 1
	case "k", "kb", "kib":
		mult = 1 << 10
	case "m", "mb", "mib":
		mult = 1 << 20
	case "g", "gb", "gib":
		mult = 1 << 30
	case "t", "tb", "tib":
		mult = 1 << 40
	default:
		return 0, errors.New("unknown unit " + strconv.Quote(m[2]))
	}
	return n * mult, nil
}

// ParseBytes reads a byte count such as 1073741824, 512M, 2G or 1.5GiB;
// a bare number is bytes.
func ParseBytes(s string) (int64, error) {
	bad := func(why string) error {
		return fmt.Errorf("%q: %s; want a size like 500M, 2G or 1073741824", s, why)
	}
	b, err := ParseSize(s, 1)
	if err != nil {
		return 0, bad(err.Error())
	}
	v := math.Ceil(b)
	if v < 1 || v > 1<<62 {
		return 0, bad("out of range")
	}
	return int64(v), nil
}
