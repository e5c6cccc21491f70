package cli

import (
	"fmt"
	"io"

	"github.com/paddock-dev/paddock/api"
)

// printStorageInfo adds the snapshot store's use and the S3 backup
// storage (endpoint and bucket only: the daemon never reports keys) to
// `paddock info`.
func printStorageInfo(w io.Writer, in *api.Info) {
	if u := in.SnapshotStore; u != nil {
		limit := "no limit"
		if u.LimitBytes > 0 {
			limit = "limit " + humanBytes(u.LimitBytes) + fmt.Sprintf(" (%d bytes)", u.LimitBytes)
		}
		fmt.Fprintf(w, "Snapshot store: %s used (%d bytes), %s\n", humanBytes(u.UsedBytes), u.UsedBytes, limit)
	}
	if s := in.BackupS3; s != nil {
		style := "virtual-hosted"
		if s.PathStyle {
			style = "path-style"
		}
		fmt.Fprintf(w, "Backup S3:      %s bucket %s prefix %q region %s (%s)\n", s.Endpoint, s.Bucket, s.Prefix, s.Region, style)
	} else {
		fmt.Fprintln(w, "Backup S3:      not configured (backups use the local store)")
	}
	if in.Firewall != "" {
		fmt.Fprintf(w, "Network:        egress available, firewall %s\n", in.Firewall)
	} else {
		fmt.Fprintln(w, "Network:        no networking on this daemon (mode none only; see its start log)")
	}
}
