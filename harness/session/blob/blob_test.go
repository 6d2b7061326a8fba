package blob_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/harness/session/blob"
	"github.com/subflow-dev/subflow/harness/session/filestore"
)

func newStore(t *testing.T, own func(context.Context, string) error) *blob.Store {
	t.Helper()
	sessions, err := filestore.New(t.TempDir())
	require.NoError(t, err)
	return blob.New(sessions, own)
}

func TestPutGetInChunks(t *testing.T) {
	ctx := context.Background()
	var owned []string
	s := newStore(t, func(_ context.Context, name string) error { owned = append(owned, name); return nil })
	n, err := s.Put(ctx, "payload-x", "payload/chunk", []byte("hello world"), 4)
	require.NoError(t, err)
	assert.Equal(t, 3, n)
	assert.Equal(t, []string{"payload-x"}, owned)

	got, err := s.Get(ctx, "payload-x", "payload/chunk", 0, 3)
	require.NoError(t, err)
	assert.Equal(t, "hello world", string(got))
	got, err = s.Get(ctx, "payload-x", "payload/chunk", 1, 1)
	require.NoError(t, err)
	assert.Equal(t, "o wo", string(got))

	var outside *blob.RangeError
	_, err = s.Get(ctx, "payload-x", "payload/chunk", 2, 2)
	require.ErrorAs(t, err, &outside)
	assert.Equal(t, 3, outside.Chunks)
	var notChunk *blob.ChunkError
	_, err = s.Get(ctx, "payload-x", "other/kind", 0, 1)
	require.ErrorAs(t, err, &notChunk)

	n, err = s.Put(ctx, "payload-x", "payload/chunk", []byte("new"), 4)
	require.NoError(t, err)
	assert.Equal(t, 1, n, "Put replaces the blob")
	got, err = s.Get(ctx, "payload-x", "payload/chunk", 0, 1)
	require.NoError(t, err)
	assert.Equal(t, "new", string(got))

	require.NoError(t, s.Delete(ctx, "payload-x"))
	require.NoError(t, s.Delete(ctx, "payload-x"), "deleting an absent blob")
	_, err = s.Get(ctx, "payload-x", "payload/chunk", 0, 0)
	assert.ErrorIs(t, err, session.ErrNotFound)
}

func TestPutValueKeepsTheFirstCopy(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, nil)
	require.NoError(t, s.PutValue(ctx, "page-1", "batch-page", []string{"a", "b"}))
	require.NoError(t, s.PutValue(ctx, "page-1", "batch-page", []string{"c"}))
	var got []string
	require.NoError(t, s.GetValue(ctx, "page-1", &got))
	assert.Equal(t, []string{"a", "b"}, got)

	var n int
	var undecodable *blob.DecodeError
	require.ErrorAs(t, s.GetValue(ctx, "page-1", &n), &undecodable)
	assert.ErrorIs(t, s.GetValue(ctx, "page-2", &got), session.ErrNotFound)
}

func TestOwnErrorEndsTheWrite(t *testing.T) {
	ctx := context.Background()
	boom := errors.New("boom")
	s := newStore(t, func(context.Context, string) error { return boom })
	_, err := s.Put(ctx, "payload-y", "payload/chunk", []byte("x"), 4)
	assert.Same(t, boom, err)
	assert.Same(t, boom, s.PutValue(ctx, "page-y", "batch-page", 1))
	_, err = s.Get(ctx, "payload-y", "payload/chunk", 0, 0)
	assert.ErrorIs(t, err, session.ErrNotFound, "nothing was written")
}
