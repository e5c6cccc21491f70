// Package objstoretest runs a real S3-compatible server (SeaweedFS's
// `weed server -s3`) for tests: on loopback, on free ports, with its data
// in a test's temporary directory, stopped by t.Cleanup.
package objstoretest

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// EnvServer names the S3 server binary; scripts/test.sh sets it after
// scripts/install-deps.sh has built it.
const EnvServer = "PADDOCK_TEST_S3_SERVER"

// Server is a running S3-compatible server.
type Server struct {
	// Endpoint is "http://127.0.0.1:<port>"; the server takes path-style
	// requests.
	Endpoint  string
	AccessKey string
	SecretKey string
	Region    string
}

// Binary returns the server binary from EnvServer, or skips t saying why.
func Binary(t testing.TB) string {
	t.Helper()
	bin := os.Getenv(EnvServer)
	if bin == "" {
		t.Skipf("%s is not set: run scripts/install-deps.sh with PADDOCK_TEST_DEPS=1 and scripts/test.sh, which build and name the S3 test server", EnvServer)
	}
	if _, err := os.Stat(bin); err != nil {
		t.Skipf("%s=%s: %v", EnvServer, bin, err)
	}
	return bin
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Start runs a server and waits until its S3 port answers.
func Start(t testing.TB) *Server {
	t.Helper()
	bin := Binary(t)
	dir := t.TempDir()
	s := &Server{AccessKey: "paddocktestkey", SecretKey: "paddock-test-secret-" + strconv.Itoa(os.Getpid()), Region: "us-east-1"}
	cfg := map[string]any{"identities": []any{map[string]any{
		"name":        "paddock",
		"credentials": []any{map[string]string{"accessKey": s.AccessKey, "secretKey": s.SecretKey}},
		"actions":     []string{"Admin", "Read", "List", "Tagging", "Write"},
	}}}
	b, _ := json.Marshal(cfg)
	cfgPath := filepath.Join(dir, "s3.json")
	if err := os.WriteFile(cfgPath, b, 0o600); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	s3Port := freePort(t)
	// Each part puts a gRPC socket named by its port in /tmp, whatever it
	// is told; they are removed when it stops.
	var grpcPorts []int
	grpc := func() string {
		p := freePort(t)
		grpcPorts = append(grpcPorts, p)
		return strconv.Itoa(p)
	}
	s.Endpoint = fmt.Sprintf("http://127.0.0.1:%d", s3Port)
	args := []string{"server",
		"-ip=127.0.0.1", "-ip.bind=127.0.0.1", "-dir=" + data,
		"-master.port=" + strconv.Itoa(freePort(t)), "-master.port.grpc=" + grpc(),
		"-master.telemetry=false", "-master.volumeSizeLimitMB=512", "-volume.max=0",
		"-volume.port=" + strconv.Itoa(freePort(t)), "-volume.port.grpc=" + grpc(),
		"-filer", "-filer.port=" + strconv.Itoa(freePort(t)), "-filer.port.grpc=" + grpc(),
		"-filer.localSocket=" + filepath.Join(dir, "filer.sock"),
		"-s3", "-s3.port=" + strconv.Itoa(s3Port), "-s3.port.grpc=" + grpc(),
		"-s3.port.iceberg=0", "-s3.port.lance=0", "-s3.config=" + cfgPath,
		"-s3.localSocket=" + filepath.Join(dir, "s3.sock"),
	}
	log, err := os.Create(filepath.Join(dir, "server.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		// Its master does not always exit on SIGTERM; the data is a
		// temporary directory, so a short grace is enough.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(3 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
		for _, p := range grpcPorts {
			socks, _ := filepath.Glob(fmt.Sprintf("/tmp/seaweedfs-*-grpc-%d.sock", p))
			for _, s := range socks {
				_ = os.Remove(s)
			}
		}
		log.Close()
		if t.Failed() {
			if b, err := os.ReadFile(log.Name()); err == nil {
				if len(b) > 8000 {
					b = b[len(b)-8000:]
				}
				t.Logf("S3 server log (tail):\n%s", b)
			}
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	for {
		// Any HTTP answer (403 without credentials) means the gateway is up.
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.Endpoint+"/", nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode < 500 {
				return s
			}
		}
		select {
		case <-exited:
			t.Fatalf("S3 server exited while starting; see its log")
		case <-ctx.Done():
			t.Fatalf("S3 server did not answer within 90s")
		case <-time.After(200 * time.Millisecond):
		}
	}
}
