package api

// Network modes of a sandbox.
const (
	// NetworkNone: loopback only (the default).
	NetworkNone = "none"
	// NetworkEgress: out only through Paddock's egress proxy and DNS, to
	// the hosts the rules allow.
	NetworkEgress = "egress"
)

// LedgerEgressRefused is the ledger kind of a refused connection, request
// or DNS lookup; Data carries host, port, rule and via.
const LedgerEgressRefused = "egress_refused"

// NetworkPolicy is a sandbox's network: its mode and, for egress, host
// rules. Hosts are DNS names or globs whose leading "*" label stands for
// one or more labels ("*.example.com"). Deny rules win over allow rules;
// a host no rule allows is refused.
type NetworkPolicy struct {
	Mode       string   `json:"mode"`
	AllowHosts []string `json:"allow_hosts,omitempty"`
	DenyHosts  []string `json:"deny_hosts,omitempty"`
	// AllowCIDRs are address rules: IPv4 addresses or CIDR blocks the
	// sandbox reaches directly, any port and protocol, past the proxy.
	// DenyCIDRs win over them. Loopback, link-local, multicast, the
	// daemon's own range and private ranges the operator has not
	// permitted are never reached (docs/networking.md).
	AllowCIDRs []string `json:"allow_cidrs,omitempty"`
	DenyCIDRs  []string `json:"deny_cidrs,omitempty"`
	// Ports are the destination ports allowed (default 80 and 443).
	Ports []int `json:"ports,omitempty"`
	// Inject are the credential injection rules (templates, never values).
	Inject []Injection `json:"inject,omitempty"`
}

// UpdateNetworkRequest is the body of PUT /v1/sandboxes/{id}/network: it
// replaces the rules of an egress sandbox, effective at once.
type UpdateNetworkRequest struct {
	AllowHosts []string `json:"allow_hosts,omitempty"`
	DenyHosts  []string `json:"deny_hosts,omitempty"`
	AllowCIDRs []string `json:"allow_cidrs,omitempty"`
	DenyCIDRs  []string `json:"deny_cidrs,omitempty"`
	Ports      []int    `json:"ports,omitempty"`
}
