package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
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

// Owned is a session as the retention cleanup sees it (docs/durability.md): the workflows
// that own it, when one was last recorded, and the bytes it holds.
type Owned struct {
	ID string `json:"id"`
	// Owners are the workflow ids recorded for the session, sorted, each once.
	Owners []string `json:"owners"`
	// Touched is when the latest owner was recorded, by the store's clock.
	Touched time.Time `json:"touched"`
	// Size is what the session holds in the store, in bytes: its header, its events and its
	// lease as the store keeps them (files, or column values for a database).
	Size int64 `json:"size"`
}

// OwnedQuery selects the sessions Retainer.Owned lists.
type OwnedQuery struct {
	// After lists only ids that sort after it, byte-wise ("" lists from the first).
	After string
	// Before lists only sessions whose every owner was recorded before it.
	Before time.Time
	// Limit is the most sessions listed; it must be positive.
	Limit int
}

// Retainer is implemented by stores whose sessions the retention cleanup removes once the
// workflows that own them are gone (docs/durability.md). A session's owners are recorded
// before the session is written to, so a session a run writes is never without an owner;
// sessions no owner was ever recorded for (older ones, or written outside the activities)
// are never listed, hence never removed.
type Retainer interface {
	Store

	// Own records owner (a workflow id) as an owner of session id, at the store's now, and
	// keeps any earlier owner. It may precede Create, and recording the same owner again only
	// updates the time. Remove forgets the owners with the session.
	Own(ctx context.Context, id, owner string) error

	// Owned lists, in id order, the sessions with owners that q selects.
	Owned(ctx context.Context, q OwnedQuery) ([]Owned, error)

	// RemoveOwned removes the session and its owners, as Remove does, unless an owner was
	// recorded after touched (a run that started to use it since it was listed): then it
	// removes nothing and reports false. A session with no owners is not removed.
	RemoveOwned(ctx context.Context, id string, touched time.Time) (bool, error)
}

// ValidateOwnedQuery returns an error naming the field if q cannot be listed.
func ValidateOwnedQuery(q OwnedQuery) error {
	if q.Limit < 1 {
		return fmt.Errorf("session: list owned sessions: limit %d must be positive", q.Limit)
	}
	return nil
}
