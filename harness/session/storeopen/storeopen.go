// Package storeopen chooses the session store a program uses from one string, so the worker,
// the starter and the tests read the choice the same way.
package storeopen

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/harness/session/filestore"
	"github.com/subflow-dev/subflow/harness/session/pgstore"
)

// EnvVar names the environment variable that chooses a program's session store (worker/app
// reads it): a postgres:// or postgresql:// URL, or a key/value connection string
// (`host=… dbname=…`), shares sessions through PostgreSQL (workers on several hosts);
// anything else is the directory of a file store.
const EnvVar = "SUBFLOW_SESSION_STORE"

// Store is what Open returns: a session store that grants leases and must be closed.
type Store interface {
	session.Store
	session.Leaser
	Close() error
}

// Open opens the store spec names. A spec starting with postgres:// or postgresql:// (in any
// case), or a key/value connection string (IsPostgres), opens the Postgres store on that
// database (pgstore.Open); any other spec is the root directory of a file store. Errors never
// carry a password: name the store in them with Describe.
func Open(ctx context.Context, spec string) (Store, error) {
	if IsPostgres(spec) {
		return pgstore.Open(ctx, spec)
	}
	if spec == "" {
		return nil, fmt.Errorf("storeopen: open: the spec is empty (want a directory or a postgres:// URL)")
	}
	return filestore.New(spec)
}

// keyValue matches the start of a key/value connection string as libpq and pgx read it: a
// keyword, optional blanks, then `=`. A directory name never starts so in practice; one that
// does is read as a connection string, which then fails to parse or connect, and is never
// created as a directory.
var keyValue = regexp.MustCompile(`^\s*[A-Za-z_]+\s*=`)

// IsPostgres reports whether spec names a Postgres database: a postgres:// or postgresql://
// URL (in any case), or a key/value connection string (`host=db user=u password=…`).
func IsPostgres(spec string) bool {
	scheme, _, ok := strings.Cut(spec, "://")
	if ok && (strings.EqualFold(scheme, "postgres") || strings.EqualFold(scheme, "postgresql")) {
		return true
	}
	return keyValue.MatchString(spec)
}

// Describe names the store spec names for logs and errors, without any password
// (pgstore.Redact); a directory is returned as it is.
func Describe(spec string) string {
	if !IsPostgres(spec) {
		return spec
	}
	return pgstore.Redact(spec)
}
