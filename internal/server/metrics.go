package server

import (
	"fmt"
	"github.com/paddock-dev/paddock/api"
	"io"
	"net/http"
	"sort"
	"strings"
)

// metrics serves GET /v1/metrics in the Prometheus text exposition format
// (version 0.0.4): sandboxes by state and runtime, and each warm pool's
// ready, starting, served and cold figures, for whatever scrapes the
// daemon. Label values are escaped as the format requires.
func (s *Server) metrics(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	sandboxes, err := s.opts.Controller.List(ctx, nil)
	if err != nil {
		writeError(w, err)
		return
	}
	var pools []api.Pool
	if s.opts.Pools != nil {
		if pools, err = s.opts.Pools.List(ctx); err != nil {
			writeError(w, err)
			return
		}
	}
	counts := map[[2]string]int{}
	for _, sb := range sandboxes {
		counts[[2]string{sb.State, sb.Runtime}]++
	}
	keys := make([][2]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i][0] != keys[j][0] {
			return keys[i][0] < keys[j][0]
		}
		return keys[i][1] < keys[j][1]
	})
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	var b strings.Builder
	help(&b, "paddock_sandboxes", "gauge", "Sandboxes that are not destroyed, by state and runtime.")
	for _, k := range keys {
		fmt.Fprintf(&b, "paddock_sandboxes{state=%q,runtime=%q} %d\n", escapeLabel(k[0]), escapeLabel(k[1]), counts[k])
	}
	help(&b, "paddock_pool_min_ready", "gauge", "A warm pool's least number of ready sandboxes.")
	for _, p := range pools {
		fmt.Fprintf(&b, "paddock_pool_min_ready{pool=%q} %d\n", escapeLabel(p.Name), p.MinReady)
	}
	help(&b, "paddock_pool_target", "gauge", "Ready sandboxes a warm pool aims for now (min_ready, or more after a burst).")
	for _, p := range pools {
		fmt.Fprintf(&b, "paddock_pool_target{pool=%q} %d\n", escapeLabel(p.Name), p.Target)
	}
	help(&b, "paddock_pool_ready", "gauge", "Sandboxes ready to be claimed from a warm pool.")
	for _, p := range pools {
		fmt.Fprintf(&b, "paddock_pool_ready{pool=%q} %d\n", escapeLabel(p.Name), p.Ready)
	}
	help(&b, "paddock_pool_starting", "gauge", "Sandboxes a warm pool is starting.")
	for _, p := range pools {
		fmt.Fprintf(&b, "paddock_pool_starting{pool=%q} %d\n", escapeLabel(p.Name), p.Starting)
	}
	help(&b, "paddock_pool_served_total", "counter", "Creates served from a warm pool since the daemon started.")
	for _, p := range pools {
		fmt.Fprintf(&b, "paddock_pool_served_total{pool=%q} %d\n", escapeLabel(p.Name), p.Served)
	}
	help(&b, "paddock_pool_cold_total", "counter", "Creates that matched a warm pool but found it empty, since the daemon started.")
	for _, p := range pools {
		fmt.Fprintf(&b, "paddock_pool_cold_total{pool=%q} %d\n", escapeLabel(p.Name), p.Cold)
	}
	help(&b, "paddock_pool_refill_failing", "gauge", "1 when a warm pool's last refill failed.")
	for _, p := range pools {
		failing := 0
		if p.Error != "" {
			failing = 1
		}
		fmt.Fprintf(&b, "paddock_pool_refill_failing{pool=%q} %d\n", escapeLabel(p.Name), failing)
	}
	_, _ = io.WriteString(w, b.String())
}

func help(b *strings.Builder, name, typ, text string) {
	fmt.Fprintf(b, "# HELP %s %s\n# TYPE %s %s\n", name, text, name, typ)
}

// escapeLabel leaves a value that %q then quotes the way the exposition
// format wants: it only knows \\, \" and \n, so anything else unprintable
// is dropped rather than written as a Go escape.
func escapeLabel(v string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 && r != '\n' || r == 0x7f {
			return -1
		}
		return r
	}, v)
}
