package api

import (
	"go/parser"
	"go/token"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// route is one line of the route list in api.go's package comment.
type route struct {
	method, path string
	query        []string // parameter names in the line's ?a=x&b=y
	req, resp    string   // text left and right of "->"
}

var routeRE = regexp.MustCompile(`^\s*(GET|POST|PUT|PATCH|DELETE|HEAD|OPTIONS)\s+(/\S+)\s*(.*)$`)

// parseRoutes reads the route list from api.go's package comment, the
// list the server and SDK are written against.
func parseRoutes(t *testing.T) []route {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "api.go", nil, parser.ParseComments|parser.PackageClauseOnly)
	if err != nil {
		t.Fatal(err)
	}
	if f.Doc == nil {
		t.Fatal("api.go has no package comment")
	}
	var routes []route
	for _, line := range strings.Split(f.Doc.Text(), "\n") {
		m := routeRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		r := route{method: m[1], path: m[2]}
		if p, q, ok := strings.Cut(r.path, "?"); ok {
			r.path = p
			for _, kv := range strings.Split(q, "&") {
				if name, _, ok := strings.Cut(kv, "="); ok && !slices.Contains(r.query, name) {
					r.query = append(r.query, name)
				}
			}
		}
		before, after, _ := strings.Cut(m[3], "->")
		r.req, r.resp = strings.TrimSpace(before), strings.TrimSpace(after)
		routes = append(routes, r)
	}
	// Guards against a change in the comment's layout making this test
	// check nothing.
	if len(routes) < 20 {
		t.Fatalf("found only %d routes in api.go's package comment; has its layout changed?", len(routes))
	}
	return routes
}

var methods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

func TestOpenAPIRoutesDocumented(t *testing.T) {
	doc := loadDoc(t)
	paths := get(t, doc, "paths")
	routes := parseRoutes(t)
	listed := map[string]bool{}
	for _, r := range routes {
		key := r.method + " " + r.path
		if listed[key] {
			t.Errorf("route %s is listed twice in api.go", key)
		}
		listed[key] = true
		t.Run(key, func(t *testing.T) {
			item, ok := paths[r.path].(object)
			if !ok {
				t.Fatalf("path %s is not in openapi.json", r.path)
			}
			op, ok := item[strings.ToLower(r.method)].(object)
			if !ok {
				t.Fatalf("%s is not in openapi.json", key)
			}
			checkOperation(t, doc, item, op, r)
		})
	}
	// The reverse: the document must not promise routes that do not exist.
	ids := map[string]string{}
	for p, v := range paths {
		item := v.(object)
		for _, m := range methods {
			op, ok := item[m].(object)
			if !ok {
				continue
			}
			key := strings.ToUpper(m) + " " + p
			if !listed[key] {
				t.Errorf("openapi.json documents %s, which api.go does not list", key)
			}
			id, _ := op["operationId"].(string)
			if prev, dup := ids[id]; dup {
				t.Errorf("operationId %q is used by %s and %s", id, prev, key)
			}
			ids[id] = key
		}
	}
}

func checkOperation(t *testing.T, doc, item, op object, r route) {
	t.Helper()
	for _, k := range []string{"operationId", "summary", "description"} {
		if s, _ := op[k].(string); strings.TrimSpace(s) == "" {
			t.Errorf("%s is empty", k)
		}
	}
	checkParams(t, doc, r, item, op)

	responses, ok := op["responses"].(object)
	if !ok {
		t.Fatal("no responses")
	}
	for status, v := range responses {
		resp, err := resolve(doc, v.(object))
		if err != nil {
			t.Errorf("response %s: %v", status, err)
			continue
		}
		if s, _ := resp["description"].(string); s == "" {
			t.Errorf("response %s has no description", status)
		}
		checkErrorResponse(t, status, v.(object), resp)
	}
	secured := true
	if sec, ok := op["security"].([]any); ok && len(sec) == 0 {
		secured = false
	}
	if _, ok := responses["401"]; secured && !ok {
		t.Error("the operation needs an API key on TCP but does not list 401")
	}

	checkRequestBody(t, doc, op, r)
	checkSuccess(t, doc, responses, r)
}

