package api

import "time"

// Template step kinds.
const (
	StepRun     = "run"
	StepCopy    = "copy"
	StepEnv     = "env"
	StepWorkdir = "workdir"
	StepUser    = "user"
)

// Bounds on a template definition.
const (
	MaxTemplateSteps   = 64
	MaxTemplateContext = 256 << 20 // bytes of build context tar
	// MaxTemplateTags bounds the tags one call assigns or removes.
	MaxTemplateTags = 16
)

// TemplateSpec is a declarative template: a base, build steps, and what a
// sandbox created from it starts with. The CLI reads it from a TOML file;
// on the wire it is JSON.
type TemplateSpec struct {
	// Name is 1-63 letters, digits, '-', '_' or '.', and may carry a
	// tag after a colon ("py:v2", the tag likewise): each tag of a name
	// is a template of its own, and "py" is "py:default".
	Name string `json:"name"`
	// Image is the base image ("base", "busybox", a digest); Template a
	// base template instead. Exactly one may be set ("" for both = the
	// daemon's default image).
	Image    string `json:"image,omitempty"`
	Template string `json:"template,omitempty"`
	// Runtime is the default runtime of sandboxes created from it and the
	// runtime the build runs on ("" = the daemon's default).
	Runtime string         `json:"runtime,omitempty"`
	Steps   []TemplateStep `json:"steps,omitempty"`
	// Env and Cwd are what sandboxes created from the template start
	// with; a create's own env is laid over Env.
	Env map[string]string `json:"env,omitempty"`
	Cwd string            `json:"cwd,omitempty"`
	// User ("root" or "user") is who commands that name no user run as
	// in sandboxes of the template ("" = the image's user, else "user").
	// Cwd is where they start.
	User string `json:"user,omitempty"`
	// Start is a command started as a background process (id "start")
	// in each sandbox created from the template.
	Start []string `json:"start,omitempty"`
	// Ready is what must pass before such a sandbox counts as created.
	Ready *Readiness `json:"ready,omitempty"`
}

// TemplateStep is one build step; Kind says which fields apply.
type TemplateStep struct {
	Kind string `json:"kind"`
	// Run is a shell command line (sh -c) for "run".
	Run string `json:"run,omitempty"`
	// Src (a path in the build context) and Dst (an absolute directory in
	// the sandbox) for "copy".
	Src string `json:"src,omitempty"`
	Dst string `json:"dst,omitempty"`
	// Env is merged into the build environment for "env".
	Env map[string]string `json:"env,omitempty"`
	// Dir for "workdir"; User ("root" or "user") for "user".
	Dir  string `json:"dir,omitempty"`
	User string `json:"user,omitempty"`
}

// Readiness is a check on the start command: a TCP port answering on the
// sandbox's loopback, a line of its output matching a pattern, or a shell
// command (sh -c, as the start command's user) that exits 0, tried every
// ReadyCmdInterval until it does.
type Readiness struct {
	Port    int    `json:"port,omitempty"`
	Log     string `json:"log,omitempty"`
	Cmd     string `json:"cmd,omitempty"`
	Timeout string `json:"timeout,omitempty"` // Go duration, default 30s
}

// ReadyCmdInterval is the pause between two tries of a readiness command.
const ReadyCmdInterval = 200 * time.Millisecond

// MaxReadyCmd bounds a readiness command's length.
const MaxReadyCmd = 4096

