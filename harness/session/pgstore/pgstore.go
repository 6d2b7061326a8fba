// Package pgstore is a session.Store on PostgreSQL, so workers on several hosts share sessions.
//
// Open creates its two tables if absent:
//
//	subflow_sessions (id text primary key, header jsonb)
//	subflow_events   (session_id text references subflow_sessions on delete cascade,
//	                  seq bigint, type text, time timestamptz, data json,
//	                  primary key (session_id, seq))
//	subflow_leases   (session_id text primary key references subflow_sessions on delete cascade,
//	                  token bigint, expires timestamptz)
//	subflow_owners   (session_id text collate "C", owner text, touched timestamptz,
//	                  primary key (session_id, owner))
//
// A session's owners (session.Retainer) may be recorded before the session exists, so their
// table has no foreign key: Remove deletes them with the session.
//
// Event data is json, not jsonb, so Load returns the bytes that were appended (jsonb would
// reorder keys and reject the \u0000 a tool's output may hold). Event times are kept to the
// microsecond; subscribers get them as stored.
package pgstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/subflow-dev/subflow/harness/session"
)

// schema is created under a transaction-scoped advisory lock: concurrent CREATE TABLE IF NOT
// EXISTS of the same table can otherwise fail on the system catalogs' unique indexes.
const schema = `
CREATE TABLE IF NOT EXISTS subflow_sessions (
	id     text PRIMARY KEY,
	header jsonb NOT NULL
);
CREATE TABLE IF NOT EXISTS subflow_events (
	session_id text NOT NULL REFERENCES subflow_sessions (id) ON DELETE CASCADE,
	seq        bigint NOT NULL,
	type       text NOT NULL,
	time       timestamptz NOT NULL,
	data       json NOT NULL,
	PRIMARY KEY (session_id, seq)
);
CREATE TABLE IF NOT EXISTS subflow_leases (
	session_id text PRIMARY KEY REFERENCES subflow_sessions (id) ON DELETE CASCADE,
	token      bigint NOT NULL,
	expires    timestamptz NOT NULL
);
CREATE TABLE IF NOT EXISTS subflow_owners (
	session_id text COLLATE "C" NOT NULL,
	owner      text NOT NULL,
	touched    timestamptz NOT NULL,
	PRIMARY KEY (session_id, owner)
);`

// schemaLockKey is the advisory lock taken while creating the schema ("subflow\x00" as bytes).
const schemaLockKey = 0x737562666c6f7700

// Store is a session.Store and session.Leaser on PostgreSQL. It is safe for concurrent use.
// Every operation, leases included, borrows a connection of one pool (bounded by the DSN's
// pool_max_conns, default the larger of 4 and the number of CPUs) for one statement: a lease
// is a row, not a connection, so any number of drives share the pool.
//
// Append is one INSERT, so one transaction: it writes the batch only if its first seq is the
// next of the log as committed, and the (session_id, seq) primary key turns any race between
// writers into a unique violation, reported as session.ErrSeqConflict. Two writers can never
// interleave, in one process or on many hosts. Commits are durable, so Sync only checks that the
// session exists.
//
// Subscribers see the events appended through this Store, in seq order; appends made by other
// processes are not delivered live (they are in Load). Operations use the caller's context.
type Store struct {
	pool *pgxpool.Pool

	mu    sync.Mutex
	locks map[string]*sessionLock // serialize this Store's appends per session

	subs session.Subscribers
}

var (
	_ session.Store    = (*Store)(nil)
	_ session.Leaser   = (*Store)(nil)
	_ session.Retainer = (*Store)(nil)
)

// Open connects to the database dsn names (a postgres:// URL or a key=value string, as pgx
// parses it), creates the schema if absent and returns the store. Close it when done.
func Open(ctx context.Context, dsn string) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, parseError(dsn, err)
	}
	where := fmt.Sprintf("%s:%d/%s", cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Database)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("pgstore: open %s: %w", where, err)
	}
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", int64(schemaLockKey)); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, schema)
		return err
	})
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("pgstore: open %s: create schema: %w", where, err)
	}
	return &Store{
		pool:  pool,
		locks: make(map[string]*sessionLock),
	}, nil
}

// Close closes the connection pool. Leases are rows: they stay until released or expired.
func (s *Store) Close() error {
	s.pool.Close()
	return nil
}

