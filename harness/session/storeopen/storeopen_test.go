package storeopen_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subflow-dev/subflow/harness/session/filestore"
	"github.com/subflow-dev/subflow/harness/session/pgstore"
	"github.com/subflow-dev/subflow/harness/session/storeopen"
)

var ctx = context.Background()

func TestOpenFileStore(t *testing.T) {
	root := filepath.Join(t.TempDir(), "sessions")
	s, err := storeopen.Open(ctx, root)
	require.NoError(t, err)
	defer s.Close()
	fs, ok := s.(*filestore.Store)
	require.True(t, ok, "a directory opens a file store, got %T", s)
	assert.Equal(t, root, fs.Root())

	_, err = storeopen.Open(ctx, "")
	require.Error(t, err)
}

func TestOpenPostgres(t *testing.T) {
	// A URL never falls back to a directory, even when the database is unreachable.
	_, err := storeopen.Open(ctx, "PostgreSQL://nobody@127.0.0.1:1/db?connect_timeout=5")
	require.ErrorContains(t, err, "pgstore: open")
	assert.NoDirExists(t, "PostgreSQL:")

	dsn := os.Getenv("SUBFLOW_TEST_POSTGRES")
	if dsn == "" {
		t.Skip("SUBFLOW_TEST_POSTGRES is unset: run `eval \"$(.ci/postgres.sh)\"` (as root) or set it to a postgres:// URL of a database the tests may write to")
	}
	s, err := storeopen.Open(ctx, dsn)
	require.NoError(t, err)
	defer s.Close()
	assert.IsType(t, &pgstore.Store{}, s)
}
