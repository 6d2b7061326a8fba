package pgstore_test

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/harness/session/pgstore"
	"github.com/subflow-dev/subflow/harness/session/storetest"
)

var ctx = context.Background()

// testDSN returns the database the tests may use, or skips the test.
func testDSN(t testing.TB) string {
	dsn := os.Getenv("SUBFLOW_TEST_POSTGRES")
	if dsn == "" {
		t.Skip("SUBFLOW_TEST_POSTGRES is unset: run `eval \"$(.ci/postgres.sh)\"` (as root) or set it to a postgres:// URL of a database the tests may write to")
	}
	return dsn
}

// freshSchema creates an empty schema, dropped when the test ends, and returns a DSN whose
// search_path points at it, so every test starts from no tables at all.
func freshSchema(t testing.TB) string {
	dsn := testDSN(t)
	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer conn.Close(ctx)
	name := fmt.Sprintf("subflow_test_%08x", rand.Uint32())
	_, err = conn.Exec(ctx, "CREATE SCHEMA "+name)
	require.NoError(t, err)
	t.Cleanup(func() {
		conn, err := pgx.Connect(ctx, dsn)
		require.NoError(t, err)
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, "DROP SCHEMA "+name+" CASCADE")
		assert.NoError(t, err)
	})
	u, err := url.Parse(dsn)
	require.NoError(t, err)
	q := u.Query()
	q.Set("search_path", name)
	u.RawQuery = q.Encode()
	return u.String()
}

func open(t testing.TB, dsn string) *pgstore.Store {
	t.Helper()
	s, err := pgstore.Open(ctx, dsn)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, s.Close()) })
	return s
}

func TestContract(t *testing.T) {
	dsn := freshSchema(t)
	storetest.Run(t, func(t *testing.T) session.Store { return open(t, dsn) })
}

// TestLoadRejectsGaps: a log whose rows skip a seq or hold a negative one (written behind
// the store's back) is reported corrupt, not returned short or taken for the header; a whole
// log loads as written.
func TestLoadRejectsGaps(t *testing.T) {
	dsn := freshSchema(t)
	s := open(t, dsn)
	h := session.Header{ID: "s", Cwd: "/"}
	require.NoError(t, s.Create(ctx, h))
	events := []session.Event{
		{Seq: 0, Type: "user", Time: time.Unix(1, 0).UTC(), Data: []byte(`{"text":"a"}`)},
		{Seq: 1, Type: "assistant", Time: time.Unix(2, 0).UTC(), Data: []byte(`{"text":"b"}`)},
	}
	require.NoError(t, s.Append(ctx, "s", events...))
	gotH, got, err := s.Load(ctx, "s")
	require.NoError(t, err)
	assert.True(t, gotH.Equal(h), "header %+v", gotH)
	assert.Equal(t, events, got)

	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, `INSERT INTO subflow_events (session_id, seq, type, time, data) VALUES ('s', 3, 'user', now(), '{}')`)
	require.NoError(t, err)
	_, _, err = s.Load(ctx, "s")
	assert.ErrorIs(t, err, session.ErrCorrupt)
	assert.ErrorContains(t, err, "session: load s: ")
	assert.ErrorContains(t, err, "row has seq 3, want 2")

	_, err = conn.Exec(ctx, `DELETE FROM subflow_events WHERE seq = 3`)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `INSERT INTO subflow_events (session_id, seq, type, time, data) VALUES ('s', -1, 'user', now(), '{}')`)
	require.NoError(t, err)
	_, _, err = s.Load(ctx, "s")
	assert.ErrorIs(t, err, session.ErrCorrupt)
	assert.ErrorContains(t, err, "row has seq -1, want 0")

	_, _, err = s.Load(ctx, "absent")
	assert.ErrorIs(t, err, session.ErrNotFound)
}

func TestOpenCreatesSchemaOnceUnderRaces(t *testing.T) {
	dsn := freshSchema(t)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			s, err := pgstore.Open(ctx, dsn)
			if assert.NoError(t, err) {
				assert.NoError(t, s.Close())
			}
		})
	}
	wg.Wait()
	s := open(t, dsn)
	require.NoError(t, s.Create(ctx, session.Header{ID: "s", Cwd: "/"}))
}

