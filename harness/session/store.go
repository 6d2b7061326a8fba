package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Errors a Store returns, wrapped with the operation and the session id.
var (
	// ErrNotFound: no session with that id.
	ErrNotFound = errors.New("session not found")
	// ErrHeaderMismatch: Create found a session with the same id and a different header.
	ErrHeaderMismatch = errors.New("session exists with a different header")
	// ErrSeqConflict: an appended event's seq is not the next one of the log (another writer
	// appended first, or the caller lost track).
	ErrSeqConflict = errors.New("event seq is not the next in the session log")
)

// Store keeps sessions. Implementations are safe for concurrent use.
type Store interface {
	// Create creates the session if absent. Creating it again with an identical header is a
	// no-op (so retried creations are idempotent); a different header fails with
	// ErrHeaderMismatch. The header is validated first.
	Create(ctx context.Context, h Header) error

	// Append adds events to the end of the log. Each event's Seq must continue the log
	// densely, else nothing is written and the error wraps ErrSeqConflict. Appended events are
	// visible to Load and to subscribers at once, but durable only after Sync.
	Append(ctx context.Context, id string, events ...Event) error

	// Sync makes every appended event of the session durable (fsync for files). Agents call
	// it at step and turn boundaries.
	Sync(ctx context.Context, id string) error

	// Load returns the header and the whole log. A torn last record left by a crash is
	// ignored; everything before it is returned.
	Load(ctx context.Context, id string) (Header, []Event, error)

	// Subscribe calls fn with every event appended to the session from now on, in seq order,
	// from the appending goroutine; fn must not block or call back into the store. The
	// returned function unsubscribes and may be called more than once.
	Subscribe(id string, fn func(Event)) (unsubscribe func())

	// Remove deletes the session. Removing an absent session is not an error.
	Remove(ctx context.Context, id string) error
}

// Errors of the stores, wrapped with the operation and the session id.
var (
	// ErrInvalidID: the session id is empty, ".", "..", or holds a path separator or a NUL
	// byte (see ValidateID).
	ErrInvalidID = errors.New("invalid session id")
	// ErrCorrupt: a stored header or event line cannot be decoded, or the log's seqs are not
	// dense from 0. A torn last line left by a crash is not corruption.
	ErrCorrupt = errors.New("session log is corrupt")
	// ErrClosed: the store was closed.
	ErrClosed = errors.New("session store is closed")
)

// ValidateID returns an error wrapping ErrInvalidID if id is empty, ".", "..", or holds a path
// separator or a NUL byte. Every store applies these rules, so an id good for one store is good
// for all: such ids could not name a directory under a Store's root.
func ValidateID(id string) error {
	var reason string
	switch {
	case id == "":
		reason = "empty"
	case id == "." || id == "..":
		reason = "a relative path element"
	case strings.ContainsAny(id, `/\`):
		reason = "contains a path separator"
	case strings.IndexByte(id, 0) >= 0:
		reason = "contains a NUL byte"
	default:
		return nil
	}
	return fmt.Errorf("%w %q: %s", ErrInvalidID, id, reason)
}

// HeaderMismatchError returns the error Create fails with when the stored header have differs
// from the wanted one: it wraps ErrHeaderMismatch and shows both as JSON.
func HeaderMismatchError(have, want Header) error {
	haveJSON, _ := json.Marshal(have)
	wantJSON, _ := json.Marshal(want)
	return fmt.Errorf("%w: have %s, want %s", ErrHeaderMismatch, haveJSON, wantJSON)
}
