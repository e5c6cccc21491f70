package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// wireTypes are the Go types the document must describe, by schema name.
// TestOpenAPIWireTypesListed fails when api gains a struct type that is
// missing here, so a new wire type cannot go undocumented.
var wireTypes = map[string]reflect.Type{
	"Workspace":                reflect.TypeFor[Workspace](),
	"WorkspaceList":            reflect.TypeFor[WorkspaceList](),
	"CreateWorkspaceRequest":   reflect.TypeFor[CreateWorkspaceRequest](),
	"WorkspaceRunRequest":      reflect.TypeFor[WorkspaceRunRequest](),
	"WorkspaceRunResult":       reflect.TypeFor[WorkspaceRunResult](),
	"WorkspaceChange":          reflect.TypeFor[WorkspaceChange](),
	"WorkspaceVersion":         reflect.TypeFor[WorkspaceVersion](),
	"WorkspaceHistory":         reflect.TypeFor[WorkspaceHistory](),
	"WorkspaceCommand":         reflect.TypeFor[WorkspaceCommand](),
	"WorkspaceLedger":          reflect.TypeFor[WorkspaceLedger](),
	"WorkspacePruneRequest":    reflect.TypeFor[WorkspacePruneRequest](),
	"WorkspacePruneResult":     reflect.TypeFor[WorkspacePruneResult](),
	"WorkspaceDiff":            reflect.TypeFor[WorkspaceDiff](),
	"WorkspaceRollbackRequest": reflect.TypeFor[WorkspaceRollbackRequest](),
	"Resources":                reflect.TypeFor[Resources](),
	"CreateSandboxRequest":     reflect.TypeFor[CreateSandboxRequest](),
	"Sandbox":                  reflect.TypeFor[Sandbox](),
	"SandboxList":              reflect.TypeFor[SandboxList](),
	"Event":                    reflect.TypeFor[Event](),
	"HostStats":                reflect.TypeFor[HostStats](),
	"SandboxUsage":             reflect.TypeFor[SandboxUsage](),
	"StatsMinute":              reflect.TypeFor[StatsMinute](),
	"ExecRequest":              reflect.TypeFor[ExecRequest](),
	"ExecEvent":                reflect.TypeFor[ExecEvent](),
	"FileInfo":                 reflect.TypeFor[FileInfo](),
	"FileList":                 reflect.TypeFor[FileList](),
	"PathRequest":              reflect.TypeFor[PathRequest](),
	"MoveRequest":              reflect.TypeFor[MoveRequest](),
	"Image":                    reflect.TypeFor[Image](),
	"ImageList":                reflect.TypeFor[ImageList](),
	"BuildEvent":               reflect.TypeFor[BuildEvent](),
	"CreateKeyRequest":         reflect.TypeFor[CreateKeyRequest](),
	"Key":                      reflect.TypeFor[Key](),
	"CreatedKey":               reflect.TypeFor[CreatedKey](),
	"KeyList":                  reflect.TypeFor[KeyList](),
	"Health":                   reflect.TypeFor[Health](),
	"StateChange":              reflect.TypeFor[StateChange](),
	"History":                  reflect.TypeFor[History](),
	"Error":                    reflect.TypeFor[Error](),
	// Terminals, watch and previews (interactive.go).
	"WatchEvent":    reflect.TypeFor[WatchEvent](),
	"ExposeRequest": reflect.TypeFor[ExposeRequest](),
	"Preview":       reflect.TypeFor[Preview](),
	"PreviewList":   reflect.TypeFor[PreviewList](),
	"Terminal":      reflect.TypeFor[Terminal](),
	"TerminalList":  reflect.TypeFor[TerminalList](),
	"PTYMessage":    reflect.TypeFor[PTYMessage](),
	// Sessions and background processes (sessions.go, processes.go).
	"CreateSessionRequest": reflect.TypeFor[CreateSessionRequest](),
	"Session":              reflect.TypeFor[Session](),
	"SessionList":          reflect.TypeFor[SessionList](),
	// Code contexts (contexts.go).
	"CreateContextRequest": reflect.TypeFor[CreateContextRequest](),
	"CodeContext":          reflect.TypeFor[CodeContext](),
	"CodeContextList":      reflect.TypeFor[CodeContextList](),
	"RunCodeRequest":       reflect.TypeFor[RunCodeRequest](),
	"CodeError":            reflect.TypeFor[CodeError](),
	"RunCodeEvent":         reflect.TypeFor[RunCodeEvent](),
	"StartProcessRequest":  reflect.TypeFor[StartProcessRequest](),
	"LogInfo":              reflect.TypeFor[LogInfo](),
	"Process":              reflect.TypeFor[Process](),
	"ProcessList":          reflect.TypeFor[ProcessList](),
	"Proc":                 reflect.TypeFor[Proc](),
	"ProcList":             reflect.TypeFor[ProcList](),
	"KillAllRequest":       reflect.TypeFor[KillAllRequest](),
	"KillAllResult":        reflect.TypeFor[KillAllResult](),
	"KillProcessRequest":   reflect.TypeFor[KillProcessRequest](),
	"WaitProcessRequest":   reflect.TypeFor[WaitProcessRequest](),
	"WaitResult":           reflect.TypeFor[WaitResult](),
	"ProcessLogEvent":      reflect.TypeFor[ProcessLogEvent](),

	// Ledger and backups (ledger.go).
	"LedgerEntry":           reflect.TypeFor[LedgerEntry](),
	"Ledger":                reflect.TypeFor[Ledger](),
	"AddLedgerEntryRequest": reflect.TypeFor[AddLedgerEntryRequest](),
	"NetworkPolicy":         reflect.TypeFor[NetworkPolicy](),
	"Secret":                reflect.TypeFor[Secret](),
	"SecretList":            reflect.TypeFor[SecretList](),
	"SetSecretRequest":      reflect.TypeFor[SetSecretRequest](),
	"Injection":             reflect.TypeFor[Injection](),
	"UpdateNetworkRequest":  reflect.TypeFor[UpdateNetworkRequest](),
	"CreateBackupRequest":   reflect.TypeFor[CreateBackupRequest](),
	"Backup":                reflect.TypeFor[Backup](),
	"BackupList":            reflect.TypeFor[BackupList](),
	"RestoreBackupRequest":  reflect.TypeFor[RestoreBackupRequest](),

	// Snapshots, fork, export and import (snapshots.go).
	"CreateSnapshotRequest": reflect.TypeFor[CreateSnapshotRequest](),
	"PauseRequest":          reflect.TypeFor[PauseRequest](),
	"UpdateSnapshotRequest": reflect.TypeFor[UpdateSnapshotRequest](),
	"Snapshot":              reflect.TypeFor[Snapshot](),
	"SnapshotList":          reflect.TypeFor[SnapshotList](),
	"ForkRequest":           reflect.TypeFor[ForkRequest](),
	"ForkResult":            reflect.TypeFor[ForkResult](),

	// Sizes, runtimes and the admission policy (admission.go).
	"SizeInfo":     reflect.TypeFor[SizeInfo](),
	"RuntimeInfo":  reflect.TypeFor[RuntimeInfo](),
	"InfoDefaults": reflect.TypeFor[InfoDefaults](),
	"Info":         reflect.TypeFor[Info](),
	"S3Info":       reflect.TypeFor[S3Info](),
	"StoreUsage":   reflect.TypeFor[StoreUsage](),
	"Policy":       reflect.TypeFor[Policy](),
	// Image import, pull and collection (imageimport.go).
	"ImageConfig":       reflect.TypeFor[ImageConfig](),
	"PullImageRequest":  reflect.TypeFor[PullImageRequest](),
	"ImageGCResult":     reflect.TypeFor[ImageGCResult](),
	"RemoveImageResult": reflect.TypeFor[RemoveImageResult](),
	// Templates and warm pools (templates.go).
	"TemplateSpec":       reflect.TypeFor[TemplateSpec](),
	"TemplateStep":       reflect.TypeFor[TemplateStep](),
	"Readiness":          reflect.TypeFor[Readiness](),
	"Template":           reflect.TypeFor[Template](),
	"TemplateList":       reflect.TypeFor[TemplateList](),
	"TemplateTag":        reflect.TypeFor[TemplateTag](),
	"TemplateTagList":    reflect.TypeFor[TemplateTagList](),
	"TagTemplateRequest": reflect.TypeFor[TagTemplateRequest](),
	"TemplateBuildEvent": reflect.TypeFor[TemplateBuildEvent](),
	"SetPoolRequest":     reflect.TypeFor[SetPoolRequest](),
	"Pool":               reflect.TypeFor[Pool](),
	"PoolList":           reflect.TypeFor[PoolList](),
}

