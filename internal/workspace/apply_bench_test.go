package workspace

import (
	"context"
	"fmt"
	"testing"

	"github.com/paddock-dev/paddock/internal/workspace/vfs"
)

// benchStore is a store in a temporary directory with one empty
// workspace of large quotas.
func benchStore(b *testing.B) (*Store, Record) {
	s, err := Open(context.Background(), b.TempDir()+"/w.db")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	r, err := s.Create(context.Background(), Record{ID: "wb", Name: "b", Owner: "local", MaxBytes: 1 << 30, MaxFiles: 100000})
	if err != nil {
		b.Fatal(err)
	}
	return s, r
}

// BenchmarkApplyOneChange lands a change of one file of a 2,000-file
// workspace: the cost a sed -i pays in the store.
func BenchmarkApplyOneChange(b *testing.B) {
	ctx := context.Background()
	s, r := benchStore(b)
	apply := func(fn func(tr *vfs.Tree)) {
		base, ix, err := s.Head(ctx, r.ID)
		if err != nil {
			b.Fatal(err)
		}
		tr := vfs.FromIndex(ix, s.Content, vfs.Limits{})
		fn(tr)
		if _, _, err := s.Apply(ctx, Commit{Workspace: r.ID, Base: base, Changes: tr.Changes(), Caller: "local", Executor: "test", Command: "edit"}); err != nil {
			b.Fatal(err)
		}
	}
	apply(func(tr *vfs.Tree) {
		for d := 0; d < 20; d++ {
			tr.Mkdir(fmt.Sprintf("d%d", d), 0o755)
			for f := 0; f < 100; f++ {
				write(b, tr, fmt.Sprintf("d%d/f%d.txt", d, f+d*100), fmt.Sprintf("line %d\nneedle? no\n", f))
			}
		}
	})
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		apply(func(tr *vfs.Tree) { write(b, tr, "d3/f300.txt", fmt.Sprintf("round %d\n", i)) })
	}
}

// BenchmarkRunSedOneFile runs sed -i on one file of a 2,000-file
// workspace through Run, the shell executor's whole path in the daemon.
func BenchmarkRunSedOneFile(b *testing.B) {
	ctx := context.Background()
	s, r := benchStore(b)
	run := func(script string) {
		r, err := s.Get(ctx, r.ID)
		if err != nil {
			b.Fatal(err)
		}
		res, err := s.Run(ctx, RunSpec{Workspace: r, Caller: "local", Executor: "shell", Script: script, Command: script})
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("%s: %v %+v", script, err, res)
		}
	}
	run(`i=0; while [ $i -lt 2000 ]; do d=d$((i / 100)); [ -d $d ] || mkdir $d; echo "file $i" > $d/f$i.txt; i=$((i + 1)); done`)
	b.ResetTimer()
	for b.Loop() {
		run(`sed -i 's/$/./' d3/f300.txt`)
	}
}

// BenchmarkRunEcho runs a small read-only command through Run (its ledger
// entry queued).
func BenchmarkRunEcho(b *testing.B) {
	ctx := context.Background()
	s, r := benchStore(b)
	for b.Loop() {
		r, err := s.Get(ctx, r.ID)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s.Run(ctx, RunSpec{Workspace: r, Caller: "local", Executor: "shell", Script: "echo hi", Command: "echo hi"}); err != nil {
			b.Fatal(err)
		}
	}
}
