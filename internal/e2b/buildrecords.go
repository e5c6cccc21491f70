package e2b

import (
	"context"
	"time"
	"unicode/utf8"

	"github.com/paddock-dev/paddock/internal/store"
)

// Builds are also kept in the daemon's store (Options.Builds) as their
// status call reports them: state, tags, and an error's reason and step;
// not their log lines nor their uploads. A build asked for or finished
// before a daemon restart is then still found after it: one that had
// finished reports how it ended, one the restart cut short (or that never
// started) is an error saying so, where the status call used to answer
// 404 and the SDKs reported a build that was never asked for.

const (
	// buildRecordsKeptFor and maxBuildRecords bound the store's records:
	// a day, and at most this many, the oldest going first.
	buildRecordsKeptFor = 24 * time.Hour
	maxBuildRecords     = 4096
	// maxRecordedReason bounds an error's message as kept.
	maxRecordedReason = 8 << 10
	// restartedReason is the error of a build a restart cut short.
	restartedReason = "the daemon restarted before this build finished: ask for a new build (its files must be uploaded again)"
	// abandonedReason is the error of a build asked for and not started
	// within buildKeptFor, let go with its uploads.
	abandonedReason = "the build was not started within an hour of being asked for, and its uploads were let go: ask for a new build"
)

// endUnfinishedBuilds, at the daemon's start, ends the builds its earlier
// run left waiting or building: nothing of them runs any more.
func (h *Handler) endUnfinishedBuilds() {
	if h.opts.Builds == nil {
		return
	}
	n, err := h.opts.Builds.EndE2BBuilds(h.opts.Context, restartedReason, time.Now())
	if err != nil {
		h.log.Warn("e2b template builds left by the last run", "err", err)
		return
	}
	if n > 0 {
		h.log.Info("e2b template builds cut short by a restart", "builds", n)
	}
}

// record keeps b's state in the store. A failure is logged: the build
// goes on, and only a restart would lose its state.
func (t *buildTable) record(ctx context.Context, b *build) {
	if t.rec == nil {
		return
	}
	b.mu.Lock()
	r := &store.E2BBuild{ID: b.id, Owner: b.owner, Name: b.name, Tags: b.tags, Status: b.status, CreatedAt: b.created, FinishedAt: b.finished}
	if b.reason != nil {
		r.Reason, r.Step = cutUTF8(b.reason.Message, maxRecordedReason), b.reason.Step
	}
	b.mu.Unlock()
	if err := t.rec.PutE2BBuild(ctx, r); err != nil {
		t.log.Warn("e2b template build not recorded", "template", b.name, "build", b.id, "err", err)
	}
}

// pruneRecords lets go of the records past their time or count.
func (t *buildTable) pruneRecords(ctx context.Context) {
	if t.rec == nil {
		return
	}
	if _, err := t.rec.PruneE2BBuilds(ctx, time.Now().Add(-buildRecordsKeptFor), maxBuildRecords); err != nil {
		t.log.Warn("e2b template build records not pruned", "err", err)
	}
}

// restored is owner's build id of name as the store kept it, when it is
// no longer held (nil: none, or another key's).
func (t *buildTable) restored(ctx context.Context, owner, name, id string) *build {
	if t.rec == nil {
		return nil
	}
	r, err := t.rec.GetE2BBuild(ctx, name, id)
	if err != nil || r.Owner != owner {
		return nil
	}
	b := &build{owner: r.Owner, name: r.Name, id: r.ID, tags: r.Tags, created: r.CreatedAt,
		status: r.Status, started: true, finished: r.FinishedAt, restored: true}
	if r.Status == "error" {
		b.reason = &buildReason{Message: r.Reason, Step: r.Step, LogEntries: []logEntry{}}
	}
	return b
}

// cutUTF8 is s cut to at most n bytes, on a rune's boundary.
func cutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