// Create creates the session if absent (see session.Store). Headers are compared by value.
func (s *Store) Create(ctx context.Context, h session.Header) error {
	if err := session.ValidateID(h.ID); err != nil {
		return opErr("create", h.ID, err)
	}
	if err := h.Validate(); err != nil {
		return opErr("create", h.ID, err)
	}
	data, err := json.Marshal(h)
	if err != nil {
		return opErr("create", h.ID, err)
	}
	// A session removed between the insert and the read is created again.
	for {
		tag, err := s.pool.Exec(ctx,
			"INSERT INTO subflow_sessions (id, header) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING", h.ID, data)
		if err != nil {
			return opErr("create", h.ID, err)
		}
		if tag.RowsAffected() == 1 {
			return nil
		}
		have, err := s.header(ctx, s.pool, h.ID)
		if errors.Is(err, session.ErrNotFound) {
			continue
		}
		if err != nil {
			return opErr("create", h.ID, err)
		}
		if !have.Equal(h) {
			return opErr("create", h.ID, session.HeaderMismatchError(have, h))
		}
		return nil
	}
}

// appendSQL inserts the batch if its first seq ($6) is the next of the committed log.
const appendSQL = `
INSERT INTO subflow_events (session_id, seq, type, time, data)
SELECT $1, e.seq, e.type, e.time, e.data::json
FROM unnest($2::bigint[], $3::text[], $4::timestamptz[], $5::text[]) AS e (seq, type, time, data)
WHERE (SELECT coalesce(max(seq) + 1, 0) FROM subflow_events WHERE session_id = $1) = $6`

// fencedAppendSQL is appendSQL that also requires the session's lease token to be $7. It
// locks the lease row (FOR SHARE), so a takeover (an UPDATE of the row) waits for it to
// commit, and an append that waited for a takeover sees the new token.
const fencedAppendSQL = `
WITH fence AS (SELECT token FROM subflow_leases WHERE session_id = $1 FOR SHARE)
INSERT INTO subflow_events (session_id, seq, type, time, data)
SELECT $1, e.seq, e.type, e.time, e.data::json
FROM unnest($2::bigint[], $3::text[], $4::timestamptz[], $5::text[]) AS e (seq, type, time, data)
WHERE (SELECT coalesce(max(seq) + 1, 0) FROM subflow_events WHERE session_id = $1) = $6
AND (SELECT token FROM fence) = $7`

// Append adds events to the end of the log (see session.Store). Subscribers are called after
// the commit, from this goroutine, in seq order.
func (s *Store) Append(ctx context.Context, id string, events ...session.Event) error {
	return s.append(ctx, id, nil, events)
}

// AppendFenced appends if token is the session's lease token (see session.Leaser).
func (s *Store) AppendFenced(ctx context.Context, id string, token int64, events ...session.Event) error {
	return s.append(ctx, id, &token, events)
}

// append is Append, fenced by *token when token is not nil.
func (s *Store) append(ctx context.Context, id string, token *int64, events []session.Event) error {
	if err := session.ValidateID(id); err != nil {
		return opErr("append", id, err)
	}
	if len(events) == 0 {
		return nil
	}
	first := events[0].Seq
	seqs := make([]int64, len(events))
	types := make([]string, len(events))
	times := make([]time.Time, len(events))
	datas := make([]string, len(events))
	stored := make([]session.Event, len(events))
	var buf bytes.Buffer
	for i, e := range events {
		if e.Seq != first+int64(i) {
			return opErr("append", id, fmt.Errorf("%w: event %d (%s) has seq %d, want %d",
				session.ErrSeqConflict, i, e.Type, e.Seq, first+int64(i)))
		}
		buf.Reset()
		if err := json.Compact(&buf, e.Data); err != nil {
			return opErr("append", id, fmt.Errorf("encode %s event seq %d: %w", e.Type, e.Seq, err))
		}
		e.Time = e.Time.Truncate(time.Microsecond).UTC()
		e.Data = json.RawMessage(bytes.Clone(buf.Bytes()))
		seqs[i], types[i], times[i], datas[i], stored[i] = e.Seq, e.Type, e.Time, string(e.Data), e
	}

	unlock := s.lock(id)
	defer unlock()
	var tag pgconn.CommandTag
	var err error
	if token == nil {
		tag, err = s.pool.Exec(ctx, appendSQL, id, seqs, types, times, datas, first)
	} else {
		tag, err = s.pool.Exec(ctx, fencedAppendSQL, id, seqs, types, times, datas, first, *token)
	}
	if err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) {
			switch pgErr.Code {
			case "23505": // unique_violation: another writer committed these seqs first
				err = fmt.Errorf("%w: another writer appended seq %d..%d", session.ErrSeqConflict, first, first+int64(len(events))-1)
			case "23503": // foreign_key_violation: no such session
				err = session.ErrNotFound
			}
		}
		return opErr("append", id, err)
	}
	if tag.RowsAffected() == 0 {
		return opErr("append", id, s.appendRefused(ctx, id, token, events[0]))
	}
	// Still under the session's lock, so batches of concurrent appenders reach subscribers in
	// seq order.
	s.subs.Publish(id, stored)
	return nil
}

