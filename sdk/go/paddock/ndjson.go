package paddock

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// MaxEventLine bounds one NDJSON event line. Output chunks are base64 in
// JSON, so this leaves room for multi-megabyte chunks while keeping a
// misbehaving peer from making the client buffer without end.
const MaxEventLine = 8 << 20

// eventReader reads one JSON value per line from an untrusted stream.
type eventReader struct {
	br  *bufio.Reader
	max int
	buf []byte
}

func newEventReader(r io.Reader, max int) *eventReader {
	return &eventReader{br: bufio.NewReaderSize(r, 64<<10), max: max}
}

// errLineTooLong is returned (wrapped) for a line over the bound.
var errLineTooLong = errors.New("event line too long")

// next decodes the next non-blank line into v. It returns io.EOF at the end
// of the stream, and wraps ErrUnavailable for a malformed or oversized line
// (the daemon should never send one, so the stream cannot be trusted past it).
func (r *eventReader) next(v any) error {
	for {
		line, err := r.readLine()
		if err != nil {
			return err
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		if err := json.Unmarshal(line, v); err != nil {
			return fmt.Errorf("daemon sent a malformed stream event: %v: %w", err, ErrUnavailable)
		}
		return nil
	}
}

// readLine returns one line without its newline. A final line without a
// newline is returned as a line; a stream cut mid-line then fails to decode.
func (r *eventReader) readLine() ([]byte, error) {
	r.buf = r.buf[:0]
	for {
		chunk, err := r.br.ReadSlice('\n')
		if len(r.buf)+len(chunk) > r.max+1 {
			r.discardLine(err)
			return nil, fmt.Errorf("daemon sent a stream event over %d bytes: %w: %w", r.max, errLineTooLong, ErrUnavailable)
		}
		switch {
		case err == nil:
			if len(r.buf) == 0 {
				return chunk[:len(chunk)-1], nil
			}
			r.buf = append(r.buf, chunk[:len(chunk)-1]...)
			return r.buf, nil
		case errors.Is(err, bufio.ErrBufferFull):
			r.buf = append(r.buf, chunk...)
		case errors.Is(err, io.EOF):
			r.buf = append(r.buf, chunk...)
			if len(r.buf) == 0 {
				return nil, io.EOF
			}
			if len(r.buf) > r.max {
				return nil, fmt.Errorf("daemon sent a stream event over %d bytes: %w: %w", r.max, errLineTooLong, ErrUnavailable)
			}
			return r.buf, nil
		default:
			return nil, err
		}
	}
}

// discardLine skips the rest of an oversized line, so a caller that
// chooses to go on would resume at a line boundary.
func (r *eventReader) discardLine(err error) {
	r.buf = r.buf[:0]
	for errors.Is(err, bufio.ErrBufferFull) {
		_, err = r.br.ReadSlice('\n')
	}
}

// nextOrEnd reads the next event of a stream that must finish with a final
// event (last: "end", "done"). Every way the stream can stop short is an
// ErrUnavailable naming the operation: never a silent success.
func (r *eventReader) nextOrEnd(v any, what, last string) error {
	err := r.next(v)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, io.EOF):
		return fmt.Errorf("%s: stream ended without %s %s event: %w", what, article(last), last, ErrUnavailable)
	case errors.Is(err, ErrUnavailable):
		return fmt.Errorf("%s: %w", what, err)
	default:
		return fmt.Errorf("%s: stream broke before its %s event: %v: %w", what, last, err, ErrUnavailable)
	}
}

func article(word string) string {
	if word != "" && (word[0] == 'a' || word[0] == 'e' || word[0] == 'i' || word[0] == 'o' || word[0] == 'u') {
		return "an"
	}
	return "a"
}