// Template is a built template.
type Template struct {
	Name        string       `json:"name"`
	Spec        TemplateSpec `json:"spec"`
	Image       string       `json:"image"`
	ImageDigest string       `json:"image_digest"`
	// Layers are the content digests stacked on the image, lowest first.
	Layers []string `json:"layers"`
	// BuildID changes on every build whose result differs; pools use it
	// to replace stale sandboxes.
	BuildID   string    `json:"build_id"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	// Spawns counts the sandboxes created from it (a warm pool's counted
	// when handed out), across rebuilds; LastSpawnedAt is the last one's
	// time, absent before the first.
	Spawns        int64      `json:"spawns"`
	LastSpawnedAt *time.Time `json:"last_spawned_at,omitempty"`
}

// TemplateTag is one tag of a template's name: the build it names. The
// body of GET /v1/templates/{name}/tags is a TemplateTagList.
type TemplateTag struct {
	Tag       string    `json:"tag"`
	Template  string    `json:"template"` // the template the tag is: name:tag, or name for "default"
	BuildID   string    `json:"build_id"`
	CreatedAt time.Time `json:"created_at"`
}

// TemplateTagList lists a name's tags.
type TemplateTagList struct {
	Tags []TemplateTag `json:"tags"`
}

// TagTemplateRequest is the body of POST /v1/templates/{name}/tags: the
// build of {name} (a name, or name:tag) is given every tag of Tags too,
// replacing what those tags named before.
type TagTemplateRequest struct {
	Tags []string `json:"tags"`
}

// TemplateList is the body of GET /v1/templates.
type TemplateList struct {
	Templates []Template `json:"templates"`
}

// Template build event types.
const (
	BuildStep   = "step"
	BuildOutput = "output"
	BuildEnd    = "end"
)

// TemplateBuildEvent is one line of the NDJSON build stream.
type TemplateBuildEvent struct {
	Type string `json:"type"`
	// Step is the 1-based step index and Steps the total, for "step" and
	// "output"; Cached says a step was satisfied from the cache.
	Step   int    `json:"step,omitempty"`
	Steps  int    `json:"steps,omitempty"`
	Kind   string `json:"kind,omitempty"`
	Cached bool   `json:"cached,omitempty"`
	// Data is output of a run step (base64 in JSON).
	Data []byte `json:"data,omitempty"`
	// Template is the result on a successful end; Error the reason on a
	// failed one.
	Template *Template `json:"template,omitempty"`
	Error    *Error    `json:"error,omitempty"`
}

// SetPoolRequest is the body of PUT /v1/pools/{pool}.
type SetPoolRequest struct {
	// Template the pool keeps sandboxes of.
	Template string `json:"template"`
	// MinReady sandboxes are kept ready (0 to MaxPoolMinReady).
	MinReady int `json:"min_ready"`
	// MaxReady lets the pool grow past MinReady after a burst: it then
	// keeps as many ready as the most creates that asked for it within
	// any 10 seconds of the last 10 minutes, up to MaxReady (0 = it does
	// not grow; else MinReady to MaxPoolMaxReady).
	MaxReady int `json:"max_ready,omitempty"`
	// Cooldown (Go duration) destroys a sandbox served from the pool after
	// it has been idle that long; "" = the daemon's idle policy.
	Cooldown string `json:"cooldown,omitempty"`
	// Resources of every pooled sandbox (zero = the daemon's defaults).
	Resources Resources `json:"resources,omitempty"`
}

// MaxPoolMinReady bounds SetPoolRequest.MinReady.
const MaxPoolMinReady = 64

// MaxPoolMaxReady bounds SetPoolRequest.MaxReady.
const MaxPoolMaxReady = 256

// Pool is a warm pool and its state.
type Pool struct {
	Name     string `json:"name"`
	Template string `json:"template"`
	MinReady int    `json:"min_ready"`
	MaxReady int    `json:"max_ready,omitempty"`
	// Target is how many the pool keeps ready now: MinReady, or more
	// after a burst when MaxReady allows.
	Target    int       `json:"target"`
	Cooldown  string    `json:"cooldown,omitempty"`
	Resources Resources `json:"resources"`
	// Ready sandboxes wait to be claimed; Starting are being made.
	Ready    int `json:"ready"`
	Starting int `json:"starting"`
	// Served counts claims from the pool since the daemon started, Cold
	// creates that matched but found the pool empty.
	Served int64 `json:"served"`
	Cold   int64 `json:"cold"`
	// Error is the last refill failure ("" when refills work).
	Error     string    `json:"error,omitempty"`
	CreatedAt time.Time `json:"created_at"`
}

// PoolList is the body of GET /v1/pools.
type PoolList struct {
	Pools []Pool `json:"pools"`
}
