// Package pgstore is a session.Store on PostgreSQL, so workers on several hosts share sessions.
//
// Open creates its two tables if absent:
//
//	subflow_sessions (id text primary key, header jsonb)
//	subflow_events   (session_id text references subflow_sessions on delete cascade,
//	                  seq bigint, type text, time timestamptz, data json,
//	                  primary key (session_id, seq))
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
	"hash/fnv"
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
);`

// schemaLockKey is the advisory lock taken while creating the schema ("subflow\x00" as bytes).
const schemaLockKey = 0x737562666c6f7700

// Store is a session.Store and session.Leaser on PostgreSQL. It is safe for concurrent use.
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
	_ session.Store  = (*Store)(nil)
	_ session.Leaser = (*Store)(nil)
)

// Open connects to the database dsn names (a postgres:// URL or a key=value string, as pgx
// parses it), creates the schema if absent and returns the store. Close it when done.
func Open(ctx context.Context, dsn string) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("pgstore: open: %w", err) // pgx leaves the password out
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

// Close closes the connection pool. Leases are not affected: each holds its own connection.
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

// Append adds events to the end of the log (see session.Store). Subscribers are called after
// the commit, from this goroutine, in seq order.
func (s *Store) Append(ctx context.Context, id string, events ...session.Event) error {
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
	tag, err := s.pool.Exec(ctx, appendSQL, id, seqs, types, times, datas, first)
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
		return opErr("append", id, s.appendRefused(ctx, id, events[0]))
	}
	// Still under the session's lock, so batches of concurrent appenders reach subscribers in
	// seq order.
	s.subs.Publish(id, stored)
	return nil
}

// appendRefused says why appendSQL inserted nothing: no session, or another next seq.
func (s *Store) appendRefused(ctx context.Context, id string, e session.Event) error {
	var next *int64
	err := s.pool.QueryRow(ctx, `SELECT (SELECT coalesce(max(seq) + 1, 0) FROM subflow_events WHERE session_id = $1)
		FROM subflow_sessions WHERE id = $1`, id).Scan(&next)
	if errors.Is(err, pgx.ErrNoRows) {
		return session.ErrNotFound
	}
	if err != nil {
		return err
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

// Load returns the header and the whole log (see session.Store), read in one repeatable-read
// transaction so both come from the same moment. It fails with session.ErrCorrupt if the
// stored seqs are not dense from 0.
func (s *Store) Load(ctx context.Context, id string) (session.Header, []session.Event, error) {
	if err := session.ValidateID(id); err != nil {
		return session.Header{}, nil, opErr("load", id, err)
	}
	var h session.Header
	var events []session.Event
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		var err error
		if h, err = s.header(ctx, tx, id); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, "SELECT seq, type, time, data FROM subflow_events WHERE session_id = $1 ORDER BY seq", id)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var e session.Event
			var data []byte
			if err := rows.Scan(&e.Seq, &e.Type, &e.Time, &data); err != nil {
				return err
			}
			if want := int64(len(events)); e.Seq != want {
				return fmt.Errorf("%w: row has seq %d, want %d", session.ErrCorrupt, e.Seq, want)
			}
			e.Time = e.Time.UTC()
			e.Data = data
			events = append(events, e)
		}
		return rows.Err()
	})
	if err != nil {
		return session.Header{}, nil, opErr("load", id, err)
	}
	return h, events, nil
}

// Subscribe calls fn with every event appended to the session through this Store from now on
// (see session.Store). fn may call the returned unsubscribe itself and then gets no further
// event; once unsubscribe has returned, no Append that starts later calls fn.
func (s *Store) Subscribe(id string, fn func(session.Event)) (unsubscribe func()) {
	return s.subs.Subscribe(id, fn)
}

// Remove deletes the session's header and events in one statement (see session.Store).
func (s *Store) Remove(ctx context.Context, id string) error {
	if err := session.ValidateID(id); err != nil {
		return opErr("remove", id, err)
	}
	if _, err := s.pool.Exec(ctx, "DELETE FROM subflow_sessions WHERE id = $1", id); err != nil {
		return opErr("remove", id, err)
	}
	return nil
}

// Lease polling backoff: short at first, so a handover between drives is quick, and capped so
// a long wait costs the server little.
const (
	leaseFirstWait = 5 * time.Millisecond
	leaseMaxWait   = 250 * time.Millisecond
	// leaseFirstTryTimeout bounds connecting, the first try and the final check, which ignore
	// ctx's end.
	leaseFirstTryTimeout = 10 * time.Second
)

// Lease holds a session-level advisory lock (pg_advisory_lock on a 64-bit hash of the id) on
// a connection of its own, opened for the lease and closed by release (see session.Leaser).
// While another connection holds the lock it polls pg_try_advisory_lock with backoff until ctx
// ends. The server frees the lock when the holder's connection closes, so a crashed holder's
// lease ends as soon as the server sees the connection drop; the connection asks the server for
// TCP keepalives so that a vanished host is noticed within about a minute. A holder cut off
// that long may lose the lease without knowing: its appends still cannot interleave with the
// next holder's, which Append's seq check guarantees.
func (s *Store) Lease(ctx context.Context, id string) (release func() error, err error) {
	if err := session.ValidateID(id); err != nil {
		return nil, opErr("lease", id, err)
	}
	cfg := s.pool.Config().ConnConfig.Copy()
	cfg.RuntimeParams["tcp_keepalives_idle"] = "30"
	cfg.RuntimeParams["tcp_keepalives_interval"] = "10"
	cfg.RuntimeParams["tcp_keepalives_count"] = "3"
	// The first try ignores ctx's end, so a done ctx asks for the lease without waiting.
	first, cancel := context.WithTimeout(context.WithoutCancel(ctx), leaseFirstTryTimeout)
	defer cancel()
	conn, err := pgx.ConnectConfig(first, cfg)
	if err != nil {
		return nil, opErr("lease", id, err)
	}
	fail := func(err error) (func() error, error) {
		closeCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		conn.Close(closeCtx) // frees the lock if we got it
		return nil, opErr("lease", id, err)
	}
	key := leaseKey(id)
	wait := leaseFirstWait
	for try := first; ; try = ctx {
		var ok bool
		err := conn.QueryRow(try, "SELECT pg_try_advisory_lock($1)", key).Scan(&ok)
		if err != nil {
			if try == ctx && ctx.Err() != nil {
				return fail(fmt.Errorf("%w: %w", session.ErrLeased, ctx.Err()))
			}
			return fail(err)
		}
		if ok {
			break
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return fail(fmt.Errorf("%w: %w", session.ErrLeased, ctx.Err()))
		case <-timer.C:
		}
		wait = min(2*wait, leaseMaxWait)
	}
	// Checked under the lease, so a session removed while we waited is not granted.
	check, cancelCheck := context.WithTimeout(context.WithoutCancel(ctx), leaseFirstTryTimeout)
	defer cancelCheck()
	if err := s.exists(check, conn, id); err != nil {
		return fail(err)
	}
	return sync.OnceValue(func() error {
		closeCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err := conn.Exec(closeCtx, "SELECT pg_advisory_unlock($1)", key)
		if cerr := conn.Close(closeCtx); err == nil {
			err = cerr
		}
		if err != nil {
			return opErr("release lease", id, err)
		}
		return nil
	}), nil
}

// leaseKey maps a session id to its advisory lock key. Advisory locks are per database, so the
// hash covers a namespace too; two ids colliding would only share a lease.
func leaseKey(id string) int64 {
	h := fnv.New64a()
	h.Write([]byte("subflow/session-lease/"))
	h.Write([]byte(id))
	return int64(h.Sum64())
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
