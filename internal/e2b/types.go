package e2b

import (
	"encoding/json"
	"time"
)

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
	AutoResume          *autoResume       `json:"autoResume,omitempty"`
}

// autoResume is E2B's SandboxAutoResumeConfig.
type autoResume struct {
	Enabled *bool `json:"enabled,omitempty"`
}

// lifecycle is E2B's SandboxLifecycle, as getInfo reports it.
type lifecycle struct {
	OnTimeout  string `json:"onTimeout"`
	AutoResume bool   `json:"autoResume"`
}

// networkConfig is E2B's SandboxNetworkConfig: egress rules (network.go),
// and how the sandbox's ports are reached (proxy.go).
type networkConfig struct {
	AllowPublicTraffic *bool                    `json:"allowPublicTraffic,omitempty"`
	AllowOut           []string                 `json:"allowOut,omitempty"`
	DenyOut            []string                 `json:"denyOut,omitempty"`
	Rules              map[string][]networkRule `json:"rules,omitempty"`
	EgressProxy        json.RawMessage          `json:"egressProxy,omitempty"`
	MaskRequestHost    *string                  `json:"maskRequestHost,omitempty"`
	HTTPSPorts         []int                    `json:"httpsPorts,omitempty"`
}

// networkRule is one of a host's transform rules: headers set on the
// sandbox's HTTPS requests to that host.
type networkRule struct {
	Transform *networkTransform `json:"transform,omitempty"`
}

type networkTransform struct {
	Headers map[string]string `json:"headers,omitempty"`
}

// networkUpdate is the body of PUT /sandboxes/{id}/network: it replaces
// the egress rules, and a field left out is cleared.
type networkUpdate struct {
	AllowInternetAccess *bool                    `json:"allow_internet_access,omitempty"`
	AllowOut            []string                 `json:"allowOut,omitempty"`
	DenyOut             []string                 `json:"denyOut,omitempty"`
	Rules               map[string][]networkRule `json:"rules,omitempty"`
	EgressProxy         json.RawMessage          `json:"egressProxy,omitempty"`
}

// networkInfo is the network getInfo reports: what the sandbox has, not
// what was asked for.
type networkInfo struct {
	AllowOut           []string                 `json:"allowOut"`
	DenyOut            []string                 `json:"denyOut"`
	Rules              map[string][]networkRule `json:"rules,omitempty"`
	AllowPublicTraffic bool                     `json:"allowPublicTraffic"`
	MaskRequestHost    string                   `json:"maskRequestHost,omitempty"`
	HTTPSPorts         []int                    `json:"httpsPorts,omitempty"`
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
	// AllowInternetAccess says whether the sandbox can reach any host
	// name (through the proxy); Network what it can reach.
	AllowInternetAccess bool        `json:"allowInternetAccess"`
	Network             networkInfo `json:"network"`
	Lifecycle           lifecycle   `json:"lifecycle"`
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