// statusByCode is the contract of the error vocabulary: one HTTP status per
// stable code. The server's mapping must agree with it too.
var statusByCode = map[string]int{
	CodeNotFound:           404,
	CodeConflict:           409,
	CodeInvalidArgument:    400,
	CodeResourceExhausted:  429,
	CodeUnavailable:        503,
	CodeDeadlineExceeded:   504,
	CodePermissionDenied:   403,
	CodeUnauthenticated:    401,
	CodeFailedPrecondition: 412,
	CodePayloadTooLarge:    413,
	CodeCanceled:           499,
	CodeInternal:           500,
}

type object = map[string]any

func loadDoc(t *testing.T) object {
	t.Helper()
	var doc object
	if err := json.Unmarshal(OpenAPI(), &doc); err != nil {
		t.Fatalf("openapi.json is not valid JSON: %v", err)
	}
	return doc
}

// get walks doc along keys and fails the test when a step is missing or is
// not an object.
func get(t *testing.T, doc object, keys ...string) object {
	t.Helper()
	cur := doc
	for i, k := range keys {
		next, ok := cur[k].(object)
		if !ok {
			t.Fatalf("openapi.json: no object at %s", strings.Join(keys[:i+1], "/"))
		}
		cur = next
	}
	return cur
}

// resolve follows a local $ref (repeatedly) and returns the target.
func resolve(doc object, v object) (object, error) {
	for range 16 {
		ref, ok := v["$ref"].(string)
		if !ok {
			return v, nil
		}
		target, err := pointer(doc, ref)
		if err != nil {
			return nil, err
		}
		obj, ok := target.(object)
		if !ok {
			return nil, fmt.Errorf("$ref %s is not an object", ref)
		}
		v = obj
	}
	return nil, fmt.Errorf("$ref chain too long")
}