// appendRefused says why appendSQL or fencedAppendSQL inserted nothing: no session, a stale
// token, or another next seq.
func (s *Store) appendRefused(ctx context.Context, id string, token *int64, e session.Event) error {
	var next *int64
	var current *int64
	err := s.pool.QueryRow(ctx, `SELECT (SELECT coalesce(max(seq) + 1, 0) FROM subflow_events WHERE session_id = $1),
		(SELECT token FROM subflow_leases WHERE session_id = $1)
		FROM subflow_sessions WHERE id = $1`, id).Scan(&next, &current)
	if errors.Is(err, pgx.ErrNoRows) {
		return session.ErrNotFound
	}
	if err != nil {
		return err
	}
	if token != nil && (current == nil || *current != *token) {
		return &session.FencedError{Token: *token}
	}
	return fmt.Errorf("%w: event 0 (%s) has seq %d, want %d", session.ErrSeqConflict, e.Type, e.Seq, *next)
}

// Sync returns nil if the session exists: every committed Append is already durable.
func (s *Store) Sync(ctx context.Context, id string) error {
	if err := session.ValidateID(id); err != nil {
		return opErr("sync", id, err)
	}
	if err := s.exists(ctx, s.pool, id); err != nil {
		return opErr("sync", id, err)
	}
	return nil
}

// loadSQL reads a session's header (the row of part 0) and its log (part 1) in one
// statement, so both come from the statement's one snapshot, in one round trip: a
// transaction would take four (begin, two queries, commit), and a batch task loads its
// sessions six times.
const loadSQL = `
SELECT 0 AS part, 0::bigint AS seq, '' AS type, 'epoch'::timestamptz AS time, header::json AS data FROM subflow_sessions WHERE id = $1
UNION ALL
SELECT 1, seq, type, time, data FROM subflow_events WHERE session_id = $1
ORDER BY part, seq`

// Load returns the header and the whole log (see session.Store), read by one statement so
// both come from the same moment. It fails with session.ErrCorrupt if the stored seqs are not
// dense from 0.
func (s *Store) Load(ctx context.Context, id string) (session.Header, []session.Event, error) {
	if err := session.ValidateID(id); err != nil {
		return session.Header{}, nil, opErr("load", id, err)
	}
	h, events, err := s.load(ctx, id)
	if err != nil {
		return session.Header{}, nil, opErr("load", id, err)
	}
	return h, events, nil
}

func (s *Store) load(ctx context.Context, id string) (session.Header, []session.Event, error) {
	rows, err := s.pool.Query(ctx, loadSQL, id)
	if err != nil {
		return session.Header{}, nil, err
	}
	defer rows.Close()
	var h session.Header
	var events []session.Event
	found := false
	for rows.Next() {
		var part int
		var e session.Event
		var data []byte
		if err := rows.Scan(&part, &e.Seq, &e.Type, &e.Time, &data); err != nil {
			return session.Header{}, nil, err
		}
		if !found {
			if part != 0 {
				break // no header: no session (the foreign key keeps no event without one)
			}
			if err := json.Unmarshal(data, &h); err != nil {
				return session.Header{}, nil, fmt.Errorf("%w: header: %v", session.ErrCorrupt, err)
			}
			found = true
			continue
		}
		if want := int64(len(events)); e.Seq != want {
			return session.Header{}, nil, fmt.Errorf("%w: row has seq %d, want %d", session.ErrCorrupt, e.Seq, want)
		}
		e.Time = e.Time.UTC()
		e.Data = data
		events = append(events, e)
	}
	if err := rows.Err(); err != nil {
		return session.Header{}, nil, err
	}
	if !found {
		return session.Header{}, nil, session.ErrNotFound
	}
	return h, events, nil
}

// Subscribe calls fn with every event appended to the session through this Store from now on
// (see session.Store). fn may call the returned unsubscribe itself and then gets no further
// event; once unsubscribe has returned, no Append that starts later calls fn.
func (s *Store) Subscribe(id string, fn func(session.Event)) (unsubscribe func()) {
	return s.subs.Subscribe(id, fn)
}

// removeSQL deletes a session's header, events, lease and owners in one statement.
const removeSQL = `WITH owners AS (DELETE FROM subflow_owners WHERE session_id = $1)
DELETE FROM subflow_sessions WHERE id = $1`

