package kubernetes_test

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestPoolOnKubernetes: a pool of a template with a start command and a
// readiness check, kept by the cluster (a SandboxWarmPool; the plain
// template's case is warmpool_test.go). The pool's agents run the start
// command at boot and a pod counts as ready only once its check passed
// (its readiness probe asks the agent); a create from the pool gets one
// with the command running, faster than a cold create from the same
// template, which starts it and waits; the pool refills; removing it
// removes its unclaimed pods and leaves the claimed sandbox running.
func TestPoolOnKubernetes(t *testing.T) {
	c, d, dc, ctx := poolTest(t)

	d.buildTemplate("kpool", `name = "kpool"
image = "busybox"
cwd = "/tmp"
start = ["sh", "-c", "echo starting in $(pwd) as $(id -un); sleep 2; echo serving; exec sleep 3600"]

[ready]
log = "^serving$"
timeout = "60s"
`)
	d.must("pool", "set", "kpool", "--min-ready", "2")
	poolReady(t, d, "kpool", 2)

	// The cluster keeps the pool; its pods carry the start command and
	// the probe, and an unclaimed pod's agent answers the probe (only
	// that) without a token.
	obj := clusterPool(ctx, t, dc, "kpool").GetName()
	unclaimed := poolPods(ctx, t, c, obj, false)
	if len(unclaimed) == 0 {
		t.Fatal("no unclaimed pod of the pool runs")
	}
	ctr := unclaimed[0].Spec.Containers[0]
	if ctr.ReadinessProbe == nil || ctr.ReadinessProbe.HTTPGet == nil || ctr.ReadinessProbe.HTTPGet.Path != "/paddock/v1/started" {
		t.Errorf("a pool pod's readiness probe: %+v", ctr.ReadinessProbe)
	}
	if code := agentGet(t, unclaimed[0].Status.PodIP, "/paddock/v1/started"); code != http.StatusOK {
		t.Errorf("an unclaimed ready pod's probe answered %d, want 200", code)
	}
	if code := agentGet(t, unclaimed[0].Status.PodIP, "/health"); code != http.StatusUnauthorized {
		t.Errorf("an unclaimed pod's health without a token answered %d, want 401", code)
	}

	createToExec := func(args ...string) (string, time.Duration) {
		t.Helper()
		start := time.Now()
		var sb struct {
			ID     string
			Labels map[string]string
		}
		if err := json.Unmarshal([]byte(d.must(append([]string{"--json", "create"}, args...)...)), &sb); err != nil {
			t.Fatal(err)
		}
		if out := d.must("exec", sb.ID, "--", "echo", "hi"); out != "hi\n" {
			t.Fatalf("exec: %q", out)
		}
		took := time.Since(start)
		if (args[0] == "--pool") != (sb.Labels["paddock.dev/cluster-pool"] == "kpool") {
			t.Fatalf("sandbox from %v has labels %v", args, sb.Labels)
		}
		return sb.ID, took
	}
	warmID, warm := createToExec("--pool", "kpool")
	coldID, cold := createToExec("--template", "kpool", "--env", "COLD=1")
	t.Logf("figure: kubernetes backend, start-command pool claim to first exec %v, cold create from the template (start command and its 2 s check) %v", warm.Round(time.Millisecond), cold.Round(time.Millisecond))
	if warm >= cold {
		t.Errorf("a claim from the pool (%v) was not faster than a cold create (%v)", warm, cold)
	}
	// Both run the start command as the process "start", as the template
	// says (cwd, default user), ready.
	for _, id := range []string{warmID, coldID} {
		logs := d.must("proc", "logs", id, "start")
		if !strings.Contains(logs, "starting in /tmp as user\n") || !strings.Contains(logs, "serving\n") {
			t.Errorf("sandbox %s's start process output: %q", id, logs)
		}
		var p struct{ Status string }
		if err := json.Unmarshal([]byte(d.must("--json", "proc", "inspect", id, "start")), &p); err != nil || p.Status != "running" {
			t.Errorf("sandbox %s's start process: %+v, %v", id, p, err)
		}
	}
	poolReady(t, d, "kpool", 2) // refilled

	// A later start of the claimed sandbox runs no start command (as a
	// cold one's, and as on one host): the claim took it out of the
	// Sandbox's pod template.
	d.must("stop", warmID)
	d.must("start", warmID)
	var procs struct{ Processes []struct{ ID string } }
	if err := json.Unmarshal([]byte(d.must("--json", "proc", "ls", warmID)), &procs); err != nil {
		t.Fatal(err)
	}
	for _, p := range procs.Processes {
		if p.ID == "start" {
			t.Errorf("the claimed sandbox ran its start command again at a later start: %+v", procs.Processes)
		}
	}

	d.must("pool", "rm", "kpool")
	deadline := time.Now().Add(2 * time.Minute)
	for len(poolPods(ctx, t, c, obj, false)) > 0 {
		if time.Now().After(deadline) {
			t.Fatal("unclaimed pods of the removed pool are left")
		}
		time.Sleep(200 * time.Millisecond)
	}
	if got := d.must("exec", warmID, "--", "echo", "kept"); got != "kept\n" {
		t.Fatalf("the claimed sandbox after the pool was removed: %q", got)
	}
	for _, id := range []string{warmID, coldID} {
		d.must("rm", id)
		checkGone(ctx, t, c, id)
	}

	// A start command that fails: the pool's pods run, never ready, and
	// the pool says why.
	d.buildTemplate("kbad", "name = \"kbad\"\nimage = \"busybox\"\nstart = [\"sh\", \"-c\", \"echo oops; exit 3\"]\n\n[ready]\nlog = \"never\"\ntimeout = \"3s\"\n")
	d.must("pool", "set", "kbad", "--min-ready", "1")
	start := time.Now()
	deadline = start.Add(2 * time.Minute)
	for {
		var list struct {
			Pools []struct {
				Name, Error string
				Ready       int
			}
		}
		if err := json.Unmarshal([]byte(d.must("--json", "pool", "ls")), &list); err != nil {
			t.Fatal(err)
		}
		msg := ""
		for _, p := range list.Pools {
			if p.Name == "kbad" {
				if p.Ready != 0 {
					t.Fatalf("a pool whose start command fails has %d ready", p.Ready)
				}
				msg = p.Error
			}
		}
		if strings.Contains(msg, "without becoming ready: the template's start command failed") {
			t.Logf("figure: a failing start command reported by the pool after %v: %s", time.Since(start).Round(time.Second), msg)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the pool of a failing start command does not say so: %q", msg)
		}
		time.Sleep(time.Second)
	}
	d.must("pool", "rm", "kbad")
}

// agentGet asks the agent at ip for path without a token.
func agentGet(t *testing.T, ip, path string) int {
	t.Helper()
	hc := &http.Client{Timeout: 10 * time.Second}
	resp, err := hc.Get(fmt.Sprintf("http://%s%s", net.JoinHostPort(ip, "49983"), path))
	if err != nil {
		t.Fatalf("the agent at %s: %v", ip, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
