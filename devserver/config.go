package devserver

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"

	"go.temporal.io/server/common/cluster"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/dynamicconfig"
	"go.temporal.io/server/common/membership/static"
	sqliteplugin "go.temporal.io/server/common/persistence/sql/sqlplugin/sqlite"
	"go.temporal.io/server/common/primitives"
	sqliteschema "go.temporal.io/server/schema/sqlite"
)

const (
	localhost   = "127.0.0.1"
	clusterName = "active"
	storeName   = "sqlite-default"
)

// ports are the listeners of one server. Only the frontend (gRPC and HTTP) and the UI bind
// Options.IP; history, matching and the worker service talk to each other over 127.0.0.1.
type ports struct {
	frontend, frontendHTTP, history, matching, worker int
	// ui is the Web UI's: Options.UIPort, or a free one for 0 (unused with NoUI).
	ui int
}

// pickPorts chooses every port Options leaves to the server. Each free port's listener stays
// open until all are chosen, and so do listeners on the ports the caller chose, so that the
// kernel never hands the same port out twice: the frontend picked before history, say, and
// the history service then bound first, would end the process when the frontend could not
// listen.
func pickPorts(opts Options) (ports, error) {
	p := ports{frontend: opts.Port, ui: opts.UIPort}
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	if p.frontend != 0 {
		l, err := net.Listen("tcp", net.JoinHostPort(opts.IP, strconv.Itoa(p.frontend)))
		if err != nil {
			return p, fmt.Errorf("devserver: frontend: %w", err)
		}
		held = append(held, l)
	}
	// A busy UI port the caller chose is reported when the UI starts, which names it.
	if p.ui > 0 {
		if l, err := net.Listen("tcp", net.JoinHostPort(opts.IP, strconv.Itoa(p.ui))); err == nil {
			held = append(held, l)
		}
	}
	var err error
	pick := func(ip string, port *int) {
		if err != nil || *port != 0 {
			return
		}
		var l net.Listener
		if l, err = net.Listen("tcp", net.JoinHostPort(ip, "0")); err != nil {
			err = fmt.Errorf("devserver: pick a free port on %s: %w", ip, err)
			return
		}
		held = append(held, l)
		*port = l.Addr().(*net.TCPAddr).Port
	}
	pick(opts.IP, &p.frontend)
	pick(opts.IP, &p.frontendHTTP)
	pick(localhost, &p.history)
	pick(localhost, &p.matching)
	pick(localhost, &p.worker)
	pick(opts.IP, &p.ui)
	return p, err
}

// checkFree reports whether ip:port can be bound now. The server and the UI exit the process
// (log.Fatal) when they cannot listen, so ports the caller chose are checked first, to fail
// with an error instead. A port taken between the check and the bind still ends the process.
func checkFree(ip string, port int) error {
	l, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(port)))
	if err != nil {
		return err
	}
	return l.Close()
}

// dialHost is the address clients use to reach a listener bound to ip.
func dialHost(ip string) string {
	if parsed := net.ParseIP(ip); parsed != nil && parsed.IsUnspecified() {
		return localhost
	}
	return ip
}

// memoryDBs numbers the in-memory databases of this process. The SQLite plugin shares one
// connection per DSN process-wide and never closes it, so each server needs its own name.
var memoryDBs atomic.Int64

// prepareDB returns the SQLite config for opts and makes sure the database has the schema and
// the namespace, with SearchAttributes, before the server opens it. A namespace that already
// exists is left as it is.
func prepareDB(opts Options) (*config.SQL, error) {
	sqlConf := &config.SQL{PluginName: sqliteplugin.PluginName}
	if opts.DBFile == "" {
		sqlConf.ConnectAttributes = map[string]string{"mode": "memory", "cache": "shared"}
		sqlConf.DatabaseName = fmt.Sprintf("devserver-%d-%d", os.Getpid(), memoryDBs.Add(1))
	} else {
		// A write-ahead log, synced at every commit as the default rollback journal is: that
		// journal writes each changed page twice and creates, syncs and deletes a file at
		// every commit, and a batch ran 1.55–1.83 × slower on it (docs/benchmarks.md, "The
		// embedded server's file store"). FILE-wal and FILE-shm sit beside FILE from the
		// first start on; the log holds the latest commits until SQLite copies them in.
		sqlConf.ConnectAttributes = map[string]string{"mode": "rwc", "journal_mode": "wal", "synchronous": "full"}
		sqlConf.DatabaseName = opts.DBFile
		_, err := os.Stat(opts.DBFile)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			// Fail here on a missing directory: SQLite's own error would not name the path.
			if _, err := os.Stat(filepath.Dir(opts.DBFile)); err != nil {
				return nil, fmt.Errorf("devserver: database %s: %w", opts.DBFile, err)
			}
			if err := sqliteschema.SetupSchema(sqlConf); err != nil {
				return nil, fmt.Errorf("devserver: create schema in %s: %w", opts.DBFile, err)
			}
		case err != nil:
			return nil, fmt.Errorf("devserver: database %s: %w", opts.DBFile, err)
		}
	}
	ns, err := sqliteschema.NewNamespaceConfig(clusterName, opts.Namespace, false, SearchAttributes)
	if err != nil {
		return nil, fmt.Errorf("devserver: namespace %s: %w", opts.Namespace, err)
	}
	if err := sqliteschema.CreateNamespaces(sqlConf, ns); err != nil {
		return nil, fmt.Errorf("devserver: register namespace %s: %w", opts.Namespace, err)
	}
	return sqlConf, nil
}