// Remove deletes the session's header, events, lease and owners in one statement (see
// session.Store).
func (s *Store) Remove(ctx context.Context, id string) error {
	if err := session.ValidateID(id); err != nil {
		return opErr("remove", id, err)
	}
	if _, err := s.pool.Exec(ctx, removeSQL, id); err != nil {
		return opErr("remove", id, err)
	}
	return nil
}

// tryLeaseSQL takes the lease row when it is free (absent, released or expired by the
// database's clock) with the next token; it returns no row when the lease is live or the
// session is missing. The row is kept on release, so tokens only grow.
const tryLeaseSQL = `
INSERT INTO subflow_leases AS l (session_id, token, expires)
SELECT id, 1, now() + $2 * interval '1 microsecond' FROM subflow_sessions WHERE id = $1
ON CONFLICT (session_id) DO UPDATE SET token = l.token + 1, expires = excluded.expires
WHERE l.expires <= now()
RETURNING token`

// TryLease grants the lease if its row says it is free (see session.Leaser).
func (s *Store) TryLease(ctx context.Context, id string, ttl time.Duration) (int64, error) {
	if err := session.ValidateID(id); err != nil {
		return 0, opErr("lease", id, err)
	}
	var token int64
	err := s.pool.QueryRow(ctx, tryLeaseSQL, id, ttl.Microseconds()).Scan(&token)
	if errors.Is(err, pgx.ErrNoRows) {
		if err = s.exists(ctx, s.pool, id); err == nil {
			err = session.ErrLeased
		}
	}
	if err != nil {
		return 0, opErr("lease", id, err)
	}
	return token, nil
}

// RenewLease extends the lease of token (see session.Leaser).
func (s *Store) RenewLease(ctx context.Context, id string, token int64, ttl time.Duration) error {
	if err := session.ValidateID(id); err != nil {
		return opErr("renew lease", id, err)
	}
	tag, err := s.pool.Exec(ctx, `UPDATE subflow_leases SET expires = now() + $3 * interval '1 microsecond'
		WHERE session_id = $1 AND token = $2`, id, token, ttl.Microseconds())
	if err == nil && tag.RowsAffected() == 0 {
		err = s.fenced(ctx, id, token)
	}
	return opErr("renew lease", id, err)
}

// ReleaseLease ends the lease of token (see session.Leaser).
func (s *Store) ReleaseLease(ctx context.Context, id string, token int64) error {
	if err := session.ValidateID(id); err != nil {
		return opErr("release lease", id, err)
	}
	_, err := s.pool.Exec(ctx, "UPDATE subflow_leases SET expires = '-infinity' WHERE session_id = $1 AND token = $2", id, token)
	return opErr("release lease", id, err)
}

// fenced says why a statement guarded by token changed nothing: no session, or a stale token.
func (s *Store) fenced(ctx context.Context, id string, token int64) error {
	if err := s.exists(ctx, s.pool, id); err != nil {
		return err
	}
	return &session.FencedError{Token: token}
}

// querier is what header and exists need of a pool, a transaction or a connection.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func (s *Store) header(ctx context.Context, q querier, id string) (session.Header, error) {
	var data []byte
	err := q.QueryRow(ctx, "SELECT header FROM subflow_sessions WHERE id = $1", id).Scan(&data)
	if errors.Is(err, pgx.ErrNoRows) {
		return session.Header{}, session.ErrNotFound
	}
	if err != nil {
		return session.Header{}, err
	}
	var h session.Header
	if err := json.Unmarshal(data, &h); err != nil {
		return session.Header{}, fmt.Errorf("%w: header: %v", session.ErrCorrupt, err)
	}
	return h, nil
}

func (s *Store) exists(ctx context.Context, q querier, id string) error {
	var one int
	err := q.QueryRow(ctx, "SELECT 1 FROM subflow_sessions WHERE id = $1", id).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return session.ErrNotFound
	}
	return err
}

// sessionLock is a per-session mutex, dropped from the map when no Append uses it.
type sessionLock struct {
	mu   sync.Mutex
	refs int
}

// lock serializes this Store's appends to one session and returns the unlock function.
func (s *Store) lock(id string) (unlock func()) {
	s.mu.Lock()
	l := s.locks[id]
	if l == nil {
		l = &sessionLock{}
		s.locks[id] = l
	}
	l.refs++
	s.mu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		s.mu.Lock()
		if l.refs--; l.refs == 0 {
			delete(s.locks, id)
		}
		s.mu.Unlock()
	}
}

func opErr(op, id string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("session: %s %s: %w", op, id, err)
}
