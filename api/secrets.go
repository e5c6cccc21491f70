package api

import "time"

// LedgerNetworkInject is the ledger kind of an injection rule added or
// removed; Data carries host, header and action, never the value.
const LedgerNetworkInject = "network_inject"

// Secret is what the API tells about a stored secret: never its value.
type Secret struct {
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	// UsedBy are the sandboxes whose injection rules reference it (those
	// the caller can see).
	UsedBy []string `json:"used_by,omitempty"`
	// CreatedBy owns the secret: the API key id of the caller that first
	// set it, CallerLocal for the unix socket, absent for older secrets.
	CreatedBy string `json:"created_by,omitempty"`
}

// SecretList is the body of GET /v1/secrets.
type SecretList struct {
	Secrets []Secret `json:"secrets"`
}

// SetSecretRequest is the body of PUT /v1/secrets/{name}: the value is
// 1 byte to 64 KiB with no NUL, CR or LF (it becomes a header value).
type SetSecretRequest struct {
	Value string `json:"value"`
}

// Injection is a credential injection rule of an egress sandbox: requests
// to Host (a name or a glob like the allow rules) get Header set to Value,
// a template in which {{secret:NAME}} stands for a stored secret. Only
// HTTPS requests are injected, and an injection never allows a host.
type Injection struct {
	Host   string `json:"host"`
	Header string `json:"header"`
	Value  string `json:"value"`
}