// serverConfig is the static configuration of a single-host cluster on SQLite, as the
// Temporal CLI's start-dev builds it: one history shard, no archival, no metrics listener.
func serverConfig(opts Options, p ports, sqlConf *config.SQL, stls *serverTLS) *config.Config {
	frontendAddr := net.JoinHostPort(dialHost(opts.IP), strconv.Itoa(p.frontend))
	var conf config.Config
	conf.Global.Membership.BroadcastAddress = localhost
	conf.Persistence.DefaultStore = storeName
	conf.Persistence.VisibilityStore = storeName
	conf.Persistence.NumHistoryShards = 1
	conf.Persistence.DataStores = map[string]config.DataStore{storeName: {SQL: sqlConf}}
	conf.ClusterMetadata = &cluster.Config{
		FailoverVersionIncrement: 10,
		MasterClusterName:        clusterName,
		CurrentClusterName:       clusterName,
		ClusterInformation: map[string]cluster.ClusterInformation{
			clusterName: {
				Enabled:                true,
				InitialFailoverVersion: 1,
				RPCAddress:             frontendAddr,
				HTTPAddress:            net.JoinHostPort(dialHost(opts.IP), strconv.Itoa(p.frontendHTTP)),
			},
		},
	}
	conf.DCRedirectionPolicy.Policy = "noop"
	conf.Services = map[string]config.Service{
		string(primitives.FrontendService): {RPC: config.RPC{
			GRPCPort: p.frontend, HTTPPort: p.frontendHTTP, BindOnIP: opts.IP,
		}},
		string(primitives.HistoryService):  {RPC: config.RPC{GRPCPort: p.history, BindOnIP: localhost}},
		string(primitives.MatchingService): {RPC: config.RPC{GRPCPort: p.matching, BindOnIP: localhost}},
		string(primitives.WorkerService):   {RPC: config.RPC{GRPCPort: p.worker, BindOnIP: localhost}},
	}
	conf.Archival.History.State = "disabled"
	conf.Archival.Visibility.State = "disabled"
	conf.NamespaceDefaults.Archival.History.State = "disabled"
	conf.NamespaceDefaults.Archival.Visibility.State = "disabled"
	conf.PublicClient.HostPort = frontendAddr
	stls.apply(&conf)
	return &conf
}

// staticHosts replaces ringpop membership: every service is one known local host, which
// saves the membership ports and the ring join at start.
func staticHosts(opts Options, p ports) map[primitives.ServiceName]static.Hosts {
	addr := func(host string, port int) static.Hosts {
		return static.SingleLocalHost(net.JoinHostPort(host, strconv.Itoa(port)))
	}
	return map[primitives.ServiceName]static.Hosts{
		primitives.FrontendService: addr(dialHost(opts.IP), p.frontend),
		primitives.HistoryService:  addr(localhost, p.history),
		primitives.MatchingService: addr(localhost, p.matching),
		primitives.WorkerService:   addr(localhost, p.worker),
	}
}

