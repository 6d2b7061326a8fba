package app

import (
	"context"
	"fmt"
	"time"

	"github.com/subflow-dev/subflow/harness/session/storeopen"
)

// openTimeout bounds connecting to a Postgres store at startup.
const openTimeout = 30 * time.Second

// openStore opens the session store opts.SessionStore names, and returns it with its close
// function.
func openStore(opts Options) (storeopen.Store, func() error, error) {
	ctx, cancel := context.WithTimeout(context.Background(), openTimeout)
	defer cancel()
	s, err := storeopen.Open(ctx, opts.SessionStore)
	if err != nil {
		return nil, nil, fmt.Errorf("app: open session store %s: %w", storeopen.Describe(opts.SessionStore), err)
	}
	return s, s.Close, nil
}
