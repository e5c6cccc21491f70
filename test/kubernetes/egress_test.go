package kubernetes_test

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/paddock-dev/paddock/test/kubernetes/cluster"
)

// upstreamHost is a test host standing for the internet: a network
// namespace with a veth to the host, serving HTTP on its address, port 80.
type upstreamHost struct {
	addr   netip.Addr   // the host's address inside its namespace
	permit netip.Prefix // the /30 of the veth
	// caFile is the certificate of its HTTPS server (port 443, for the
	// name example.com, httptest's), for PADDOCK_EGRESS_UPSTREAM_CA.
	caFile string
	// auth is the Authorization header of each HTTPS request, in order.
	auth chan string
}

// newUpstreamHost makes it in 198.18.64.0/19 (benchmarking addresses; the
// other tests' test hosts use 198.18.100.0 and up, and 198.19.0.0/16), at a
// /30 derived from the cluster's pod subnet, which no other cluster on this
// host has. Never in a range a host may really use (the documentation
// ranges are some machines' own addresses).
func newUpstreamHost(t *testing.T, c *cluster.Cluster) upstreamHost {
	t.Helper()
	k := int(c.PodSubnet().Addr().As4()[2]) % 32
	ns, hostIf := fmt.Sprintf("pk8s-up%d", k), fmt.Sprintf("pk8sup%d", k)
	hostAddr := netip.AddrFrom4([4]byte{198, 18, byte(64 + k), 1})
	up := upstreamHost{addr: hostAddr.Next(), permit: netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 18, byte(64 + k), 0}), 30)}
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	_ = exec.Command("ip", "netns", "del", ns).Run()
	_ = exec.Command("ip", "link", "del", hostIf).Run()
	run("ip", "netns", "add", ns)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
	run("ip", "link", "add", hostIf, "type", "veth", "peer", "name", "eth0", "netns", ns)
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", hostIf).Run() })
	run("ip", "addr", "add", hostAddr.String()+"/30", "dev", hostIf)
	run("ip", "link", "set", hostIf, "up")
	run("ip", "-n", ns, "addr", "add", up.addr.String()+"/30", "dev", "eth0")
	run("ip", "-n", ns, "link", "set", "eth0", "up")
	// Answers to pods (a daemon in a pod) go back through the host.
	run("ip", "-n", ns, "route", "add", "default", "via", hostAddr.String())
	ln := listenInNetns(t, "/run/netns/"+ns, net.JoinHostPort(up.addr.String(), "80"))
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello from %s", r.Host)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	up.auth = make(chan string, 16)
	tlsSrv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case up.auth <- r.Header.Get("Authorization"):
		default:
		}
		fmt.Fprintf(w, "tls hello from %s, auth %q", r.Host, r.Header.Get("Authorization"))
	}))
	tlsSrv.Listener.Close()
	tlsSrv.Listener = listenInNetns(t, "/run/netns/"+ns, net.JoinHostPort(up.addr.String(), "443"))
	tlsSrv.StartTLS()
	t.Cleanup(tlsSrv.Close)
	up.caFile = filepath.Join(t.TempDir(), "upstream-ca.pem")
	if err := os.WriteFile(up.caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: tlsSrv.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	return up
}

// httpsGetSource is a client for inside a sandbox whose image has none
// with TLS (busybox): a GET through HTTPS_PROXY, trusting SSL_CERT_FILE,
// as most TLS clients do.
const httpsGetSource = `package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
)

func main() {
	resp, err := http.Get(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	fmt.Printf("%d %s", resp.StatusCode, b)
}
`

// buildHTTPSGet builds httpsGetSource, static, and returns its path.
func buildHTTPSGet(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(httpsGetSource), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module httpsget\n\ngo 1.22\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "httpsget")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the HTTPS client: %v: %s", err, out)
	}
	return bin
}

// listenInNetns opens a TCP listener inside the network namespace at
// path; the socket stays there whichever thread serves it.
func listenInNetns(t *testing.T, path, addr string) net.Listener {
	t.Helper()
	type result struct {
		ln  net.Listener
		err error
	}
	ch := make(chan result, 1)
	go func() {
		// The thread goes back to its own namespace and is released: a
		// locked thread that ends would end with it the cluster's
		// processes it started (their parent-death signal is the
		// thread's, not the process's).
		runtime.LockOSThread()
		self, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: err}
			return
		}
		defer self.Close()
		f, err := os.Open(path)
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: err}
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: err}
			return
		}
		ln, err := net.Listen("tcp", addr)
		if err := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); err != nil {
			// Stuck in the namespace: the thread must not serve anything
			// else, so it stays locked and ends with this goroutine.
			ch <- result{ln, err}
			select {}
		}
		runtime.UnlockOSThread()
		ch <- result{ln, err}
	}()
	r := <-ch
	if r.err != nil {
		t.Fatal(r.err)
	}
	t.Cleanup(func() { r.ln.Close() })
	return r.ln
}

