package controller

import (
	"errors"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/config"
	"github.com/paddock-dev/paddock/internal/errdefs"
)

func TestSizeResources(t *testing.T) {
	cfg := config.Default()
	cfg.Max = api.Resources{CPU: 2, MemoryMB: 16 << 10, DiskMB: 100 << 10, Pids: 32768}
	c := &Controller{cfg: cfg}
	tests := []struct {
		name    string
		size    string
		req     api.Resources
		want    api.Resources
		wantErr error
		msg     string
	}{
		{name: "lite", size: "lite", want: api.Resources{CPU: 0.0625, MemoryMB: 256, DiskMB: 2048, Pids: 256}},
		{name: "basic", size: "basic", want: api.Resources{CPU: 0.25, MemoryMB: 1024, DiskMB: 4096, Pids: 512}},
		{name: "standard-1", size: "standard-1", want: api.Resources{CPU: 0.5, MemoryMB: 4096, DiskMB: 8192, Pids: 1024}},
		{name: "standard-2", size: "standard-2", want: api.Resources{CPU: 1, MemoryMB: 6144, DiskMB: 12288, Pids: 2048}},
		{name: "standard-3", size: "standard-3", want: api.Resources{CPU: 2, MemoryMB: 8192, DiskMB: 16384, Pids: 4096}},
		{name: "explicit fields override the preset", size: "basic", req: api.Resources{MemoryMB: 512, Pids: 64},
			want: api.Resources{CPU: 0.25, MemoryMB: 512, DiskMB: 4096, Pids: 64}},
		{name: "standard-4 on a 2-core host", size: "standard-4", wantErr: errdefs.ErrResourceExhausted,
			msg: "size standard-4: 4 vCPUs requested, this host allows 2"},
		{name: "override below the host limit makes it fit", size: "standard-4", req: api.Resources{CPU: 2},
			want: api.Resources{CPU: 2, MemoryMB: 12288, DiskMB: 20480, Pids: 8192}},
		{name: "custom above the host", req: api.Resources{CPU: 3}, wantErr: errdefs.ErrResourceExhausted,
			msg: "3 vCPUs requested, this host allows 2"},
		{name: "custom memory above the host", req: api.Resources{MemoryMB: 20 << 10}, wantErr: errdefs.ErrResourceExhausted,
			msg: "20480 MiB of memory requested, this host allows 16384 MiB"},
		{name: "unknown preset", size: "huge", wantErr: errdefs.ErrInvalidArgument, msg: `size "huge" is not a preset`},
		{name: "no size takes the defaults", want: cfg.Defaults},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := c.sizeResources(tt.size, tt.req)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) || !strings.Contains(err.Error(), tt.msg) {
					t.Fatalf("err = %v, want %v containing %q", err, tt.wantErr, tt.msg)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}
