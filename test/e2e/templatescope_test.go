package e2e

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/sdk/go/paddock"
)

// TestScopesTemplateRebuild: templates are shared, so a key of scope own
// builds new ones and rebuilds its own, but not one another key or the
// unix socket built: the others' sandboxes are made from it. The refusal
// leaves the template as it was. A key of scope all rebuilds any.
func TestScopesTemplateRebuild(t *testing.T) {
	d := startDaemon(t, daemonOpts{listen: true})
	ctx := ctxT(t, 5*time.Minute)
	a := newTenant(t, d, "tenant-a", api.KeyScopeOwn)
	b := newTenant(t, d, "tenant-b", api.KeyScopeOwn)
	all := newTenant(t, d, "ops", api.KeyScopeAll)
	spec := func(name, marker string) api.TemplateSpec {
		return api.TemplateSpec{Name: name, Image: "busybox", Runtime: api.RuntimeRunc,
			Steps: []api.TemplateStep{{Kind: api.StepRun, Run: "echo " + marker + " > /marker"}}}
	}
	marker := func(c *paddock.Client, template string) string {
		t.Helper()
		sb, err := c.Create(ctx, api.CreateSandboxRequest{Template: template})
		if err != nil {
			t.Fatalf("create from %s: %v", template, err)
		}
		defer func() { _ = c.Delete(ctx, sb.ID) }()
		var out strings.Builder
		if res, err := c.Exec(ctx, sb.ID, paddock.ExecOptions{Cmd: []string{"cat", "/marker"}, Stdout: &out}); err != nil || res.ExitCode != 0 {
			t.Fatalf("read the marker of %s: %+v %v", template, res, err)
		}
		return strings.TrimSpace(out.String())
	}
	refused := func(who string, err error) {
		t.Helper()
		if !errors.Is(err, paddock.ErrPermissionDenied) || !strings.Contains(err.Error(), "scope all") {
			t.Errorf("%s: %v; want permission denied naming scope all", who, err)
		}
	}

	if _, err := a.sdk.BuildTemplate(ctx, spec("ta", "a1"), "", nil); err != nil {
		t.Fatalf("own key builds a template: %v", err)
	}
	if _, err := a.sdk.BuildTemplate(ctx, spec("ta", "a2"), "", nil); err != nil {
		t.Errorf("own key rebuilds its own template: %v", err)
	}
	_, err := b.sdk.BuildTemplate(ctx, spec("ta", "b"), "", nil)
	refused("another own key rebuilds it", err)
	if got := marker(b.sdk, "ta"); got != "a2" {
		t.Errorf("after the refused rebuild, sandboxes of ta hold %q, want a2", got)
	}

	if _, err := d.client.BuildTemplate(ctx, spec("tl", "local"), "", nil); err != nil {
		t.Fatalf("the socket builds a template: %v", err)
	}
	_, err = a.sdk.BuildTemplate(ctx, spec("tl", "a"), "", nil)
	refused("own key rebuilds the socket's template", err)

	if _, err := all.sdk.BuildTemplate(ctx, spec("ta", "ops"), "", nil); err != nil {
		t.Errorf("all key rebuilds an own key's template: %v", err)
	}
	if got := marker(a.sdk, "ta"); got != "ops" {
		t.Errorf("after the all key's rebuild, sandboxes of ta hold %q, want ops", got)
	}
	_, err = a.sdk.BuildTemplate(ctx, spec("ta", "a3"), "", nil)
	refused("own key rebuilds its template after the all key did", err)

	// The build cache is the builder's: the same steps built by another
	// key run again (a key can reach its build sandbox while a step runs,
	// so its cached result is its own); built again by the same key they
	// come from the cache.
	cached := func(c *paddock.Client, name string) int {
		t.Helper()
		n := 0
		if _, err := c.BuildTemplate(ctx, spec(name, "same"), "", func(ev api.TemplateBuildEvent) {
			if ev.Type == api.BuildStep && ev.Cached {
				n++
			}
		}); err != nil {
			t.Fatalf("build %s: %v", name, err)
		}
		return n
	}
	if n := cached(a.sdk, "tc"); n != 0 {
		t.Errorf("a's first build of new steps had %d cached steps", n)
	}
	if n := cached(b.sdk, "td"); n != 0 {
		t.Errorf("b's build of the steps a built started from a's cache (%d steps)", n)
	}
	if n := cached(a.sdk, "te"); n != 1 {
		t.Errorf("a's second build of its steps had %d cached steps, want 1", n)
	}
}