// TestEgressOnKubernetes: a sandbox with network egress on the cluster
// reaches the hosts its rules allow through the daemon's egress proxy,
// and is refused (and the ledger says so) the others; a rule change
// applies at once, to the proxy and to the sandbox's NetworkPolicy; the
// proxy's credential is the sandbox's own, kept in a Secret rather than
// the Sandbox; a sandbox without egress and a wrong credential get
// nothing from the proxy; rm leaves nothing.
func TestEgressOnKubernetes(t *testing.T) {
	c := clusterFor(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	up := newUpstreamHost(t, c)
	// A fixed port, as a deployment has: the pods' settings name it, and
	// the restarted daemon below must serve it again.
	pl, err := net.Listen("tcp4", netip.AddrPortFrom(c.NodeIP(), 0).String())
	if err != nil {
		t.Fatal(err)
	}
	proxyAt := pl.Addr().String()
	pl.Close()
	d := startPaddockEnv(t, c, []string{
		"PADDOCK_EGRESS_PERMIT=" + up.permit.String(),
		"PADDOCK_EGRESS_DNS_STATIC=up.test=" + up.addr.String() + "; other.test=" + up.addr.String() + "; example.com=" + up.addr.String(),
		"PADDOCK_EGRESS_UPSTREAM_CA=" + up.caFile,
	}, "--kube-egress-proxy", proxyAt)
	importImage(ctx, t, d, "busybox")

	var info struct{ Firewall string }
	if err := json.Unmarshal([]byte(d.must("--json", "info")), &info); err != nil {
		t.Fatal(err)
	}
	proxy, ok := strings.CutPrefix(info.Firewall, "networkpolicy, proxy ")
	if !ok || proxy != proxyAt {
		t.Fatalf("info firewall: %q", info.Firewall)
	}

	var sb struct{ ID, State string }
	out, errOut, code := d.run("--json", "create", "--image", "busybox", "--allow-host", "up.test")
	if code != 0 {
		dumpEvents(ctx, t, c)
		t.Fatalf("create: exit %d: %s", code, errOut)
	}
	if err := json.Unmarshal([]byte(out), &sb); err != nil {
		t.Fatal(err)
	}
	wget := func(id, url string, env ...string) (string, string, int) {
		// Not wget -T: Debian's busybox 1.35 wget crashes with it.
		return d.run(append(append([]string{"exec", id, "--", "env"}, env...), "timeout", "20", "wget", "-q", "-O", "-", url)...)
	}
	if out, errOut, code := wget(sb.ID, "http://up.test/x"); code != 0 || out != "hello from up.test" {
		t.Fatalf("an allowed host through the proxy: exit %d, %q %q", code, out, errOut)
	}
	if out, _, code := wget(sb.ID, "http://other.test/"); code == 0 {
		t.Fatalf("a host no rule allows: %q", out)
	}
	ledger := d.must("--json", "ledger", sb.ID)
	if !strings.Contains(ledger, `"egress_refused"`) || !strings.Contains(ledger, "other.test") {
		t.Errorf("the refusal is not in the ledger: %s", ledger)
	}

	// The sandbox's variables name the proxy, through the agent's relay
	// on the pod's loopback, with its own credential; the Sandbox object
	// does not hold it.
	const relay = "127.0.0.1:49985"
	env := d.must("exec", sb.ID, "--", "sh", "-c", "echo $HTTP_PROXY")
	if !strings.HasPrefix(env, "http://"+sb.ID+":") || !strings.HasSuffix(strings.TrimSpace(env), "@"+relay) {
		t.Fatalf("HTTP_PROXY: %q", env)
	}
	token := strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(env), "http://"+sb.ID+":"), "@"+relay)
	sbJSON, err := c.Client.RESTClient().Get().AbsPath("/apis/agents.x-k8s.io/v1beta1/namespaces/default/sandboxes/paddock-" + sb.ID).DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(sbJSON), token) {
		t.Errorf("the Sandbox object holds the proxy credential")
	}
	if _, err := c.Client.CoreV1().Secrets("default").Get(ctx, "paddock-"+sb.ID+"-egress", metav1.GetOptions{}); err != nil {
		t.Errorf("the egress Secret: %v", err)
	}

	// The NetworkPolicy lets the pod reach the proxy alone.
	np, err := c.Client.NetworkingV1().NetworkPolicies("default").Get(ctx, "paddock-"+sb.ID, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(proxy)
	if len(np.Spec.Egress) != 1 || len(np.Spec.Egress[0].To) != 1 || np.Spec.Egress[0].To[0].IPBlock == nil ||
		np.Spec.Egress[0].To[0].IPBlock.CIDR != c.NodeIP().String()+"/32" ||
		len(np.Spec.Egress[0].Ports) != 1 || np.Spec.Egress[0].Ports[0].Port.String() != port {
		t.Errorf("NetworkPolicy egress: %+v", np.Spec.Egress)
	}

	// A rule change applies to the next request, and an address rule
	// reaches the NetworkPolicy.
	d.must("net", "allow", sb.ID, "other.test")
	if out, errOut, code := wget(sb.ID, "http://other.test/"); code != 0 || out != "hello from other.test" {
		t.Fatalf("a host allowed after the create: exit %d, %q %q", code, out, errOut)
	}
	d.must("net", "allow", sb.ID, up.addr.String())
	np, err = c.Client.NetworkingV1().NetworkPolicies("default").Get(ctx, "paddock-"+sb.ID, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(np.Spec.Egress) != 2 || np.Spec.Egress[1].To[0].IPBlock == nil || np.Spec.Egress[1].To[0].IPBlock.CIDR != up.addr.String()+"/32" {
		t.Errorf("NetworkPolicy egress after an address rule: %+v", np.Spec.Egress)
	}
	d.must("net", "deny", sb.ID, "up.test")
	if out, _, code := wget(sb.ID, "http://up.test/"); code == 0 {
		t.Fatalf("a host denied after the create: %q", out)
	}

	// A wrong credential, or none, opens nothing (from this pod, whose
	// network reaches the proxy).
	for _, p := range []string{"http://" + sb.ID + ":" + strings.Repeat("0", 64) + "@" + proxy, "http://" + proxy,
		"http://" + sb.ID + ":" + strings.Repeat("0", 64) + "@" + relay, "http://" + relay} {
		if out, _, code := wget(sb.ID, "http://other.test/", "http_proxy="+p); code == 0 {
			t.Errorf("through the proxy with %q: %q", strings.Replace(p, token, "TOKEN", 1), out)
		}
	}

	// What the proxy costs: 20 GETs in a loop inside the pod through the
	// proxy, against the same 20 straight to the test host's address (an
	// address rule allows it; this cluster's plugin would let it through
	// anyway).
	loop := func(target string, env ...string) time.Duration {
		t.Helper()
		script := "i=0; while [ $i -lt 20 ]; do wget -q -O /dev/null " + target + " || exit 1; i=$((i+1)); done"
		start := time.Now()
		if out, errOut, code := d.run(append(append([]string{"exec", sb.ID, "--", "env"}, env...), "sh", "-c", script)...); code != 0 {
			t.Fatalf("20 GETs of %s: exit %d, %q %q", target, code, out, errOut)
		}
		return time.Since(start)
	}
	viaProxy := loop("http://other.test/")
	direct := loop("http://"+up.addr.String()+"/", "-u", "http_proxy", "-u", "HTTP_PROXY")
	t.Logf("figure: kubernetes egress, 20 GETs from a pod through the daemon's proxy %v, straight to the host %v (%.2fx; each run includes one exec)",
		viaProxy.Round(time.Millisecond), direct.Round(time.Millisecond), float64(viaProxy)/float64(direct))

	// A stop and start keeps the rules and the credential.
	d.must("stop", sb.ID)
	d.must("start", sb.ID)
	if out, errOut, code := wget(sb.ID, "http://other.test/"); code != 0 || out != "hello from other.test" {
		t.Fatalf("after a stop and start: exit %d, %q %q", code, out, errOut)
	}

	// A daemon restart serves the sandbox again on the same proxy.
	d.stop()
	d.start()
	if out, errOut, code := wget(sb.ID, "http://other.test/"); code != 0 || out != "hello from other.test" {
		t.Fatalf("after a daemon restart: exit %d, %q %q", code, out, errOut)
	}

	// A daemon that comes back with its proxy at another address (as
	// one in a pod does): the running pod's relay, its Secret and its
	// NetworkPolicy follow, and its variables stay as they are. A
	// process started before the move reaches the proxy after it.
	d.must("exec", sb.ID, "--", "sh", "-c", "(while [ ! -e /tmp/go ]; do sleep 0.2; done; wget -q -O /tmp/late http://other.test/late) >/dev/null 2>&1 &")
	d.stop()
	pl2, err := net.Listen("tcp4", netip.AddrPortFrom(c.NodeIP(), 0).String())
	if err != nil {
		t.Fatal(err)
	}
	movedTo := pl2.Addr().String()
	pl2.Close()
	d.args = []string{"--kube-egress-proxy", movedTo}
	d.start()
	if out, errOut, code := wget(sb.ID, "http://other.test/"); code != 0 || out != "hello from other.test" {
		t.Fatalf("after the proxy moved to %s: exit %d, %q %q", movedTo, code, out, errOut)
	}
	sec, err := c.Client.CoreV1().Secrets("default").Get(ctx, "paddock-"+sb.ID+"-egress", metav1.GetOptions{})
	if err != nil || string(sec.Data["proxy-address"]) != movedTo {
		t.Errorf("the egress Secret after the proxy moved: %v, %q want %s", err, sec.Data["proxy-address"], movedTo)
	}
	np, err = c.Client.NetworkingV1().NetworkPolicies("default").Get(ctx, "paddock-"+sb.ID, metav1.GetOptions{})
	_, movedPort, _ := net.SplitHostPort(movedTo)
	if err != nil || np.Spec.Egress[0].Ports[0].Port.String() != movedPort {
		t.Errorf("the NetworkPolicy after the proxy moved: %v, %+v", err, np.Spec.Egress)
	}
	if env2 := d.must("exec", sb.ID, "--", "sh", "-c", "echo $HTTP_PROXY"); env2 != env {
		t.Errorf("HTTP_PROXY changed with the proxy's address: %q, was %q", env2, env)
	}
	d.must("exec", sb.ID, "--", "touch", "/tmp/go")
	late := ""
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(time.Second) {
		if out, _, code := d.run("exec", sb.ID, "--", "cat", "/tmp/late"); code == 0 {
			late = out
			break
		}
	}
	if late != "hello from other.test" {
		t.Errorf("a process started before the move, after it: %q", late)
	}

	d.must("rm", sb.ID)
	checkGone(ctx, t, c, sb.ID)

	// Credential injection: the sandbox calls an HTTPS API with a secret
	// it never sees; the proxy terminates its TLS with the egress CA,
	// which the pod trusts through the mounted bundle, and adds the
	// header.
	secretFile := filepath.Join(d.dir, "api-token")
	const secret = "k8s-injected-secret-0123456789"
	if err := os.WriteFile(secretFile, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d.must("secret", "set", "api-token", "--from-file", secretFile)
	var inj struct{ ID string }
	if err := json.Unmarshal([]byte(d.must("--json", "create", "--image", "busybox", "--allow-host", "example.com")), &inj); err != nil {
		t.Fatal(err)
	}
	d.must("net", "inject", inj.ID, "--host", "example.com", "--header", "Authorization: Bearer {{secret:api-token}}")
	d.must("cp", buildHTTPSGet(t), inj.ID+":/tmp/httpsget")
	d.must("exec", inj.ID, "--", "chmod", "755", "/tmp/httpsget")
	out, errOut, code = d.run("exec", inj.ID, "--", "/tmp/httpsget", "https://example.com/api")
	if code != 0 || !strings.HasPrefix(out, "200 tls hello from example.com") {
		t.Fatalf("an HTTPS call with injection: exit %d, %q %q", code, out, errOut)
	}
	if strings.Contains(out, secret) {
		t.Errorf("the secret came back to the sandbox: %q", out)
	}
	select {
	case got := <-up.auth:
		if got != "Bearer "+secret {
			t.Errorf("the upstream got Authorization %q", got)
		}
	case <-time.After(5 * time.Second):
		t.Errorf("the upstream saw no request")
	}
	if env := d.must("exec", inj.ID, "--", "env"); strings.Contains(env, secret) {
		t.Errorf("the secret is in the sandbox's environment")
	}
	d.must("rm", inj.ID)
	checkGone(ctx, t, c, inj.ID)
}

// dumpEvents logs the namespace's events and pods' statuses: why a pod
// did not start.
func dumpEvents(ctx context.Context, t *testing.T, c *cluster.Cluster) {
	t.Helper()
	evs, err := c.Client.CoreV1().Events("default").List(ctx, metav1.ListOptions{})
	if err == nil {
		for _, e := range evs.Items {
			t.Logf("event %s %s/%s: %s: %s", e.LastTimestamp.Format(time.TimeOnly), e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
		}
	}
	pods, err := c.Client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	if err == nil {
		for _, p := range pods.Items {
			b, _ := json.Marshal(p.Status)
			t.Logf("pod %s on %q: %s", p.Name, p.Spec.NodeName, b)
		}
	}
}
