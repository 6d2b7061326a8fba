package devserver_test

import (
	"context"
	"database/sql"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enums "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/server/common/config"
	sqliteschema "go.temporal.io/server/schema/sqlite"

	"github.com/subflow-dev/subflow/devserver"
)

func start(t testing.TB, opts devserver.Options) *devserver.Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := devserver.Start(ctx, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Stop() })
	return s
}

func dial(t *testing.T, s *devserver.Server) client.Client {
	t.Helper()
	c, err := s.NewClient(context.Background())
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

// requireSearchAttributes checks that every R-75 attribute is registered with its type.
func requireSearchAttributes(t *testing.T, c client.Client, namespace string) {
	t.Helper()
	resp, err := c.OperatorService().ListSearchAttributes(context.Background(),
		&operatorservice.ListSearchAttributesRequest{Namespace: namespace})
	require.NoError(t, err)
	for name, want := range devserver.SearchAttributes {
		assert.Equal(t, want, resp.GetCustomAttributes()[name], "search attribute %s", name)
	}
}

func TestStartInMemoryWithUI(t *testing.T) {
	s := start(t, devserver.Options{})
	assert.True(t, strings.HasPrefix(s.FrontendAddr(), "127.0.0.1:"), s.FrontendAddr())
	assert.True(t, strings.HasPrefix(s.UIAddr(), "http://127.0.0.1:"), s.UIAddr())

	c := dial(t, s)
	ns, err := c.WorkflowService().DescribeNamespace(context.Background(),
		&workflowservice.DescribeNamespaceRequest{Namespace: "default"})
	require.NoError(t, err)
	assert.Equal(t, enums.NAMESPACE_STATE_REGISTERED, ns.GetNamespaceInfo().GetState())
	requireSearchAttributes(t, c, "default")

	resp, err := http.Get(s.UIAddr() + "/")
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Contains(t, resp.Header.Get("Content-Type"), "text/html")
	assert.Contains(t, strings.ToLower(string(body)), "<html")

	require.NoError(t, s.Stop())
	require.NoError(t, s.Stop(), "second Stop")
	_, err = http.Get(s.UIAddr() + "/")
	assert.Error(t, err, "UI still serving after Stop")
}

func TestRestartOnDBFile(t *testing.T) {
	db := filepath.Join(t.TempDir(), "dev.db")
	opts := devserver.Options{DBFile: db, UIPort: devserver.NoUI, Namespace: "subflow-test"}
	label := temporal.NewSearchAttributeKeyString("SubagentLabel")

	first := start(t, opts)
	assert.Empty(t, first.UIAddr())
	c, err := first.NewClient(context.Background())
	require.NoError(t, err)
	requireSearchAttributes(t, c, "subflow-test")
	// No worker: the run just waits for one, which is enough to find it after the restart.
	run, err := c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{
		ID:                    "persisted",
		TaskQueue:             "devserver-test",
		TypedSearchAttributes: temporal.NewSearchAttributes(label.ValueSet("kept")),
	}, "NoSuchWorkflow")
	require.NoError(t, err)
	// A database whose namespace lacks an attribute (made by an older build or by hand) gets
	// it back at the next start.
	_, err = c.OperatorService().RemoveSearchAttributes(context.Background(),
		&operatorservice.RemoveSearchAttributesRequest{
			Namespace: "subflow-test", SearchAttributes: []string{"SubagentDepth"},
		})
	require.NoError(t, err)
	list, err := c.OperatorService().ListSearchAttributes(context.Background(),
		&operatorservice.ListSearchAttributesRequest{Namespace: "subflow-test"})
	c.Close()
	require.NoError(t, err)
	require.NotContains(t, list.GetCustomAttributes(), "SubagentDepth")
	require.NoError(t, first.Stop())

	second := start(t, opts)
	c = dial(t, second)
	requireSearchAttributes(t, c, "subflow-test")
	desc, err := c.DescribeWorkflowExecution(context.Background(), "persisted", run.GetRunID())
	require.NoError(t, err)
	assert.Equal(t, enums.WORKFLOW_EXECUTION_STATUS_RUNNING, desc.GetWorkflowExecutionInfo().GetStatus())
	require.NoError(t, second.Stop())
	require.NoError(t, second.Stop(), "second Stop")
}