// pointer evaluates a local JSON pointer reference ("#/a/b") through
// objects; the document refers into nothing else.
func pointer(doc object, ref string) (any, error) {
	rest, ok := strings.CutPrefix(ref, "#/")
	if !ok {
		return nil, fmt.Errorf("$ref %q is not local", ref)
	}
	var cur any = doc
	for _, tok := range strings.Split(rest, "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		obj, _ := cur.(object) // a nil map finds nothing
		if cur, ok = obj[tok]; !ok {
			return nil, fmt.Errorf("$ref %s: no %q", ref, tok)
		}
	}
	return cur, nil
}

func TestOpenAPIDocument(t *testing.T) {
	doc := loadDoc(t)
	v, _ := doc["openapi"].(string)
	if !regexp.MustCompile(`^3\.1\.\d+$`).MatchString(v) {
		t.Errorf("openapi = %q, want 3.1.x", v)
	}
	info := get(t, doc, "info")
	for _, k := range []string{"title", "version", "description"} {
		if s, _ := info[k].(string); s == "" {
			t.Errorf("info.%s is empty", k)
		}
	}
	if _, err := scanDocument(OpenAPI()); err != nil {
		t.Error(err)
	}
}

// scanDocument walks the raw document once. It fails on a key repeated in
// one object, a hand-editing slip that json.Unmarshal hides by keeping the
// last value, and returns every $ref by its location.
func scanDocument(data []byte) (refs map[string]string, err error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	refs = map[string]string{}
	var walk func(path string) error
	walk = func(path string) error {
		tok, err := dec.Token()
		if s, ok := tok.(string); ok && strings.HasSuffix(path, "/$ref") {
			refs[path] = s
		}
		if err != nil || (tok != json.Delim('{') && tok != json.Delim('[')) {
			return err
		}
		seen := map[string]bool{}
		for i := 0; dec.More(); i++ {
			elem := strconv.Itoa(i)
			if tok == json.Delim('{') {
				kt, err := dec.Token()
				if err != nil {
					return err
				}
				if elem = kt.(string); seen[elem] {
					return fmt.Errorf("openapi.json: key %q appears twice in %s", elem, path)
				}
				seen[elem] = true
			}
			if err := walk(path + "/" + elem); err != nil {
				return err
			}
		}
		_, err = dec.Token() // the closing delimiter
		return err
	}
	if err := walk("#"); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("openapi.json: data after the document")
	}
	return refs, nil
}

