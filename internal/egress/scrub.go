package egress

import (
	"io"
	"net/http"
	"strings"
)

// An intercepted upstream that reflects request headers (a debugging
// endpoint, an error page quoting the request) would hand the injected
// secret to the sandbox. The proxy replaces every literal occurrence of
// each injected secret in what comes back, status line, headers, trailers,
// body and upgraded streams, by as many '*' (the length stays, so framing
// such as Content-Length stays true). Secrets shorter than minScrubLen are
// not scrubbed: masking every occurrence of a few common bytes would
// corrupt ordinary responses, and such a value is no secret worth the
// name. Encoded forms (compressed, escaped, split, transformed) are not
// recognised; docs/networking.md says what is and is not protected.

// minScrubLen is the shortest secret value scrubbed from responses.
const minScrubLen = 8

const scrubMask = '*'

// pattern is one secret with its KMP failure table, so a stream is
// scanned once, whatever its chunking.
type pattern struct {
	p    []byte
	fail []int // fail[i]: longest proper prefix of p[:i+1] that is also its suffix
}

func newPattern(p string) *pattern {
	pt := &pattern{p: []byte(p), fail: make([]int, len(p))}
	k := 0
	for i := 1; i < len(p); i++ {
		for k > 0 && p[i] != p[k] {
			k = pt.fail[k-1]
		}
		if p[i] == p[k] {
			k++
		}
		pt.fail[i] = k
	}
	return pt
}

// scrubPatterns returns the patterns for the secret values worth
// scrubbing, without duplicates.
func scrubPatterns(secrets []string) []*pattern {
	var out []*pattern
	seen := map[string]bool{}
	for _, v := range secrets {
		if len(v) < minScrubLen || seen[v] {
			continue
		}
		seen[v] = true
		out = append(out, newPattern(v))
	}
	return out
}

// scrubString masks every occurrence of the patterns in s.
func scrubString(s string, pats []*pattern) string {
	for _, pt := range pats {
		if strings.Contains(s, string(pt.p)) {
			s = strings.ReplaceAll(s, string(pt.p), strings.Repeat(string(rune(scrubMask)), len(pt.p)))
		}
	}
	return s
}

// scrubHeader masks the patterns in a header's names and values, in place.
func scrubHeader(h http.Header, pats []*pattern) {
	if len(pats) == 0 {
		return
	}
	for k, vs := range h {
		for i, v := range vs {
			vs[i] = scrubString(v, pats)
		}
		if nk := scrubString(k, pats); nk != k {
			delete(h, k)
			h[nk] = append(h[nk], vs...)
		}
	}
}

// scrubber masks the patterns in a stream. It hands out every byte as soon
// as no pattern could begin in it: only a tail that is a prefix of a
// pattern waits for the next read (or the end), so streamed responses
// (server-sent events, WebSocket frames) keep flowing.
type scrubber struct {
	r     io.Reader
	pats  []*pattern
	state []int  // bytes of each pattern matched at the end of buf
	buf   []byte // scanned bytes not yet handed out
	ready int    // buf[:ready] may be handed out
	err   error
	onEOF func() // called once when r ends, before the end is passed on
}

func newScrubber(r io.Reader, pats []*pattern, onEOF func()) io.Reader {
	if len(pats) == 0 {
		return r
	}
	return &scrubber{r: r, pats: pats, state: make([]int, len(pats)), onEOF: onEOF}
}

func (s *scrubber) Read(p []byte) (int, error) {
	for s.ready == 0 {
		if s.err != nil {
			if len(s.buf) == 0 {
				return 0, s.err
			}
			// At the end a partial match is no secret: hand it out.
			s.ready = len(s.buf)
			break
		}
		// Read straight after the held bytes: no copy.
		want := max(len(p), 512)
		if cap(s.buf)-len(s.buf) < want {
			nb := make([]byte, len(s.buf), len(s.buf)+want)
			copy(nb, s.buf)
			s.buf = nb
		}
		base := len(s.buf)
		n, err := s.r.Read(s.buf[base : base+want])
		s.buf = s.buf[:base+n]
		s.scan(base)
		if err != nil {
			s.err = err
			if err == io.EOF && s.onEOF != nil {
				s.onEOF()
			}
		}
	}
	n := copy(p, s.buf[:s.ready])
	s.ready -= n
	if s.ready == 0 {
		s.buf = append(s.buf[:0], s.buf[n:]...)
	} else {
		s.buf = s.buf[n:]
	}
	return n, nil
}

// scan reads buf from base on, masks every pattern it completes and sets
// what may be handed out.
func (s *scrubber) scan(base int) {
	for end := base; end < len(s.buf); end++ {
		c := s.buf[end]
		for j, pt := range s.pats {
			k := s.state[j]
			for k > 0 && c != pt.p[k] {
				k = pt.fail[k-1]
			}
			if c == pt.p[k] {
				k++
			}
			if k == len(pt.p) {
				for m := end - len(pt.p) + 1; m <= end; m++ {
					s.buf[m] = scrubMask
				}
				k = pt.fail[k-1]
			}
			s.state[j] = k
		}
	}
	hold := 0
	for _, k := range s.state {
		hold = max(hold, k)
	}
	s.ready = len(s.buf) - hold
}