// dynamicConfig holds the CLI dev server's overrides: a smaller host-level history cache (the
// default 128k entries is sized for production hosts) and a visibility rate limit high enough
// for the Web UI and batch progress polling (default 10/s); and the latency settings below.
func dynamicConfig() dynamicconfig.StaticClient {
	return dynamicconfig.StaticClient{
		dynamicconfig.HistoryCacheHostLevelMaxSize.Key():                 8096,
		dynamicconfig.FrontendMaxNamespaceVisibilityRPSPerInstance.Key(): 100,

		// History loads queue tasks from the database at most MaxPollRPS times a second per
		// queue (default 20, sized for hundreds of shards). With our single shard every write
		// that creates a transfer task (schedule a workflow or activity task, close a run)
		// asks for a load, so past the limiter's burst each workflow task waited for the next
		// 50 ms token: ~45 ms between WorkflowTaskScheduled and WorkflowTaskStarted. Loads are
		// triggered by new tasks, so a high cap costs nothing while idle. Timer (timers,
		// retries, timeouts) and visibility (UI and List freshness) queues have the same cap.
		dynamicconfig.TransferProcessorMaxPollRPS.Key():   1000,
		dynamicconfig.TimerProcessorMaxPollRPS.Key():      1000,
		dynamicconfig.VisibilityProcessorMaxPollRPS.Key(): 1000,

		// Each queue keeps the tasks it executed in memory until its next checkpoint
		// (default every 30 s) and walks all of them whenever it loads new tasks, which the
		// cap above lets it do on every write: after 3,000 one-activity workflows in a row
		// the walk took 18 % of the server's CPU. A checkpoint every second bounds it to a
		// second of tasks, for one small write of the shard's ack levels.
		dynamicconfig.TransferProcessorUpdateAckInterval.Key():   time.Second,
		dynamicconfig.TimerProcessorUpdateAckInterval.Key():      time.Second,
		dynamicconfig.VisibilityProcessorUpdateAckInterval.Key(): time.Second,

		// A timer task (an activity retry, a timeout, a workflow timer) whose fire time is less
		// than this ahead of the timer queue's last read is moved to that read + this shift
		// (default 1 s), so it is never written behind the reader's cursor. A killed worker's
		// drive times out on the heartbeat timer, which makes the queue read; the retry's 200 ms
		// backoff was then pushed to 1 s after the timeout. With one shard and one host there is
		// no clock skew between writer and reader to cover; 100 ms keeps a margin for the write.
		dynamicconfig.TimerProcessorMaxTimeShift.Key(): 100 * time.Millisecond,

		// One partition per task queue: with the default four, a task written to a partition
		// no poller waits on is forwarded to the root partition, one more matching hop.
		dynamicconfig.MatchingNumTaskqueueReadPartitions.Key():  1,
		dynamicconfig.MatchingNumTaskqueueWritePartitions.Key(): 1,

		// How long history holds a long poll for new events, which is how the client waits
		// for a run's result (default 20 s). Each poll subscribes to history's event notifier
		// through a one-slot channel that drops a notification when full; a stale
		// notification in that slot can push out the one for the close event, and the
		// client then waits out the whole poll although the run is closed. A short poll
		// bounds that wait; the client re-polls at once, so the cost is one cheap call a
		// second per waiting client.
		dynamicconfig.HistoryLongPollExpirationInterval.Key(): time.Second,

		// Worker Versioning (docs/deployment.md) is on by default in this server; a version
		// that is no longer current reports whether pinned runs are still open on it
		// ("draining", then "drained") from a visibility check every 3 minutes, after a
		// 3-minute grace for visibility to catch up, sized for a production cluster. The
		// embedded server's visibility lags by a fraction of a second (VisibilityProcessor
		// settings above), so a few seconds of each show a rollout's drain on a laptop, and
		// in the tests, while it happens.
		dynamicconfig.VersionDrainageStatusRefreshInterval.Key():       2 * time.Second,
		dynamicconfig.VersionDrainageStatusVisibilityGracePeriod.Key(): 2 * time.Second,

		// Task-queue fairness: a batch's tasks carry its id as their fairness key and the
		// user's weight (`starter batch --weight`), and batches sharing workers progress in
		// proportion to their weights instead of first come, first served. Priority (a run
		// ahead of batch tasks) is on by default; fairness is off by default, and needs the
		// fairness task tables, which this server's SQLite schema has (docs/deployment.md).
		dynamicconfig.MatchingEnableFairness.Key(): true,
		// A child's start (a background task of the history service) must take its parent's
		// lock, behind every workflow task and child result of that parent; by default it
		// gives up after 500 ms and is tried again, so under a batch some children lose that
		// race two or more times and a task's p99 grows to 1.8 × its p50 (5 × on the
		// PostgreSQL cluster). Waiting in line up to 2 s serves the children in turn at the
		// same speed: p99 1.1–1.7 × p50 (docs/deployment.md, "A child's start and its
		// parent's lock").
		dynamicconfig.HistoryCacheNonUserContextLockTimeout.Key(): 2 * time.Second,
		// A start that still lost the lock after those 2 s waits in the parent's own queue
		// instead of being tried again later: 3,000-task batches ran at 0.86-0.99 x the
		// engine's ceiling with p99 1.85-2.00 x p50, against 0.78-0.81 x and 1.87-2.35 x
		// without (docs/deployment.md, "A child's start and its parent's lock").
		dynamicconfig.TaskSchedulerEnableExecutionQueueScheduler.Key(): true,
		// A worker that stops gracefully leaves the task queue's pollers at once (default:
		// it stays listed until its last poll is minutes old), so `starter deployment
		// set-current` and a batch about to move to a new build see that its build has no
		// worker any more (subflow.ReadQueueVersions).
		dynamicconfig.EnableCancelWorkerPollsOnShutdown.Key(): true,
	}
}