// checkParams checks that every {name} in the path is declared as a
// required path parameter, and nothing else is; that the query parameters
// the route line shows are declared; and that a sandbox's file routes take
// ?user=.
func checkParams(t *testing.T, doc object, r route, item, op object) {
	t.Helper()
	want := map[string]bool{}
	for _, m := range regexp.MustCompile(`\{([^}]+)\}`).FindAllStringSubmatch(r.path, -1) {
		want[m[1]] = true
	}
	got, query := map[string]bool{}, map[string]bool{}
	for _, holder := range []object{item, op} {
		params, _ := holder["parameters"].([]any)
		for _, p := range params {
			param, err := resolve(doc, p.(object))
			if err != nil {
				t.Error(err)
				continue
			}
			name, _ := param["name"].(string)
			switch param["in"] {
			case "path":
				if param["required"] != true {
					t.Errorf("path parameter %s is not required", name)
				}
				got[name] = true
			case "query":
				query[name] = true
			}
		}
	}
	if !maps.Equal(got, want) {
		t.Errorf("path parameters %v, want %v", slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
	}
	wantQuery := r.query
	// A sandbox's file routes act as a user inside it; a workspace has no
	// users.
	if strings.HasPrefix(r.path, "/v1/sandboxes/") && (strings.Contains(r.path, "/files") || strings.HasSuffix(r.path, "/tar")) {
		wantQuery = append(wantQuery, "user")
	}
	for _, name := range wantQuery {
		if !query[name] {
			t.Errorf("query parameter %s is not declared", name)
		}
	}
}

// checkErrorResponse checks that an error status is answered with the Error
// body, through the shared response named after the code of that status.
func checkErrorResponse(t *testing.T, status string, raw, resp object) {
	t.Helper()
	n, err := strconv.Atoi(status)
	if status != "default" && (err != nil || n < 400) {
		return
	}
	ref, _ := raw["$ref"].(string)
	if status == "default" {
		if ref != "#/components/responses/Error" {
			t.Errorf("default response is %q, want the shared Error response", ref)
		}
		return
	}
	var code string
	for c, s := range statusByCode {
		if s == n {
			code = c
		}
	}
	if code == "" {
		t.Errorf("response %s: no error code maps to that status", status)
		return
	}
	if want := "#/components/responses/" + camel(code); ref != want {
		t.Errorf("response %s is %q, want %q", status, ref, want)
	}
	schema := jsonSchemaOf(resp, "application/json")
	if schema == nil || schema["$ref"] != "#/components/schemas/Error" {
		t.Errorf("response %s does not carry the Error schema", status)
	}
}

func camel(code string) string {
	var b strings.Builder
	for _, w := range strings.Split(code, "_") {
		b.WriteString(strings.ToUpper(w[:1]) + w[1:])
	}
	return b.String()
}

func jsonSchemaOf(holder object, mediaType string) object {
	content, _ := holder["content"].(object)
	media, _ := content[mediaType].(object)
	schema, _ := media["schema"].(object)
	return schema
}

var explicitStatusRE = regexp.MustCompile(`\((2\d\d)\b`)

// bodyOf reads one side of a route line in api.go: "Type" is a JSON body
// of that type, "NDJSON stream of Type" a stream of such lines, a raw body
// or bytes are octet-stream, tar is application/x-tar, "204" is no body.
// known is false for a form this test cannot read.
func bodyOf(text string) (mediaType, schema string, known bool) {
	fields := strings.Fields(text)
	switch {
	case len(fields) == 0 || fields[0] == "204":
		return "", "", true
	case fields[0] == "NDJSON":
		return "application/x-ndjson", fields[len(fields)-1], true
	case wireTypes[fields[0]] != nil:
		return "application/json", fields[0], true
	case strings.Contains(text, "application/x-tar"):
		return "application/x-tar", "", true
	case strings.Contains(text, "application/octet-stream"), fields[0] == "raw":
		return "application/octet-stream", "", true
	case strings.Contains(text, "OpenAPI"):
		return "application/json", "", true
	}
	return "", "", false
}

// checkBody checks that holder (a requestBody or response) carries
// mediaType with the named schema, or no content when mediaType is "".
func checkBody(t *testing.T, what string, holder object, mediaType, schema string) {
	t.Helper()
	if mediaType == "" {
		if holder["content"] != nil {
			t.Errorf("%s has a body, api.go says none", what)
		}
		return
	}
	s := jsonSchemaOf(holder, mediaType)
	if s == nil {
		t.Errorf("%s is not %s", what, mediaType)
	} else if schema != "" && s["$ref"] != "#/components/schemas/"+schema {
		t.Errorf("%s schema is %v, want %s", what, s["$ref"], schema)
	}
}

// checkRequestBody holds the request side of a route line to the document;
// nothing before "->" means no body at all.
func checkRequestBody(t *testing.T, doc object, op object, r route) {
	t.Helper()
	raw, has := op["requestBody"].(object)
	if has != (r.req != "") {
		t.Fatalf("api.go lists request body %q, openapi.json has one: %v", r.req, has)
	}
	if !has {
		return
	}
	body, err := resolve(doc, raw)
	if err != nil {
		t.Fatal(err)
	}
	// "PauseRequest?" in api.go marks a body that may be left out.
	req, optional := strings.CutSuffix(r.req, "?")
	if body["required"] != !optional {
		t.Errorf("requestBody required is %v, api.go says optional %v", body["required"], optional)
	}
	if mediaType, schema, known := bodyOf(req); known {
		checkBody(t, "request body", body, mediaType, schema)
	}
}

// checkSuccess holds the response side of a route line to the document.
// "Sandbox (201)" names a status other than 200.
func checkSuccess(t *testing.T, doc object, responses object, r route) {
	t.Helper()
	status := "200"
	if m := explicitStatusRE.FindStringSubmatch(r.resp); m != nil {
		status = m[1]
	}
	mediaType, schema, known := bodyOf(r.resp)
	switch {
	case r.resp == "":
		t.Fatal("api.go lists no response for the route")
	case !known:
		// At least some success, for a form this test cannot read yet.
		for s := range responses {
			// 101: a WebSocket upgrade is the success of its route.
			if strings.HasPrefix(s, "2") || s == "101" {
				return
			}
		}
		t.Fatalf("no 2xx response (api.go says %q)", r.resp)
	case mediaType == "":
		status = "204"
	}
	v, ok := responses[status].(object)
	if !ok {
		t.Fatalf("no %s response", status)
	}
	resp, err := resolve(doc, v)
	if err != nil {
		t.Fatal(err)
	}
	checkBody(t, "response "+status, resp, mediaType, schema)
}

// apiSource reads the package's non-test source files: the names of its
// exported struct types, and its string constants by name.
