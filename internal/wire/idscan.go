package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
)

// MaxIDBytes is the longest request id a peer answers with: a request whose id is longer
// (or is not a string or a number) but that cannot be served is answered with a null id, as
// JSON-RPC 2.0 asks when the id cannot be detected. Echoing a longer id could make the
// answer itself a frame the other side discards.
const MaxIDBytes = 1024

// Error codes of JSON-RPC 2.0 for requests that cannot be served as they are.
const (
	CodeParseError     = -32700
	CodeInvalidRequest = -32600
)

// idScanner finds the top-level "id" and "method" members of a JSON object fed to it in
// pieces, without decoding the rest: one pass over the bytes, constant memory besides the
// id (at most MaxIDBytes kept), and no recursion, so a frame too long to decode, or nested
// deeper than encoding/json accepts, still yields the id to answer with.
type idScanner struct {
	started, bad, ended bool
	depth               int
	inString, escaped   bool
	// At depth 1: expectKey until a key's string, then inKey while it is read, then the
	// member's value follows its colon.
	expectKey, inKey bool
	key              []byte // the key being read, at most maxKeyBytes kept
	keyLong          bool
	inValue          bool   // reading the value of a depth-1 member
	capture          bool   // that member is "id"
	id               []byte // the id's raw bytes so far
	idLong           bool
	sawID, sawMethod bool
	idDone           bool
}

func (s *idScanner) reset() { *s = idScanner{key: s.key[:0], id: s.id[:0]} }

func (s *idScanner) feed(p []byte) {
	for _, c := range p {
		if s.bad || s.ended {
			return
		}
		s.step(c)
	}
}

func (s *idScanner) keep(c byte) {
	if !s.capture {
		return
	}
	if len(s.id) >= MaxIDBytes {
		s.idLong = true
		return
	}
	s.id = append(s.id, c)
}

func (s *idScanner) step(c byte) {
	if !s.started {
		switch c {
		case ' ', '\t', '\r', '\n':
		case '{':
			s.started, s.depth, s.expectKey = true, 1, true
		default:
			s.bad = true
		}
		return
	}
	if s.inString {
		switch {
		case s.escaped:
			s.escaped = false
		case c == '\\':
			s.escaped = true
		case c == '"':
			s.inString = false
		}
		if s.inKey {
			if !s.inString {
				s.inKey = false
				return
			}
			if len(s.key) >= maxKeyBytes {
				s.keyLong = true
			} else {
				s.key = append(s.key, c)
			}
			return
		}
		s.keep(c)
		return
	}
	switch c {
	case ' ', '\t', '\r', '\n':
		return
	case '"':
		s.inString = true
		if s.depth == 1 && s.expectKey {
			s.expectKey, s.inKey, s.keyLong, s.key = false, true, false, s.key[:0]
			return
		}
		s.keep(c)
	case ':':
		if s.depth == 1 && !s.inValue {
			name := s.keyName()
			s.inValue = true
			s.capture = strings.EqualFold(name, "id")
			if s.capture {
				s.sawID, s.idDone, s.idLong, s.id = true, false, false, s.id[:0]
			}
			s.sawMethod = s.sawMethod || strings.EqualFold(name, "method")
			return
		}
		s.keep(c)
	case ',':
		if s.depth == 1 {
			s.endValue()
			s.expectKey = true
			return
		}
		s.keep(c)
	case '{', '[':
		s.keep(c)
		s.depth++
	case '}', ']':
		s.depth--
		if s.depth == 0 {
			s.endValue()
			s.ended = true
			return
		}
		s.keep(c)
	default:
		s.keep(c)
	}
}

// maxKeyBytes is the most of a key the scanner keeps: enough for "method" with every letter
// escaped (\u006d…), six bytes each.
const maxKeyBytes = 6 * len("method")

// keyName is the key just read as encoding/json reads it (its escapes decoded), "" for one
// too long to be "id" or "method". The scanner then matches it without regard to case, as the
// decoder matches a member to a field (strings.EqualFold), so that both find the same
// request.
func (s *idScanner) keyName() string {
	if s.keyLong {
		return ""
	}
	if bytes.IndexByte(s.key, '\\') < 0 {
		return string(s.key)
	}
	var name string
	// The closing quote was not kept; the key's bytes are those of a JSON string's body.
	if json.Unmarshal(append(append([]byte{'"'}, s.key...), '"'), &name) != nil {
		return ""
	}
	return name
}

func (s *idScanner) endValue() {
	if s.capture {
		s.idDone = true
	}
	s.inValue, s.capture = false, false
}

// request reports whether the scanned object has the top-level members of a request (an id
// and a method), and the id to answer it with: its raw bytes when they are a JSON string or
// number of at most MaxIDBytes, else null.
func (s *idScanner) request() (json.RawMessage, bool) {
	if s.bad || !s.started || !s.sawID || !s.sawMethod {
		return nil, false
	}
	id := s.id
	if s.idLong || !s.idDone || len(id) == 0 || !(id[0] == '"' || id[0] == '-' || id[0] >= '0' && id[0] <= '9') || !json.Valid(id) {
		return json.RawMessage("null"), true
	}
	return json.RawMessage(append([]byte(nil), id...)), true
}

// InFlight is the set of request ids a peer is serving, compared as written. A request
// whose id is in flight already is refused (Begin) instead of run a second time: its answer
// could not be told from the first one's.
type InFlight struct {
	mu  sync.Mutex
	ids map[string]struct{}
}

// Begin records id as in flight, or returns the error to answer the request with when a
// request with the same id is in flight already.
func (f *InFlight) Begin(id json.RawMessage) *Error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, dup := f.ids[string(id)]; dup {
		return &Error{Code: CodeInvalidRequest, Message: fmt.Sprintf("duplicate request id %s: a request with this id is still in flight", clipID(id))}
	}
	if f.ids == nil {
		f.ids = map[string]struct{}{}
	}
	f.ids[string(id)] = struct{}{}
	return nil
}

// End removes id once its answer was written.
func (f *InFlight) End(id json.RawMessage) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.ids, string(id))
}

// clipID shortens an id for a message.
func clipID(id json.RawMessage) string {
	if len(id) > 64 {
		return string(id[:64]) + "…"
	}
	return string(id)
}
