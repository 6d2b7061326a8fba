package inprocess

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/harness/tools"
	"github.com/subflow-dev/subflow/subagent"
)

// TestReadOnlyParentsChildrenCannotWrite: the parent's read-only sandbox travels with spawn
// and fork; the child's write_file is refused and no file appears.
func TestReadOnlyParentsChildrenCannotWrite(t *testing.T) {
	for _, provider := range []string{subagent.ProviderSpawn, subagent.ProviderFork} {
		t.Run(provider, func(t *testing.T) {
			f := newFixture(t)
			f.script(t, "child.json",
				`{"toolCalls": [{"name": "write_file", "input": {"path": "escaped.txt", "content": "written"}}]}`,
				`{"text": "tried"}`)
			parent := f.parent(t, session.Header{Route: route("child.json")},
				event(t, session.TypeSandboxMode, session.SandboxModeData{Mode: tools.SandboxReadOnly, Source: "user"}))
			r, err := f.host.Start(context.Background(), request(parent, "write a file"), StartOptions{Provider: provider})
			require.NoError(t, err)
			res := result(t, r)
			assert.Equal(t, subagent.StopCompleted, res.StopReason)
			results := toolResults(t, f.events(t, r.ID()))
			require.Len(t, results, 1)
			assert.True(t, results[0].IsError)
			assert.Contains(t, session.JoinText(results[0].Content), "write_file needs approval while the sandbox is read-only")
			_, err = os.Stat(filepath.Join(f.cwd, "escaped.txt"))
			assert.True(t, errors.Is(err, os.ErrNotExist), "no file was written")
		})
	}
}

func TestUnknownParentSandboxModeIsRejected(t *testing.T) {
	f := newFixture(t)
	parent := f.parent(t, session.Header{Route: route("child.json")},
		event(t, session.TypeSandboxMode, session.SandboxModeData{Mode: "Read-Only", Source: "user"}))
	before := f.sessions(t)
	_, err := f.host.Start(context.Background(), request(parent, "go"), StartOptions{})
	require.EqualError(t, err, `inprocess: create: parent `+parent+`: unknown sandbox mode "Read-Only"; known modes: read-only, workspace-write`)
	assert.Equal(t, before, f.sessions(t), "nothing was created")
}

// TestMaxDepthBoundsTheSubtree: a run started with maxDepth 1 records the cap in its child's
// header, so a delegation from the child — whatever maxDepth that one asks for — cannot
// create a depth-2 grandchild.
func TestMaxDepthBoundsTheSubtree(t *testing.T) {
	f := newFixture(t)
	f.script(t, "child.json", `{"text": "done"}`)
	parent := f.parent(t, session.Header{Route: route("child.json")})
	req := request(parent, "go")
	one := int64(1)
	req.MaxDepth = &one
	created, err := f.host.Create(context.Background(), CreateRequest{Provider: subagent.ProviderSpawn, Request: req})
	require.NoError(t, err)
	hd := f.header(t, created.ChildID)
	require.NotNil(t, hd.MaxDepth, "the cap is in the child's header, for every nested path")
	assert.Equal(t, int64(1), *hd.MaxDepth)

	for _, asked := range []*int64{nil, ptr(int64(3))} {
		nested := request(created.ChildID, "go deeper")
		nested.MaxDepth = asked
		_, err = f.host.Create(context.Background(), CreateRequest{Provider: subagent.ProviderSpawn, Request: nested})
		var de *subagent.DepthError
		require.ErrorAs(t, err, &de)
		assert.EqualError(t, err, "subagent depth 2 exceeds maxDepth 1")
	}

	// A tighter request cap wins over an inherited looser one.
	three := int64(3)
	req.MaxDepth = &three
	mid, err := f.host.Create(context.Background(), CreateRequest{Provider: subagent.ProviderSpawn, Request: req})
	require.NoError(t, err)
	nested := request(mid.ChildID, "go deeper")
	nested.MaxDepth = ptr(int64(1))
	_, err = f.host.Create(context.Background(), CreateRequest{Provider: subagent.ProviderSpawn, Request: nested})
	assert.EqualError(t, err, "subagent depth 2 exceeds maxDepth 1")
}

func ptr[T any](v T) *T { return &v }
