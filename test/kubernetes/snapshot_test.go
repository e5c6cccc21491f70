package kubernetes_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// checkSnapshotRestore snapshots the running kube-backed sandbox id (its
// home directory, through its agent), restores the snapshot into a new
// sandbox and checks files, modes and owners there; then that a stop and
// start of the restored sandbox keeps its newer files instead of writing
// the snapshot in again, that a fork goes the same way, and that a
// stopped sandbox's snapshot is refused with what to do.
func checkSnapshotRestore(t *testing.T, d *paddockd, id string) {
	d.must("exec", id, "--", "sh", "-c", `set -e
		mkdir -p /home/user/proj/sub
		printf 'echo from the snapshot\n' > /home/user/proj/run.sh
		chmod 0755 /home/user/proj/run.sh
		echo deep > /home/user/proj/sub/deep.txt
		chmod 0640 /home/user/proj/sub/deep.txt
		chmod 0750 /home/user/proj/sub
		echo original > /home/user/notes.txt
		ln -s proj/run.sh /home/user/run-link`)
	var snap struct{ ID string }
	start := time.Now()
	if err := json.Unmarshal([]byte(d.must("--json", "snapshot", "create", id)), &snap); err != nil || snap.ID == "" {
		t.Fatalf("snapshot create: %+v %v", snap, err)
	}
	took := time.Since(start)

	var rs struct{ ID, State string }
	start = time.Now()
	if err := json.Unmarshal([]byte(d.must("--json", "create", "--from-snapshot", snap.ID)), &rs); err != nil || rs.State != "running" {
		t.Fatalf("create from the snapshot: %+v %v", rs, err)
	}
	t.Logf("figure: kubernetes backend snapshot create %v, create from it to running %v", took.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	const listing = "cd /home/user && stat -c '%n %a %u:%g %F' . proj proj/run.sh proj/sub proj/sub/deep.txt notes.txt run-link kept.txt second.txt"
	want := ". 755 1000:1000 directory\n" +
		"proj 755 1000:1000 directory\n" +
		"proj/run.sh 755 1000:1000 regular file\n" +
		"proj/sub 750 1000:1000 directory\n" +
		"proj/sub/deep.txt 640 1000:1000 regular file\n" +
		"notes.txt 644 1000:1000 regular file\n" +
		"run-link 777 1000:1000 symbolic link\n" +
		"kept.txt 644 1000:1000 regular file\n" +
		"second.txt 644 1000:1000 regular file\n"
	if got := d.must("exec", rs.ID, "--", "sh", "-c", listing); got != want {
		t.Errorf("restored home:\n%s\nwant:\n%s", got, want)
	}
	if got := d.must("exec", rs.ID, "--", "sh", "-c", "/home/user/run-link; cat /home/user/proj/sub/deep.txt /home/user/notes.txt"); got != "from the snapshot\ndeep\noriginal\n" {
		t.Errorf("restored contents: %q", got)
	}

	// The restored sandbox's own changes survive a stop and start: the
	// snapshot is written in on its first start only.
	d.must("exec", rs.ID, "--", "sh", "-c", "echo changed > /home/user/notes.txt; rm /home/user/kept.txt")
	d.must("stop", rs.ID)
	d.must("start", rs.ID)
	if got := d.must("exec", rs.ID, "--", "sh", "-c", "cat /home/user/notes.txt; ls /home/user"); got != "changed\nnotes.txt\nproj\nrun-link\nsecond.txt\n" {
		t.Errorf("restored sandbox after stop and start: %q", got)
	}

	// Fork snapshots and restores the same way.
	fork := strings.TrimSpace(d.must("fork", id))
	if got := d.must("exec", fork, "--", "cat", "/home/user/notes.txt", "/home/user/proj/sub/deep.txt"); got != "original\ndeep\n" {
		t.Errorf("fork's home: %q", got)
	}

	// A stopped sandbox has no agent to copy through: start it first.
	d.must("stop", rs.ID)
	if _, errOut, code := d.run("snapshot", "create", rs.ID); code == 0 || !strings.Contains(errOut, "start it first") {
		t.Errorf("snapshot of a stopped sandbox: exit %d, %q", code, errOut)
	}
	d.must("rm", fork)
	d.must("rm", rs.ID)
	d.must("snapshot", "rm", snap.ID)
}
