package e2b

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"mime"
	"strings"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/proto/gen/filesystem"
	"github.com/paddock-dev/paddock/proto/gen/process"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// maxEnvdMessage bounds what the relay keeps of a request (or an upload's
// response) to decode it: one small message. A larger one is relayed
// untouched and recorded by its method alone.
const maxEnvdMessage = 64 << 10

// envdCall is what the ledger learns from one request to envd's surface.
type envdCall struct {
	kind   string // the ledger kind
	method string // "process.Process/Start", "filesystem.Filesystem/Move", "files"
	// Filled when the request was decoded; otherwise why says why not.
	cmd          []string
	env          map[string]string // only the names reach the ledger
	cwd, tag     string
	pty          bool
	path, source string
	why          string
}

// envdKinds maps the envd requests that change a sandbox to their ledger
// kinds; everything else (reads, watches, input to a process) is not
// recorded.
var envdKinds = map[string]string{
	"/process.Process/Start":         api.LedgerProcessStart,
	"/filesystem.Filesystem/MakeDir": api.LedgerMkdir,
	"/filesystem.Filesystem/Move":    api.LedgerFileMove,
	"/filesystem.Filesystem/Remove":  api.LedgerFileRemove,
}

// envdWire is how a request body is framed and encoded.
type envdWire struct {
	enveloped bool // Connect streaming, gRPC, gRPC-Web: [flags][len][msg]...
	json      bool
}

var errUnknownEncoding = errors.New("an encoding the relay does not decode")

// wireOf reads a request's Content-Type: Connect unary (application/proto,
// application/json), Connect streaming (application/connect+proto|json),
// gRPC and gRPC-Web (application/grpc[-web][+proto|+json]).
func wireOf(contentType string) (envdWire, error) {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return envdWire{}, errUnknownEncoding
	}
	switch mt {
	case "application/proto":
		return envdWire{}, nil
	case "application/json":
		return envdWire{json: true}, nil
	case "application/connect+proto", "application/grpc", "application/grpc+proto", "application/grpc-web", "application/grpc-web+proto":
		return envdWire{enveloped: true}, nil
	case "application/connect+json", "application/grpc+json", "application/grpc-web+json":
		return envdWire{enveloped: true, json: true}, nil
	}
	return envdWire{}, errUnknownEncoding
}

// firstMessage returns the first message of a request body: the body
// itself for Connect unary (complete: the whole body was seen), the first
// enveloped message otherwise. compressed says the body or its messages
// are compressed, which the relay does not undo.
func firstMessage(w envdWire, body []byte, complete, compressed bool) ([]byte, error) {
	if !w.enveloped {
		switch {
		case compressed:
			return nil, errors.New("the request is compressed")
		case !complete:
			return nil, errors.New("the request is larger than the relay decodes")
		}
		return body, nil
	}
	if len(body) < 5 {
		return nil, errors.New("the request's first message was not received")
	}
	flags, n := body[0], binary.BigEndian.Uint32(body[1:5])
	switch {
	case flags&0x01 != 0:
		return nil, errors.New("the request is compressed")
	case n > maxEnvdMessage:
		return nil, errors.New("the request's first message is larger than the relay decodes")
	case uint64(len(body)-5) < uint64(n):
		return nil, errors.New("the request's first message was not received whole")
	}
	return body[5 : 5+n], nil
}

// decodeEnvdRequest decodes the request of a recorded envd method from the
// first bytes of its body.
func decodeEnvdRequest(path, contentType string, body []byte, complete, compressed bool) envdCall {
	call := envdCall{kind: envdKinds[path], method: strings.TrimPrefix(path, "/")}
	w, err := wireOf(contentType)
	if err != nil {
		call.why = "the request is in " + err.Error()
		return call
	}
	msg, err := firstMessage(w, body, complete, compressed)
	if err != nil {
		call.why = err.Error()
		return call
	}
	var m proto.Message
	switch path {
	case "/process.Process/Start":
		m = &process.StartRequest{}
	case "/filesystem.Filesystem/MakeDir":
		m = &filesystem.MakeDirRequest{}
	case "/filesystem.Filesystem/Move":
		m = &filesystem.MoveRequest{}
	case "/filesystem.Filesystem/Remove":
		m = &filesystem.RemoveRequest{}
	default:
		call.why = "not a recorded method"
		return call
	}
	if w.json {
		err = protojson.UnmarshalOptions{DiscardUnknown: true}.Unmarshal(msg, m)
	} else {
		err = proto.UnmarshalOptions{DiscardUnknown: true}.Unmarshal(msg, m)
	}
	if err != nil {
		call.why = "the request is not a valid message"
		return call
	}
	switch m := m.(type) {
	case *process.StartRequest:
		p := m.GetProcess()
		call.cmd = append([]string{p.GetCmd()}, p.GetArgs()...)
		call.env, call.cwd, call.tag, call.pty = p.GetEnvs(), p.GetCwd(), m.GetTag(), m.Pty != nil
	case *filesystem.MakeDirRequest:
		call.path = m.GetPath()
	case *filesystem.MoveRequest:
		call.path, call.source = m.GetDestination(), m.GetSource()
	case *filesystem.RemoveRequest:
		call.path = m.GetPath()
	}
	return call
}

// maxUploadEntries bounds the entries one upload adds to the ledger.
const maxUploadEntries = 100

// uploadPaths reads the paths an upload wrote from the agent's answer to
// POST /files: a JSON array of entries with a "path". It returns nil when
// the answer is not one.
func uploadPaths(body []byte) []string {
	var entries []struct {
		Path string `json:"path"`
	}
	if json.Unmarshal(body, &entries) != nil {
		return nil
	}
	out := make([]string, 0, len(entries))
	for _, e := range entries {
		if e.Path != "" {
			out = append(out, e.Path)
		}
	}
	return out
}
