package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/subflow-dev/subflow/harness/session"
)

// Own records owner as an owner of session id at the database's now (see session.Retainer).
func (s *Store) Own(ctx context.Context, id, owner string) error {
	if err := session.ValidateID(id); err != nil {
		return opErr("own", id, err)
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO subflow_owners (session_id, owner, touched) VALUES ($1, $2, now())
		ON CONFLICT (session_id, owner) DO UPDATE SET touched = excluded.touched`, id, owner)
	return opErr("own", id, err)
}

// ownedSQL lists the sessions with owners after $1 whose latest owner was recorded before $2,
// with their sizes: the header's and the events' encodings, as the database returns them.
const ownedSQL = `
SELECT o.session_id, array_agg(o.owner ORDER BY o.owner), max(o.touched),
	coalesce((SELECT octet_length(h.header::text) FROM subflow_sessions h WHERE h.id = o.session_id), 0) +
	coalesce((SELECT sum(octet_length(e.data::text) + octet_length(e.type)) FROM subflow_events e WHERE e.session_id = o.session_id), 0)
FROM subflow_owners o
WHERE o.session_id > $1
GROUP BY o.session_id
HAVING max(o.touched) < $2
ORDER BY o.session_id
LIMIT $3`

// Owned lists the sessions with owners that q selects (see session.Retainer).
func (s *Store) Owned(ctx context.Context, q session.OwnedQuery) ([]session.Owned, error) {
	if err := session.ValidateOwnedQuery(q); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, ownedSQL, q.After, q.Before, q.Limit)
	if err != nil {
		return nil, fmt.Errorf("session: list owned sessions: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (session.Owned, error) {
		var o session.Owned
		err := row.Scan(&o.ID, &o.Owners, &o.Touched, &o.Size)
		o.Touched = o.Touched.UTC()
		return o, err
	})
	if err != nil {
		return nil, fmt.Errorf("session: list owned sessions: %w", err)
	}
	return out, nil
}

// RemoveOwned removes the session unless an owner was recorded after touched (see
// session.Retainer), in one transaction that locks the session's owner rows: an Own of a
// known owner waits for it and then records the owner anew.
func (s *Store) RemoveOwned(ctx context.Context, id string, touched time.Time) (bool, error) {
	if err := session.ValidateID(id); err != nil {
		return false, opErr("remove owned", id, err)
	}
	var removed bool
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, "SELECT touched FROM subflow_owners WHERE session_id = $1 FOR UPDATE", id)
		if err != nil {
			return err
		}
		times, err := pgx.CollectRows(rows, pgx.RowTo[time.Time])
		if err != nil {
			return err
		}
		if len(times) == 0 {
			return nil
		}
		for _, t := range times {
			if t.After(touched) {
				return nil
			}
		}
		if _, err := tx.Exec(ctx, removeSQL, id); err != nil {
			return err
		}
		removed = true
		return nil
	})
	if err != nil {
		return false, opErr("remove owned", id, err)
	}
	return removed, nil
}
