package egress

import "testing"

func TestSniffKind(t *testing.T) {
	tests := []struct {
		in   string
		want streamKind
	}{
		{"", kindUndecided},
		{"\x16\x03\x01", kindTLS},
		{"G", kindUndecided},
		{"GET", kindUndecided},
		{"GET ", kindUndecided},
		{"GET /x", kindUndecided},
		{"GET /x ", kindUndecided},
		{"GET /x HT", kindUndecided},
		{"GET /x HTTP/", kindHTTP},
		{"GET /x HTTP/1.1\r\nHost: a\r\n\r\n", kindHTTP},
		{"get\t/x\thttp/1.1\r\n", kindHTTP},            // lenient servers take this
		{"\r\n\r\nGET / HTTP/1.1\r\n", kindHTTP},       // leading empty lines
		{"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", kindHTTP}, // h2c prior knowledge names :authority
		{"\r\n", kindUndecided},
		{"GET /\r\n", kindOther}, // HTTP/0.9: no headers
		{"SSH-2.0-OpenSSH_9.6\r\n", kindOther},
		{"SET key value\r\n", kindOther},
		{"PING\r\n", kindOther},
		{"\x00\x00\x00\x08\x04\xd2\x16\x2f", kindOther}, // PostgreSQL SSLRequest
		{" GET / HTTP/1.1", kindOther},
		{"ABCDEFGHIJKLMNOPQRSTUVWXYZABCDEFGHIJ / HTTP/1.1", kindHTTP}, // Go takes any token
	}
	for _, tt := range tests {
		if got := sniffKind([]byte(tt.in)); got != tt.want {
			t.Errorf("sniffKind(%q) = %d, want %d", tt.in, got, tt.want)
		}
	}
}
