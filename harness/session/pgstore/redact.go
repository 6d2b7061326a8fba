package pgstore

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// redacted replaces a password in Redact's output.
const redacted = "xxxxx"

// kvPassword matches the value of a password keyword of a key/value connection string:
// quoted (with backslash escapes) or up to the next blank.
var kvPassword = regexp.MustCompile(`(?i)(\bpassword\s*=\s*)('(?:[^'\\]|\\.)*'|\S*)`)

// Redact returns the connection string dsn without any password, for logs and errors: the
// userinfo password and a `password` query parameter of a URL, the `password` keyword of a
// key/value string. pgx's own redaction misses the query parameter.
func Redact(dsn string) string {
	if !strings.Contains(dsn, "://") {
		return kvPassword.ReplaceAllString(dsn, "${1}"+redacted)
	}
	u, err := url.Parse(dsn)
	if err != nil {
		// Not a URL Go reads: name the kind of store without repeating any of it.
		return "a postgres:// URL that does not parse"
	}
	q := u.Query()
	for k := range q {
		if strings.EqualFold(k, "password") {
			q.Set(k, redacted)
		}
	}
	u.RawQuery = q.Encode()
	return u.Redacted()
}

// parseError is a connection string pgx refused, without the string itself: pgx's message
// repeats it with the userinfo password hidden but a `password` query parameter shown.
func parseError(dsn string, err error) error {
	var pe *pgconn.ParseConfigError
	if errors.As(err, &pe) && pe.Unwrap() != nil {
		err = pe.Unwrap()
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err // its message repeats the whole URL
	}
	msg := strings.ReplaceAll(err.Error(), dsn, Redact(dsn))
	msg = kvPassword.ReplaceAllString(msg, "${1}"+redacted)
	return fmt.Errorf("pgstore: open %s: cannot parse the connection string: %s", Redact(dsn), msg)
}
