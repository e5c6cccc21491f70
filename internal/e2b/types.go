package e2b

import "time"

// These are E2B's wire shapes (its public OpenAPI document), as the `e2b`
// SDKs read and write them. Field names are E2B's, not Paddock's.

// newSandbox is the body of POST /sandboxes and POST /v2/sandboxes.
type newSandbox struct {
	TemplateID          string            `json:"templateID"`
	Timeout             *int64            `json:"timeout,omitempty"` // seconds
	AutoPause           *bool             `json:"autoPause,omitempty"`
	AutoPauseMemory     *bool             `json:"autoPauseMemory,omitempty"`
	Secure              *bool             `json:"secure,omitempty"`
	AllowInternetAccess *bool             `json:"allow_internet_access,omitempty"`
	Metadata            map[string]string `json:"metadata,omitempty"`
	EnvVars             map[string]string `json:"envVars,omitempty"`
	Network             *networkConfig    `json:"network,omitempty"`
	VolumeMounts        []any             `json:"volumeMounts,omitempty"`
	MCP                 any               `json:"mcp,omitempty"`
	IAM                 any               `json:"iam,omitempty"`
	AutoResume          any               `json:"autoResume,omitempty"`
}

// networkConfig is the part of E2B's network options Paddock can honour:
// whether the sandbox's ports need a traffic token. Egress rules are
// refused when present (sandboxes have loopback-only networking).
type networkConfig struct {
	AllowPublicTraffic *bool    `json:"allowPublicTraffic,omitempty"`
	AllowOut           []string `json:"allowOut,omitempty"`
	DenyOut            []string `json:"denyOut,omitempty"`
	Rules              any      `json:"rules,omitempty"`
	EgressProxy        any      `json:"egressProxy,omitempty"`
	MaskRequestHost    *string  `json:"maskRequestHost,omitempty"`
	HTTPSPorts         any      `json:"httpsPorts,omitempty"`
}

// sandbox is E2B's "Sandbox": what create and connect return.
type sandbox struct {
	TemplateID         string `json:"templateID"`
	SandboxID          string `json:"sandboxID"`
	Alias              string `json:"alias,omitempty"`
	ClientID           string `json:"clientID"`
	EnvdVersion        string `json:"envdVersion"`
	EnvdAccessToken    string `json:"envdAccessToken,omitempty"`
	TrafficAccessToken string `json:"trafficAccessToken,omitempty"`
	Domain             string `json:"domain,omitempty"`
}

// listedSandbox is E2B's "ListedSandbox"; sandboxDetail adds the tokens
// and domain (GET /sandboxes/{id}).
type listedSandbox struct {
	TemplateID   string            `json:"templateID"`
	Alias        string            `json:"alias,omitempty"`
	SandboxID    string            `json:"sandboxID"`
	ClientID     string            `json:"clientID"`
	StartedAt    time.Time         `json:"startedAt"`
	EndAt        time.Time         `json:"endAt"`
	CPUCount     int               `json:"cpuCount"`
	MemoryMB     int64             `json:"memoryMB"`
	DiskSizeMB   int64             `json:"diskSizeMB"`
	Metadata     map[string]string `json:"metadata"`
	State        string            `json:"state"`
	EnvdVersion  string            `json:"envdVersion"`
	VolumeMounts []any             `json:"volumeMounts"`
}

type sandboxDetail struct {
	listedSandbox
	EnvdAccessToken    string `json:"envdAccessToken,omitempty"`
	TrafficAccessToken string `json:"trafficAccessToken,omitempty"`
	Domain             string `json:"domain,omitempty"`
}

// timeoutBody is the body of POST /sandboxes/{id}/timeout and
// /v2/sandboxes/{id}/connect.
type timeoutBody struct {
	Timeout *int64 `json:"timeout,omitempty"`
	Memory  *bool  `json:"memory,omitempty"`
}

// pauseBody is the body of POST /sandboxes/{id}/pause.
type pauseBody struct {
	Memory *bool `json:"memory,omitempty"`
}

// metric is one E2B "SandboxMetric".
type metric struct {
	Timestamp     time.Time `json:"timestamp"`
	TimestampUnix int64     `json:"timestampUnix"`
	CPUCount      int       `json:"cpuCount"`
	CPUUsedPct    float64   `json:"cpuUsedPct"`
	MemUsed       uint64    `json:"memUsed"`
	MemTotal      uint64    `json:"memTotal"`
	MemCache      uint64    `json:"memCache"`
	DiskUsed      uint64    `json:"diskUsed"`
	DiskTotal     uint64    `json:"diskTotal"`
}

// apiError is E2B's error body: code is the HTTP status.
type apiError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}
