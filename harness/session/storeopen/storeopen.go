// Package storeopen chooses the session store a program uses from one string, so the worker,
// the starter and the tests read the choice the same way.
package storeopen

import (
	"context"
	"fmt"
	"strings"

	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/harness/session/filestore"
	"github.com/subflow-dev/subflow/harness/session/pgstore"
)

// EnvVar names the environment variable that chooses a program's session store (worker/app
// reads it): a postgres:// or postgresql:// URL
// shares sessions through PostgreSQL (workers on several hosts), anything else is the
// directory of a file store.
const EnvVar = "SUBFLOW_SESSION_STORE"

// Store is what Open returns: a session store that grants leases and must be closed.
type Store interface {
	session.Store
	session.Leaser
	Close() error
}

// Open opens the store spec names. A spec starting with postgres:// or postgresql:// (in any
// case) opens the Postgres store on that database (pgstore.Open); any other spec is the root
// directory of a file store. Key=value connection strings are not recognized: use a URL.
func Open(ctx context.Context, spec string) (Store, error) {
	if isPostgres(spec) {
		return pgstore.Open(ctx, spec)
	}
	if spec == "" {
		return nil, fmt.Errorf("storeopen: open: the spec is empty (want a directory or a postgres:// URL)")
	}
	return filestore.New(spec)
}

func isPostgres(spec string) bool {
	scheme, _, ok := strings.Cut(spec, "://")
	return ok && (strings.EqualFold(scheme, "postgres") || strings.EqualFold(scheme, "postgresql"))
}
