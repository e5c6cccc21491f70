package config

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseBytes(t *testing.T) {
	for in, want := range map[string]int64{
		"1": 1, "1024": 1024, "1K": 1 << 10, "1M": 1 << 20, "2G": 2 << 30, "1.5GiB": 3 << 29, "512mb": 512 << 20, " 3 M ": 3 << 20,
	} {
		if got, err := ParseBytes(in); err != nil || got != want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "-1", "0", "1X", "M", "1e3", "99999999999T"} {
		if _, err := ParseBytes(bad); err == nil {
			t.Errorf("ParseBytes(%q) accepted", bad)
		}
	}
}

func FuzzParseBytes(f *testing.F) {
	for _, s := range []string{"1", "1M", "2.5G", "x", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseBytes(s)
		if err == nil && (n < 1 || n > 1<<62) {
			t.Fatalf("ParseBytes(%q) = %d", s, n)
		}
	})
}

func TestStorageEnv(t *testing.T) {
	creds := filepath.Join(t.TempDir(), "credentials")
	if err := os.WriteFile(creds, []byte("# keys\n[other]\naws_access_key_id = WRONG\n[default]\naws_access_key_id = AKFILE\naws_secret_access_key = file-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		env     map[string]string
		wantErr string
		check   func(c Config) bool
	}{
		{"off", map[string]string{}, "", func(c Config) bool { return !c.BackupS3.Enabled() && c.SnapshotStoreMax == 0 }},
		{"env keys", map[string]string{
			"PADDOCK_BACKUP_S3_ENDPOINT": "http://127.0.0.1:9000", "PADDOCK_BACKUP_S3_BUCKET": "bk1", "PADDOCK_BACKUP_S3_PATH_STYLE": "true",
			"AWS_ACCESS_KEY_ID": "AK", "AWS_SECRET_ACCESS_KEY": "env-secret", "PADDOCK_SNAPSHOT_STORE_MAX": "2G",
		}, "", func(c Config) bool {
			return c.BackupS3.PathStyle && c.BackupS3.SecretAccessKey == "env-secret" && c.SnapshotStoreMax == 2<<30
		}},
		{"credentials file wins", map[string]string{
			"PADDOCK_BACKUP_S3_ENDPOINT": "https://s3.example", "PADDOCK_BACKUP_S3_BUCKET": "bk1",
			"PADDOCK_BACKUP_S3_CREDENTIALS_FILE": creds, "AWS_SECRET_ACCESS_KEY": "env-secret",
		}, "", func(c Config) bool {
			return c.BackupS3.AccessKeyID == "AKFILE" && c.BackupS3.SecretAccessKey == "file-secret"
		}},
		{"no bucket", map[string]string{"PADDOCK_BACKUP_S3_ENDPOINT": "https://s3.example", "AWS_ACCESS_KEY_ID": "a", "AWS_SECRET_ACCESS_KEY": "b"}, "BUCKET is required", nil},
		{"no keys", map[string]string{"PADDOCK_BACKUP_S3_ENDPOINT": "https://s3.example", "PADDOCK_BACKUP_S3_BUCKET": "bk1"}, "needs credentials", nil},
		{"bad prefix", map[string]string{"PADDOCK_BACKUP_S3_ENDPOINT": "https://s3.example", "PADDOCK_BACKUP_S3_BUCKET": "bk1",
			"AWS_ACCESS_KEY_ID": "a", "AWS_SECRET_ACCESS_KEY": "b", "PADDOCK_BACKUP_S3_PREFIX": "../x"}, "PREFIX", nil},
		{"bad endpoint", map[string]string{"PADDOCK_BACKUP_S3_ENDPOINT": "ftp://x", "PADDOCK_BACKUP_S3_BUCKET": "bk1", "AWS_ACCESS_KEY_ID": "a", "AWS_SECRET_ACCESS_KEY": "b"}, "ENDPOINT", nil},
		{"bad bucket", map[string]string{"PADDOCK_BACKUP_S3_ENDPOINT": "https://x", "PADDOCK_BACKUP_S3_BUCKET": "B_1", "AWS_ACCESS_KEY_ID": "a", "AWS_SECRET_ACCESS_KEY": "b"}, "BUCKET", nil},
		{"bad max", map[string]string{"PADDOCK_SNAPSHOT_STORE_MAX": "lots"}, "PADDOCK_SNAPSHOT_STORE_MAX", nil},
		{"bad path style", map[string]string{"PADDOCK_BACKUP_S3_PATH_STYLE": "maybe"}, "PATH_STYLE", nil},
		{"image import cap default", map[string]string{}, "", func(c Config) bool { return c.ImageImportMaxPerKey == 32<<30 }},
		{"image import cap", map[string]string{"PADDOCK_IMAGE_IMPORT_MAX_PER_KEY": "5G"}, "", func(c Config) bool { return c.ImageImportMaxPerKey == 5<<30 }},
		{"image import cap too small", map[string]string{"PADDOCK_IMAGE_IMPORT_MAX_PER_KEY": "1K"}, "image_import_max_per_key", nil},
		{"image import cap not a size", map[string]string{"PADDOCK_IMAGE_IMPORT_MAX_PER_KEY": "-3"}, "PADDOCK_IMAGE_IMPORT_MAX_PER_KEY", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			c.StateDir, c.Socket = "/s", "/s/p.sock"
			err := c.ApplyEnv(func(k string) string { return tt.env[k] })
			if err == nil {
				err = c.Validate()
			}
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one saying %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !tt.check(c) {
				t.Fatalf("config = %+v", c.BackupS3)
			}
			b, _ := json.Marshal(c)
			if strings.Contains(string(b), "secret") {
				t.Fatalf("the printed config carries a secret: %s", b)
			}
		})
	}
}
