package egress_test

import (
	"io"
	"net/http"
	"testing"
)

// BenchmarkProxy compares a 1 MiB download from the upstream namespace
// made directly (from the host) with the same download made from the
// sandbox's namespace through the egress proxy. Run as root:
//
//	go test -run XXX -bench Proxy ./internal/egress
func BenchmarkProxy(b *testing.B) {
	e := newEnv(b)
	direct := &http.Client{}
	proxied := e.proxyClient(b)
	for _, c := range []struct {
		name   string
		client *http.Client
		url    string
	}{
		{"direct", direct, "http://" + e.up.addr + "/big"},
		{"proxy", proxied, "http://up.test/big"},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(1 << 20)
			for b.Loop() {
				resp, err := c.client.Get(c.url)
				if err != nil {
					b.Fatal(err)
				}
				n, _ := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if n != 1<<20 {
					b.Fatalf("read %d bytes", n)
				}
			}
		})
		b.Run(c.name+"-latency", func(b *testing.B) {
			for b.Loop() {
				resp, err := c.client.Get(c.url + "?small=1")
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
}
