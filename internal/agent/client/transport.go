package client

import "net/http"

// Transport is the client's h2c round tripper to the agent's socket, for
// relaying envd requests unchanged (the E2B data plane). Requests may name
// any authority; every connection goes to this agent. It shares the
// client's connections and their symlink-refusing dial.
func (c *Client) Transport() http.RoundTripper {
	c.init()
	return c.rt
}
