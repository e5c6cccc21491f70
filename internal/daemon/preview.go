package daemon

import (
	"log/slog"
	"net"

	"github.com/paddock-dev/paddock/internal/config"
)

// listenPreview opens the preview listener and writes the address it got
// back into cfg (port 0 picks a free port), so preview URLs carry the real
// port. A listener that cannot be opened disables previews rather than the
// daemon: expose then says why. It returns nil when previews are off.
func listenPreview(cfg *config.Config, log *slog.Logger) net.Listener {
	if cfg.PreviewListen == config.PreviewOff {
		return nil
	}
	ln, err := net.Listen("tcp", cfg.PreviewListen)
	if err != nil {
		log.Warn("preview listener disabled: cannot listen", "addr", cfg.PreviewListen, "err", err)
		cfg.PreviewListen = config.PreviewOff
		return nil
	}
	cfg.PreviewListen = ln.Addr().String()
	log.Info("serving preview URLs", "addr", cfg.PreviewListen, "domain", cfg.PreviewDomain)
	return ln
}
