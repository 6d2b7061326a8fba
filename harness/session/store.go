package session

import (
	"context"
	"errors"
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
