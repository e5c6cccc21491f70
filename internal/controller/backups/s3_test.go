package backups

import "testing"

func TestBackupStoreNames(t *testing.T) {
	for in, want := range map[string]string{"": storageLocal, "local": storageLocal, "s3": storageS3} {
		if got, err := backupStore(in); err != nil || got != want {
			t.Errorf("backupStore(%q) = %q, %v", in, got, err)
		}
	}
	for _, bad := range []string{"S3", "gcs", "s3://x", "local "} {
		if _, err := backupStore(bad); err == nil {
			t.Errorf("backupStore(%q) accepted", bad)
		}
	}
}

func TestS3Location(t *testing.T) {
	tests := []struct {
		in          string
		bucket, key string
		ok          bool
	}{
		{"s3://bkt/p/backups/bk1.tar.gz", "bkt", "p/backups/bk1.tar.gz", true},
		{"s3://bkt/", "", "", false},
		{"s3://bkt", "", "", false},
		{"s3://BK/x", "", "", false},
		{"s3://bkt/../x", "", "", false},
		{"local", "", "", false},
	}
	for _, tt := range tests {
		b, k, ok := s3Location(tt.in)
		if ok != tt.ok || (ok && (b != tt.bucket || k != tt.key)) {
			t.Errorf("s3Location(%q) = %q, %q, %v", tt.in, b, k, ok)
		}
	}
	for in, want := range map[string][2]string{
		"local": {"local", ""}, "": {"local", ""}, "s3://b/k": {"s3", "s3://b/k"},
	} {
		if n, l := storageAPI(in); n != want[0] || l != want[1] {
			t.Errorf("storageAPI(%q) = %q, %q", in, n, l)
		}
	}
}