// TestTemplateTags: a build under name:tag, more tags given through the
// SDK and the CLI, sandboxes created from each tag hold that tag's build,
// a rebuild of one tag leaves the others' build alone, a tag is removed
// with `template rm name:tag`, and a key of scope own changes no tag
// under a name another key built.
func TestTemplateTags(t *testing.T) {
	d := startDaemon(t, daemonOpts{listen: true})
	ctx := ctxT(t, 5*time.Minute)
	a := newTenant(t, d, "tenant-a", api.KeyScopeOwn)
	b := newTenant(t, d, "tenant-b", api.KeyScopeOwn)
	spec := func(name, marker string) api.TemplateSpec {
		return api.TemplateSpec{Name: name, Image: "busybox", Runtime: api.RuntimeRunc,
			Steps: []api.TemplateStep{{Kind: api.StepRun, Run: "echo " + marker + " > /marker"}}}
	}
	marker := func(template string) string {
		t.Helper()
		sb, err := a.sdk.Create(ctx, api.CreateSandboxRequest{Template: template})
		if err != nil {
			t.Fatalf("create from %s: %v", template, err)
		}
		defer func() { _ = a.sdk.Delete(ctx, sb.ID) }()
		var out strings.Builder
		if res, err := a.sdk.Exec(ctx, sb.ID, paddock.ExecOptions{Cmd: []string{"cat", "/marker"}, Stdout: &out}); err != nil || res.ExitCode != 0 {
			t.Fatalf("read the marker of %s: %+v %v", template, res, err)
		}
		return strings.TrimSpace(out.String())
	}
	tagsOf := func(c *paddock.Client, name string) string {
		t.Helper()
		tags, err := c.TemplateTags(ctx, name)
		if err != nil {
			t.Fatalf("tags of %s: %v", name, err)
		}
		var out []string
		for _, tg := range tags {
			out = append(out, tg.Tag)
		}
		return strings.Join(out, ",")
	}

	v1, err := a.sdk.BuildTemplate(ctx, spec("tg:v1", "one"), "", nil)
	if err != nil {
		t.Fatalf("build tg:v1: %v", err)
	}
	if v1.Name != "tg:v1" {
		t.Errorf("built %q, want tg:v1", v1.Name)
	}
	if _, err := a.sdk.Create(ctx, api.CreateSandboxRequest{Template: "tg"}); !errors.Is(err, paddock.ErrNotFound) {
		t.Errorf("create from tg with only tg:v1 built: %v, want not found", err)
	}
	if _, err := a.sdk.TagTemplate(ctx, "tg:v1", "prod", "default"); err != nil {
		t.Fatalf("tag: %v", err)
	}
	if got := tagsOf(a.sdk, "tg"); got != "default,prod,v1" {
		t.Errorf("tags %q", got)
	}
	if _, err := a.sdk.BuildTemplate(ctx, spec("tg:v2", "two"), "", nil); err != nil {
		t.Fatalf("build tg:v2: %v", err)
	}
	// The CLI, as the key: moving prod to v2.
	if out, errOut, code := d.run("--url", "http://"+d.listen, "--api-key", a.key.Secret, "template", "tag", "tg:v2", "prod"); code != 0 || !strings.Contains(out, "tg:prod") {
		t.Fatalf("template tag: %d %s %s", code, out, errOut)
	}
	// The CLI creates from a tag too.
	if out, errOut, code := d.run("--url", "http://"+d.listen, "--api-key", a.key.Secret, "do", "--template", "tg:prod", "--", "cat", "/marker"); code != 0 || strings.TrimSpace(out) != "two" {
		t.Errorf("do --template tg:prod: %d %q %s", code, out, errOut)
	}
	for tpl, want := range map[string]string{"tg": "one", "tg:default": "one", "tg:v1": "one", "tg:v2": "two", "tg:prod": "two"} {
		if got := marker(tpl); got != want {
			t.Errorf("a sandbox of %s holds %q, want %q", tpl, got, want)
		}
	}

	// Another own key: no build, tag or removal under tg; its own name is
	// its own.
	if _, err := b.sdk.BuildTemplate(ctx, spec("tg:mine", "b"), "", nil); !errors.Is(err, paddock.ErrPermissionDenied) {
		t.Errorf("b builds a tag under a's name: %v", err)
	}
	if _, err := b.sdk.TagTemplate(ctx, "tg:v1", "mine"); !errors.Is(err, paddock.ErrPermissionDenied) {
		t.Errorf("b tags a's build: %v", err)
	}
	if err := b.sdk.DeleteTemplate(ctx, "tg:prod"); !errors.Is(err, paddock.ErrPermissionDenied) {
		t.Errorf("b removes a's tag: %v", err)
	}
	if got := tagsOf(b.sdk, "tg"); got != "default,prod,v1,v2" {
		t.Errorf("after b's refused changes, tags %q", got)
	}

	if out, errOut, code := d.run("--url", "http://"+d.listen, "--api-key", a.key.Secret, "template", "rm", "tg:prod"); code != 0 {
		t.Fatalf("template rm tg:prod: %d %s %s", code, out, errOut)
	}
	if _, err := a.sdk.Create(ctx, api.CreateSandboxRequest{Template: "tg:prod"}); !errors.Is(err, paddock.ErrNotFound) {
		t.Errorf("create from a removed tag: %v", err)
	}
	if got := marker("tg:v2"); got != "two" {
		t.Errorf("after removing prod, tg:v2 holds %q", got)
	}
	for _, bad := range []string{"tg:", ":v1", "tg:a:b"} {
		if _, err := a.sdk.Create(ctx, api.CreateSandboxRequest{Template: bad}); !errors.Is(err, paddock.ErrInvalidArgument) {
			t.Errorf("create from %q: %v, want invalid", bad, err)
		}
	}
}
