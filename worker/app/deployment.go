package app

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.uber.org/zap"

	"github.com/subflow-dev/subflow"
	"github.com/subflow-dev/subflow/subagent"
	"github.com/subflow-dev/subflow/workflows"
)

// routeCheckTimeout bounds the look at the routing (its deployment's or its task queue's) a
// worker takes at start.
const routeCheckTimeout = 5 * time.Second

// warnIfIdle logs a warning when the worker, as the routing stands, would receive no new
// runs: an unversioned worker on a queue whose runs go to a Worker Deployment version, or a
// versioned one whose build is neither current nor ramping nor draining (a new build waits
// for `starter deployment set-current`; docs/deployment.md, "Rolling out a new build"). It
// returns the warning's message, "" when there is none.
//
// A versioned worker reads its deployment's routing, which a set-current changes before it
// returns; the task queue learns it a moment later, so a worker started right after a
// set-current would read the queue's previous routing and warn wrongly. An unversioned worker
// names no deployment and can only read the queue.
func warnIfIdle(ctx context.Context, c client.Client, opts Options) string {
	ctx, cancel := context.WithTimeout(ctx, routeCheckTimeout)
	defer cancel()
	var current, ramping *worker.WorkerDeploymentVersion
	var rampingPercentage float32
	var drainage client.WorkerDeploymentVersionDrainageStatus
	v := worker.WorkerDeploymentVersion{DeploymentName: opts.DeploymentName, BuildID: opts.BuildID}
	if opts.DeploymentName == "" {
		q, err := subflow.ReadQueueVersions(ctx, c, opts.TaskQueue)
		if err != nil {
			opts.Logger.Info("could not read the task queue's versions", zap.String("taskQueue", opts.TaskQueue), zap.Error(err))
			return ""
		}
		if !q.Versioned() {
			return ""
		}
		current, ramping, rampingPercentage = q.Current, q.Ramping, q.RampingPercentage
	} else {
		desc, err := c.WorkerDeploymentClient().GetHandle(v.DeploymentName).Describe(ctx, client.WorkerDeploymentDescribeOptions{})
		var nf *serviceerror.NotFound
		switch {
		case errors.As(err, &nf):
			// No worker of the deployment has polled yet: nothing routes to it.
		case err != nil:
			opts.Logger.Info("could not describe the worker's deployment", zap.String("version", subflow.VersionName(&v)), zap.Error(err))
			return ""
		default:
			rc := desc.Info.RoutingConfig
			current, ramping, rampingPercentage = rc.CurrentVersion, rc.RampingVersion, rc.RampingVersionPercentage
			for _, s := range desc.Info.VersionSummaries {
				if s.Version == v {
					drainage = s.DrainageStatus
				}
			}
		}
	}
	fields := []zap.Field{zap.String("taskQueue", opts.TaskQueue), zap.String("currentVersion", subflow.VersionName(current))}
	if rampingPercentage > 0 {
		fields = append(fields, zap.String("rampingVersion", subflow.VersionName(ramping)), zap.Float32("rampingPercentage", rampingPercentage))
	}
	msg := "this unversioned worker receives no new runs: its task queue routes them to a Worker Deployment version; start it with --deployment-name and --build-id"
	if opts.DeploymentName != "" {
		switch {
		case current != nil && *current == v, rampingPercentage > 0 && ramping != nil && *ramping == v:
			return ""
		case drainage == client.WorkerDeploymentVersionDrainageStatusDraining:
			opts.Logger.Info("this build is draining: it serves only the runs pinned to it", fields...)
			return ""
		}
		msg = "this build receives no runs: it is neither current nor ramping nor draining on its task queue; make it current with `starter deployment set-current " +
			v.DeploymentName + " " + v.BuildID + "` once its workers run"
	}
	opts.Logger.Warn(msg, fields...)
	return msg
}

// publishWorkflows states in the worker's Worker Deployment version which workflow types it
// registers (subflow.VersionMetadataWorkflows), so that a long-lived workflow does not move
// to a build that cannot run it. The version exists once a worker of it has polled, a moment
// after the start: publishWorkflows tries for up to a minute, until ctx ends.
func publishWorkflows(ctx context.Context, c client.Client, opts Options, names []string) {
	names = slices.Compact(slices.Sorted(slices.Values(names)))
	v := worker.WorkerDeploymentVersion{DeploymentName: opts.DeploymentName, BuildID: opts.BuildID}
	h := c.WorkerDeploymentClient().GetHandle(v.DeploymentName)
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var err error
	for {
		_, err = h.UpdateVersionMetadata(ctx, client.WorkerDeploymentUpdateVersionMetadataOptions{
			Version:        v,
			MetadataUpdate: client.WorkerDeploymentMetadataUpdate{UpsertEntries: map[string]any{subflow.VersionMetadataWorkflows: names}},
		})
		if err == nil {
			return
		}
		select {
		case <-ctx.Done():
			opts.Logger.Info("could not state the registered workflows in the version's metadata",
				zap.String("version", subflow.VersionName(&v)), zap.Error(err))
			return
		case <-time.After(time.Second):
		}
	}
}

// makeCurrent makes the worker's version current once it polls (Options.MakeCurrent).
func makeCurrent(ctx context.Context, c client.Client, opts Options) {
	v := worker.WorkerDeploymentVersion{DeploymentName: opts.DeploymentName, BuildID: opts.BuildID}
	if err := subflow.SetCurrentWhenPolled(ctx, c, v.DeploymentName, v.BuildID); err != nil {
		opts.Logger.Warn("could not make this build current: it receives no new runs until it is", zap.Error(err))
		return
	}
	opts.Logger.Info("this build is the deployment's current version", zap.String("version", subflow.VersionName(&v)))
}

// checkQueueNames asks the server about each task queue the worker is about to poll, so that
// a name it refuses (longer than its limit.maxIDLength, as a lane's or a local workspace
// root's queue can be where the queue itself is not) stops the worker at its start, naming
// the queue, instead of pollers that fail in the log. Other errors are left to the pollers,
// which report them.
func checkQueueNames(ctx context.Context, c client.Client, queues []string) error {
	ctx, cancel := context.WithTimeout(ctx, routeCheckTimeout)
	defer cancel()
	for _, q := range queues {
		_, err := c.DescribeTaskQueue(ctx, q, enumspb.TASK_QUEUE_TYPE_WORKFLOW)
		var bad *serviceerror.InvalidArgument
		if errors.As(err, &bad) {
			return fmt.Errorf("app: task queue %q (%d bytes) is refused by the server: %s (the worker polls each queue's interactive lane, %q, and a local workspace root's queue, the queue's name with the root's path after it)",
				subagent.Head(q, 80), len(q), bad.Message, workflows.InteractiveQueue("QUEUE"))
		}
	}
	return nil
}
