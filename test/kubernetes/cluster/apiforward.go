package cluster

import (
	"io"
	"net"
	"net/netip"
	"net/url"
	"sync"
)

// ForwardAPIServer makes the API server reachable from pods: it listens on
// the node's address (the pod bridge's gateway, which the API server's
// certificate names) and relays each connection to the API server, which
// listens on the host's loopback alone. There is no kube-proxy here, so the
// kubernetes Service's address leads nowhere; a pod that talks to the API
// server (a daemon deployed by deploy/kubernetes) is given this address as
// KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT. stop closes the
// listener and every relayed connection.
func (c *Cluster) ForwardAPIServer() (addr netip.AddrPort, stop func(), err error) {
	u, err := url.Parse(c.Config.Host)
	if err != nil {
		return netip.AddrPort{}, nil, err
	}
	ln, err := net.Listen("tcp4", netip.AddrPortFrom(c.NodeIP(), 0).String())
	if err != nil {
		return netip.AddrPort{}, nil, err
	}
	var (
		mu    sync.Mutex
		conns = map[net.Conn]bool{}
		wg    sync.WaitGroup
	)
	track := func(cs ...net.Conn) bool {
		mu.Lock()
		defer mu.Unlock()
		if conns == nil {
			return false
		}
		for _, c := range cs {
			conns[c] = true
		}
		return true
	}
	wg.Go(func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", u.Host)
			if err != nil {
				in.Close()
				continue
			}
			if !track(in, out) {
				in.Close()
				out.Close()
				return
			}
			wg.Go(func() {
				_, _ = io.Copy(out, in)
				out.Close()
			})
			wg.Go(func() {
				_, _ = io.Copy(in, out)
				in.Close()
			})
		}
	})
	stop = func() {
		ln.Close()
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		conns = nil
		mu.Unlock()
		wg.Wait()
	}
	return netip.MustParseAddrPort(ln.Addr().String()), stop, nil
}