func TestOpenAPIReturnsCopy(t *testing.T) {
	a := OpenAPI()
	want := bytes.Clone(a)
	for i := range a {
		a[i] = 'x'
	}
	if got := OpenAPI(); !bytes.Equal(got, want) {
		t.Fatal("modifying OpenAPI()'s result changed what the next call returns")
	}
	file, err := os.ReadFile("openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(want, file) {
		t.Fatal("OpenAPI() differs from openapi.json")
	}
}

func TestOpenAPIRefsResolve(t *testing.T) {
	doc := loadDoc(t)
	refs, err := scanDocument(OpenAPI())
	if err != nil {
		t.Fatal(err)
	}
	if len(refs) == 0 {
		t.Fatal("no $ref found; the scan is broken")
	}
	for at, ref := range refs {
		if _, err := pointer(doc, ref); err != nil {
			t.Errorf("%s: %v", at, err)
		}
	}
}

func apiSource(t *testing.T) (structs []string, consts map[string]string) {
	t.Helper()
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	consts = map[string]string{}
	for _, n := range names {
		if strings.HasSuffix(n, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), n, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok {
				continue
			}
			for _, spec := range gd.Specs {
				switch s := spec.(type) {
				case *ast.TypeSpec:
					if _, ok := s.Type.(*ast.StructType); ok && s.Name.IsExported() {
						structs = append(structs, s.Name.Name)
					}
				case *ast.ValueSpec:
					for i, name := range s.Names {
						if i >= len(s.Values) || gd.Tok != token.CONST {
							continue
						}
						if lit, ok := s.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
							consts[name.Name], _ = strconv.Unquote(lit.Value)
						}
					}
				}
			}
		}
	}
	return structs, consts
}

// stringConsts returns the sorted values of the string constants whose
// names start with prefix, so enums in the document can be compared with
// the Go source of truth.
func stringConsts(t *testing.T, prefix string) []string {
	t.Helper()
	_, consts := apiSource(t)
	var out []string
	for name, v := range consts {
		if strings.HasPrefix(name, prefix) {
			out = append(out, v)
		}
	}
	if len(out) == 0 {
		t.Fatalf("no string constants named %s*", prefix)
	}
	slices.Sort(out)
	return out
}

func TestOpenAPIWireTypesListed(t *testing.T) {
	structs, _ := apiSource(t)
	for _, name := range structs {
		if wireTypes[name] == nil {
			t.Errorf("api.%s is not in wireTypes: add it there and describe it in openapi.json", name)
		}
	}
}

// jsonField is one field as encoding/json writes it.
type jsonField struct {
	name      string
	omitempty bool
	typ       reflect.Type
}

// jsonFields lists the JSON fields of a struct type, with embedded structs
// flattened as encoding/json does.
func jsonFields(typ reflect.Type) []jsonField {
	var out []jsonField
	for i := range typ.NumField() {
		f := typ.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			out = append(out, jsonFields(f.Type)...)
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out = append(out, jsonField{
			name:      name,
			omitempty: slices.Contains(strings.Split(opts, ","), "omitempty"),
			typ:       f.Type,
		})
	}
	return out
}

func TestOpenAPISchemasMatchGoTypes(t *testing.T) {
	doc := loadDoc(t)
	schemas := get(t, doc, "components", "schemas")
	for _, name := range slices.Sorted(maps.Keys(wireTypes)) {
		typ := wireTypes[name]
		t.Run(name, func(t *testing.T) {
			schema, ok := schemas[name].(object)
			if !ok {
				t.Fatalf("components.schemas has no %s", name)
			}
			if schema["type"] != "object" {
				t.Errorf("type = %v, want object", schema["type"])
			}
			props, _ := schema["properties"].(object)
			var wantRequired []string
			var fieldNames []string
			for _, f := range jsonFields(typ) {
				fieldNames = append(fieldNames, f.name)
				// Pointers and omitempty fields may be absent on the wire;
				// everything else is always written.
				if !f.omitempty && f.typ.Kind() != reflect.Pointer {
					wantRequired = append(wantRequired, f.name)
				}
				p, ok := props[f.name].(object)
				if !ok {
					t.Errorf("property %q (Go %s) is missing", f.name, f.typ)
					continue
				}
				if err := matchType(doc, p, f.typ); err != nil {
					t.Errorf("property %q: %v", f.name, err)
				}
			}
			slices.Sort(fieldNames)
			if got := slices.Sorted(maps.Keys(props)); !slices.Equal(got, fieldNames) {
				t.Errorf("properties %v, want exactly %v", got, fieldNames)
			}
			slices.Sort(wantRequired)
			if gotRequired := strs(schema["required"]); !slices.Equal(gotRequired, wantRequired) {
				t.Errorf("required %v, want %v", gotRequired, wantRequired)
			}
		})
	}
}

