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
// scripts/install-deps.sh has built it. A test-only hook, not a daemon
// setting, so not part of config.Config.
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

// freePorts returns n distinct free ports: every listener stays open until
// all are chosen, so no two parts of the server are given the same port.
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports
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
	// Another process can take a chosen port before the server binds it;
	// the server then exits at once, and a new set of ports is tried.
	for attempt := 1; ; attempt++ {
		if launch(t, bin, s, dir, cfgPath) {
			return s
		}
		if attempt == 3 {
			t.Fatalf("S3 server exited while starting, %d times; see its log", attempt)
		}
	}
}

// launch starts the server on fresh ports and waits until its S3 port
// answers; false when it exited while starting.
func launch(t testing.TB, bin string, s *Server, parent, cfgPath string) bool {
	t.Helper()
	// Each attempt gets its own data and sockets: a failed one may leave
	// both behind.
	dir, err := os.MkdirTemp(parent, "run-")
	if err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	ports := freePorts(t, 8)
	s3Port := ports[0]
	next := 1
	port := func() string { p := ports[next]; next++; return strconv.Itoa(p) }
	// Each part puts a gRPC socket named by its port in /tmp, whatever it
	// is told; they are removed when it stops.
	var grpcPorts []int
	grpc := func() string {
		p := ports[next]
		next++
		grpcPorts = append(grpcPorts, p)
		return strconv.Itoa(p)
	}
	s.Endpoint = fmt.Sprintf("http://127.0.0.1:%d", s3Port)
	args := []string{"server",
		"-ip=127.0.0.1", "-ip.bind=127.0.0.1", "-dir=" + data,
		"-master.port=" + port(), "-master.port.grpc=" + grpc(),
		"-master.telemetry=false", "-master.volumeSizeLimitMB=512", "-volume.max=0",
		"-volume.port=" + port(), "-volume.port.grpc=" + grpc(),
		"-filer", "-filer.port=" + port(), "-filer.port.grpc=" + grpc(),
		"-filer.localSocket=" + filepath.Join(dir, "filer.sock"),
		"-s3", "-s3.port=" + strconv.Itoa(s3Port), "-s3.port.grpc=" + grpc(),
		"-s3.port.iceberg=0", "-s3.port.lance=0", "-s3.config=" + cfgPath,
		"-s3.localSocket=" + filepath.Join(dir, "s3.sock"),
	}
	log, err := os.CreateTemp(dir, "server-*.log")
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
				return true
			}
		}
		select {
		case <-exited:
			t.Logf("S3 server exited while starting (ports %v)", ports)
			return false
		case <-ctx.Done():
			t.Fatalf("S3 server did not answer within 90s")
		case <-time.After(200 * time.Millisecond):
		}
	}
}
