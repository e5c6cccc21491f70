package api

// S3Info is the daemon's S3-compatible backup storage, as shown by GET
// /v1/info. Credentials are never part of it.
type S3Info struct {
	Endpoint  string `json:"endpoint"`
	Bucket    string `json:"bucket"`
	Prefix    string `json:"prefix,omitempty"`
	Region    string `json:"region"`
	PathStyle bool   `json:"path_style"`
}

// StoreUsage is how full the local snapshot store is: snapshot layers
// (each stored once, however many snapshots name it) plus local backup
// archives.
type StoreUsage struct {
	UsedBytes int64 `json:"used_bytes"`
	// LimitBytes is the cap (PADDOCK_SNAPSHOT_STORE_MAX); 0 = none.
	LimitBytes int64 `json:"limit_bytes,omitempty"`
}