var timeType = reflect.TypeFor[time.Time]()

// jsonTypes is the JSON Schema type encoding/json produces for each kind.
var jsonTypes = map[reflect.Kind]string{
	reflect.String: "string", reflect.Bool: "boolean",
	reflect.Int: "integer", reflect.Int8: "integer", reflect.Int16: "integer", reflect.Int32: "integer", reflect.Int64: "integer",
	reflect.Uint: "integer", reflect.Uint8: "integer", reflect.Uint16: "integer", reflect.Uint32: "integer", reflect.Uint64: "integer",
	reflect.Float32: "number", reflect.Float64: "number",
	reflect.Slice: "array", reflect.Array: "array", reflect.Map: "object",
}

// matchType checks that schema describes what encoding/json writes for typ.
func matchType(doc, schema object, typ reflect.Type) error {
	if typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	isStruct := typ.Kind() == reflect.Struct && typ != timeType
	if ref, ok := schema["$ref"].(string); ok {
		if isStruct {
			if want := "#/components/schemas/" + typ.Name(); ref != want {
				return fmt.Errorf("$ref %s, want %s", ref, want)
			}
			return nil
		}
		target, err := resolve(doc, schema)
		if err != nil {
			return err
		}
		schema = target
	}
	want, sub := jsonTypes[typ.Kind()], ""
	switch {
	case isStruct:
		return fmt.Errorf("Go struct %s must be a $ref to its schema", typ)
	case typ == timeType:
		want, sub = "string", "format"
	case typ.Kind() == reflect.Slice && typ.Elem().Kind() == reflect.Uint8:
		want, sub = "string", "contentEncoding"
	case typ.Kind() == reflect.Slice || typ.Kind() == reflect.Array:
		sub = "items"
	case typ.Kind() == reflect.Map:
		sub = "additionalProperties"
		if typ.Key().Kind() != reflect.String {
			return fmt.Errorf("Go %s: only string-keyed maps are JSON objects", typ)
		}
	case typ.Kind() >= reflect.Uint && typ.Kind() <= reflect.Uint64:
		if m, ok := schema["minimum"].(float64); !ok || m < 0 {
			return fmt.Errorf("unsigned Go %s needs minimum >= 0", typ)
		}
	}
	if want == "" {
		return fmt.Errorf("no rule for Go %s", typ)
	}
	if got := schema["type"]; got != want {
		return fmt.Errorf("type %v, want %s for Go %s", got, want, typ)
	}
	switch sub {
	case "format":
		if schema[sub] != "date-time" {
			return fmt.Errorf("format %v, want date-time for time.Time", schema[sub])
		}
	case "contentEncoding":
		if schema[sub] != "base64" {
			return fmt.Errorf("contentEncoding %v, want base64 for []byte", schema[sub])
		}
	case "items", "additionalProperties":
		inner, ok := schema[sub].(object)
		if !ok {
			return fmt.Errorf("no %s schema for Go %s", sub, typ)
		}
		if err := matchType(doc, inner, typ.Elem()); err != nil {
			return fmt.Errorf("%s: %w", sub, err)
		}
	}
	return nil
}

// strs returns a JSON array of strings, sorted.
func strs(v any) []string {
	raw, _ := v.([]any)
	out := []string{}
	for _, s := range raw {
		out = append(out, fmt.Sprint(s))
	}
	slices.Sort(out)
	return out
}