func TestOpenErrorHidesPassword(t *testing.T) {
	_, err := pgstore.Open(ctx, "postgres://user:s3cret@127.0.0.1:1/db?connect_timeout=5")
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "s3cret")
	assert.Contains(t, err.Error(), "pgstore: open 127.0.0.1:1/db")
}

// leaseHolderEnv makes the test binary a lease holder: see TestLeaseDiesWithProcess.
const leaseHolderEnv = "SUBFLOW_TEST_LEASE_HOLDER_DSN"

// holderTTL is the lease ttl of the killed holder: its lease ends that long after its death.
const holderTTL = 300 * time.Millisecond

// TestLeaseDiesWithProcess kills a process holding a lease and takes the lease after it: the
// dead holder no longer renews, so the lease expires.
func TestLeaseDiesWithProcess(t *testing.T) {
	if dsn := os.Getenv(leaseHolderEnv); dsn != "" {
		s, err := pgstore.Open(ctx, dsn)
		require.NoError(t, err)
		_, err = session.TakeLease(ctx, s, "s", holderTTL)
		require.NoError(t, err)
		fmt.Println("leased")
		_, _ = bufio.NewReader(os.Stdin).ReadString('\n') // until killed
		return
	}
	dsn := freshSchema(t)
	s := open(t, dsn)
	require.NoError(t, s.Create(ctx, session.Header{ID: "s", Cwd: "/"}))

	cmd := exec.Command(os.Args[0], "-test.run=^TestLeaseDiesWithProcess$")
	cmd.Env = append(os.Environ(), leaseHolderEnv+"="+dsn)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	defer stdin.Close()
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	sc := bufio.NewScanner(out)
	for sc.Scan() && sc.Text() != "leased" {
	}
	require.Equal(t, "leased", sc.Text(), "the holder took the lease")

	done, cancel := context.WithCancel(ctx)
	cancel()
	_, err = session.TakeLease(done, s, "s", time.Minute)
	require.ErrorIs(t, err, session.ErrLeased, "the other process holds the lease")

	require.NoError(t, cmd.Process.Kill())
	_ = cmd.Wait()
	wait, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	lease, err := session.TakeLease(wait, s, "s", time.Minute)
	require.NoError(t, err, "the lease died with its holder")
	assert.Equal(t, int64(2), lease.Token(), "the dead holder had token 1")
	assert.NoError(t, lease.Release())
}

// TestLeasesShareThePool holds many more leases than the pool has connections, and appends
// under each: a lease is a row, not a connection, so the server sees at most the pool's
// connections whatever the number of drives.
func TestLeasesShareThePool(t *testing.T) {
	dsn := freshSchema(t)
	u, err := url.Parse(dsn)
	require.NoError(t, err)
	app := fmt.Sprintf("subflow_pool_%08x", rand.Uint32())
	q := u.Query()
	q.Set("pool_max_conns", "2")
	q.Set("application_name", app)
	u.RawQuery = q.Encode()
	s := open(t, u.String())

	const drives = 20
	var leases []*session.Lease
	for i := range drives {
		id := fmt.Sprintf("s%d", i)
		require.NoError(t, s.Create(ctx, session.Header{ID: id, Cwd: "/"}))
		lease, err := session.TakeLease(ctx, s, id, time.Minute)
		require.NoError(t, err)
		leases = append(leases, lease)
	}
	for i, lease := range leases {
		require.NoError(t, lease.Store().Append(ctx, fmt.Sprintf("s%d", i),
			session.Event{Seq: 0, Type: "test", Time: time.Now(), Data: []byte(`{}`)}))
	}
	admin, err := pgx.Connect(ctx, testDSN(t))
	require.NoError(t, err)
	defer admin.Close(ctx)
	var conns int
	require.NoError(t, admin.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1", app).Scan(&conns))
	assert.LessOrEqual(t, conns, 2, "%d leases held", drives)
	for _, lease := range leases {
		require.NoError(t, lease.Release())
	}
}