// The file store keeps a write-ahead log: on SQLite's default rollback journal a batch on
// --db ran at 0.6 of the speed it has with the log (docs/benchmarks.md, "The embedded
// server's file store").
func TestDBFileKeepsAWriteAheadLog(t *testing.T) {
	fresh := filepath.Join(t.TempDir(), "dev.db")
	start(t, devserver.Options{DBFile: fresh, UIPort: devserver.NoUI, Namespace: "subflow-test"})
	assert.Equal(t, "wal", journalMode(t, fresh))

	// A file an earlier build made, on the rollback journal, is moved to the log at start.
	old := filepath.Join(t.TempDir(), "old.db")
	require.NoError(t, sqliteschema.SetupSchema(&config.SQL{PluginName: "sqlite", DatabaseName: old,
		ConnectAttributes: map[string]string{"mode": "rwc"}}))
	require.Equal(t, "delete", journalMode(t, old))
	start(t, devserver.Options{DBFile: old, UIPort: devserver.NoUI, Namespace: "subflow-test"})
	assert.Equal(t, "wal", journalMode(t, old))
}

// journalMode reads the journal mode of the SQLite file db through a connection of its own
// (the server's SQLite driver is linked in).
func journalMode(t *testing.T, db string) string {
	t.Helper()
	conn, err := sql.Open("sqlite", "file:"+db+"?mode=ro")
	require.NoError(t, err)
	defer conn.Close()
	var mode string
	require.NoError(t, conn.QueryRow("PRAGMA journal_mode").Scan(&mode))
	return mode
}

// A busy port the caller chose is an error, not the process exit the server and the UI
// would make of it.
func TestStartFailsOnBusyPort(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port

	_, err = devserver.Start(context.Background(), devserver.Options{UIPort: port})
	require.ErrorContains(t, err, "devserver: UI: listen tcp 127.0.0.1:"+strconv.Itoa(port))
	_, err = devserver.Start(context.Background(), devserver.Options{Port: port})
	require.ErrorContains(t, err, "devserver: frontend: listen tcp 127.0.0.1:"+strconv.Itoa(port))
}

func TestSearchAttributeCommand(t *testing.T) {
	assert.Equal(t, "temporal operator search-attribute create --namespace default"+
		" --name SubagentBatch --type Keyword --name SubagentChild --type Keyword"+
		" --name SubagentDepth --type Int --name SubagentInputTokens --type Int"+
		" --name SubagentLabel --type Text --name SubagentModel --type Keyword"+
		" --name SubagentOutputTokens --type Int --name SubagentParent --type Keyword"+
		" --name SubagentProvider --type Keyword --name SubagentRetryOf --type Keyword"+
		" --name SubagentStopReason --type Keyword",
		devserver.SearchAttributeCommand("default"))
}

func TestSearchAttributesFitSQLVisibility(t *testing.T) {
	limits := map[enums.IndexedValueType]int{
		enums.INDEXED_VALUE_TYPE_KEYWORD: 10,
		enums.INDEXED_VALUE_TYPE_INT:     3,
		enums.INDEXED_VALUE_TYPE_TEXT:    3,
	}
	count := map[enums.IndexedValueType]int{}
	for _, typ := range devserver.SearchAttributes {
		count[typ]++
	}
	for typ, n := range count {
		assert.LessOrEqual(t, n, limits[typ], "%s attributes", typ)
	}
}

// BenchmarkStart measures Start in memory: from the call until the frontend serves, the
// search attributes are checked and the UI, if any, answers. Stop is not timed.
func BenchmarkStart(b *testing.B) {
	for _, ui := range []struct {
		name string
		port int
	}{{"ui", 0}, {"noui", devserver.NoUI}} {
		b.Run(ui.name, func(b *testing.B) {
			for b.Loop() {
				s, err := devserver.Start(context.Background(), devserver.Options{UIPort: ui.port})
				require.NoError(b, err)
				b.StopTimer()
				require.NoError(b, s.Stop())
				b.StartTimer()
			}
		})
	}
}

// A second server on a database file in use refuses at once, naming the file, and the
// first keeps serving (before the lock, the second started and the first then failed to
// take its shards).
func TestSecondServerOnTheSameDBRefuses(t *testing.T) {
	db := filepath.Join(t.TempDir(), "dev.db")
	opts := devserver.Options{DBFile: db, UIPort: devserver.NoUI, Namespace: "subflow-test"}
	first := start(t, opts)
	defer first.Stop()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	second, err := devserver.Start(ctx, opts)
	if second != nil {
		second.Stop()
	}
	require.ErrorIs(t, err, devserver.ErrDBInUse)
	assert.Contains(t, err.Error(), db)

	c := dial(t, first)
	_, err = c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: "subflow-test"})
	require.NoError(t, err, "the first server still serves")
}