func TestOpenAPIEnumsMatchConstants(t *testing.T) {
	doc := loadDoc(t)
	tests := []struct {
		prefix string
		path   []string
	}{
		{"Code", []string{"components", "schemas", "ErrorCode"}},
		{"State", []string{"components", "schemas", "SandboxState"}},
		{"Runtime", []string{"components", "schemas", "CreateSandboxRequest", "properties", "runtime"}},
		{"Event", []string{"components", "schemas", "ExecEvent", "properties", "type"}},
		{"Stream", []string{"components", "schemas", "Event", "properties", "type"}},
		{"Executor", []string{"components", "schemas", "WorkspaceRunRequest", "properties", "executor"}},
		{"Change", []string{"components", "schemas", "WorkspaceChange", "properties", "kind"}},
	}
	for _, tt := range tests {
		t.Run(tt.prefix, func(t *testing.T) {
			want := stringConsts(t, tt.prefix)
			if got := strs(get(t, doc, tt.path...)["enum"]); !slices.Equal(got, want) {
				t.Errorf("%s enum %v, want the %s* constants %v", strings.Join(tt.path, "."), got, tt.prefix, want)
			}
		})
	}
	for name, prop := range map[string]string{"Sandbox": "state"} {
		p := get(t, doc, "components", "schemas", name, "properties", prop)
		if p["$ref"] != "#/components/schemas/SandboxState" {
			t.Errorf("%s.%s does not use SandboxState", name, prop)
		}
	}
}

func TestOpenAPIErrorCodes(t *testing.T) {
	doc := loadDoc(t)
	codes := stringConsts(t, "Code")
	if got := slices.Sorted(maps.Keys(statusByCode)); !slices.Equal(got, codes) {
		t.Fatalf("statusByCode covers %v, but api has codes %v: give the new code its status", got, codes)
	}
	raw, _ := json.Marshal(get(t, doc, "components", "schemas", "ErrorCode")["x-http-status"])
	var got map[string]int
	if err := json.Unmarshal(raw, &got); err != nil || !maps.Equal(got, statusByCode) {
		t.Errorf("x-http-status = %v, want %v", got, statusByCode)
	}
	if p := get(t, doc, "components", "schemas", "Error", "properties", "code"); p["$ref"] != "#/components/schemas/ErrorCode" {
		t.Error("Error.code does not use ErrorCode")
	}
	info, _ := get(t, doc, "info")["description"].(string)
	for _, c := range codes {
		row := fmt.Sprintf("| `%s` | %d |", c, statusByCode[c])
		if !strings.Contains(info, row) {
			t.Errorf("info.description's status table lacks %q", row)
		}
	}
	// The shared error responses the operations use (checkErrorResponse
	// requires one per listed status) must say which code they carry.
	for name, v := range get(t, doc, "components", "responses") {
		if name == "Error" {
			continue
		}
		d, _ := v.(object)["description"].(string)
		if c := strings.Trim(strings.Fields(d + " x")[0], "`:"); camel(c) != name || statusByCode[c] == 0 {
			t.Errorf("components.responses.%s should open by naming its code, not %q", name, c)
		}
	}
}

func TestOpenAPISecurity(t *testing.T) {
	doc := loadDoc(t)
	schemes := get(t, doc, "components", "securitySchemes")
	var bearer, header string
	for name, v := range schemes {
		s := v.(object)
		switch {
		case s["type"] == "http" && strings.EqualFold(fmt.Sprint(s["scheme"]), "bearer"):
			bearer = name
		case s["type"] == "apiKey" && s["in"] == "header" && s["name"] == "X-API-Key":
			header = name
		}
		if d, _ := s["description"].(string); d == "" {
			t.Errorf("security scheme %s has no description", name)
		}
	}
	if bearer == "" || header == "" {
		t.Fatalf("want a bearer scheme and an X-API-Key header scheme, have %v", slices.Sorted(maps.Keys(schemes)))
	}
	// Either scheme alone must satisfy the requirement: two entries in the
	// top-level list, each naming one scheme.
	var alternatives []string
	for _, req := range doc["security"].([]any) {
		alternatives = append(alternatives, strings.Join(slices.Sorted(maps.Keys(req.(object))), "+"))
	}
	slices.Sort(alternatives)
	if want := slices.Sorted(slices.Values([]string{bearer, header})); !slices.Equal(alternatives, want) {
		t.Errorf("top-level security alternatives %v, want %v", alternatives, want)
	}
	health := get(t, doc, "paths", "/v1/health", "get")
	if s, ok := health["security"].([]any); !ok || len(s) != 0 {
		t.Error("GET /v1/health must declare security: [] (it needs no key)")
	}
}
