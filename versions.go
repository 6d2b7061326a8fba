package subflow

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	deploymentpb "go.temporal.io/api/deployment/v1"
	enumspb "go.temporal.io/api/enums/v1"
	tclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/worker"

	"github.com/subflow-dev/subflow/workflows"
)

// PollerRecent is how recently a build's worker must have polled a task queue to count as
// polling it (QueueVersions.Polled). An idle worker renews its poll at least once a minute;
// the server forgets a worker that stopped gracefully at once, and one that died after a few
// minutes.
const PollerRecent = 2 * time.Minute

// QueueVersions is how Worker Versioning routes the new workflow runs of a task queue and
// which builds poll its workflow tasks, as one DescribeTaskQueue reads them
// (ReadQueueVersions).
type QueueVersions struct {
	TaskQueue string
	// Current is the version new runs start on; nil means unversioned workers.
	Current *worker.WorkerDeploymentVersion
	// Ramping, when RampingPercentage > 0, takes that share of new runs; nil means
	// unversioned workers.
	Ramping           *worker.WorkerDeploymentVersion
	RampingPercentage float32
	// Pollers holds, for each version whose workers polled the queue's workflow tasks, the
	// time of the latest poll; the zero version stands for unversioned workers.
	Pollers map[worker.WorkerDeploymentVersion]time.Time
	// Read is when the queue was read.
	Read time.Time
}

// ReadQueueVersions reads taskQueue's routing and the versions polling its workflow tasks.
func ReadQueueVersions(ctx context.Context, c tclient.Client, taskQueue string) (QueueVersions, error) {
	desc, err := c.DescribeTaskQueue(ctx, taskQueue, enumspb.TASK_QUEUE_TYPE_WORKFLOW)
	if err != nil {
		return QueueVersions{}, fmt.Errorf("describe task queue %s for its versions: %w", taskQueue, err)
	}
	q := QueueVersions{TaskQueue: taskQueue, Pollers: map[worker.WorkerDeploymentVersion]time.Time{}, Read: time.Now()}
	if vi := desc.GetVersioningInfo(); vi != nil {
		q.Current = versionOf(vi.GetCurrentDeploymentVersion())
		if vi.GetRampingVersionPercentage() > 0 {
			q.Ramping, q.RampingPercentage = versionOf(vi.GetRampingDeploymentVersion()), vi.GetRampingVersionPercentage()
		}
	}
	for _, p := range desc.GetPollers() {
		var v worker.WorkerDeploymentVersion
		if o := p.GetDeploymentOptions(); o != nil && o.GetWorkerVersioningMode() == enumspb.WORKER_VERSIONING_MODE_VERSIONED {
			v = worker.WorkerDeploymentVersion{DeploymentName: o.GetDeploymentName(), BuildID: o.GetBuildId()}
		}
		if at := p.GetLastAccessTime().AsTime(); at.After(q.Pollers[v]) {
			q.Pollers[v] = at
		}
	}
	return q, nil
}

func versionOf(v *deploymentpb.WorkerDeploymentVersion) *worker.WorkerDeploymentVersion {
	if v == nil || v.GetBuildId() == "" {
		return nil
	}
	return &worker.WorkerDeploymentVersion{DeploymentName: v.GetDeploymentName(), BuildID: v.GetBuildId()}
}

// Polled reports whether a worker of version v (nil: an unversioned worker) polled the
// queue's workflow tasks within PollerRecent of the read.
func (q QueueVersions) Polled(v *worker.WorkerDeploymentVersion) bool {
	var key worker.WorkerDeploymentVersion
	if v != nil {
		key = *v
	}
	at, ok := q.Pollers[key]
	return ok && q.Read.Sub(at) < PollerRecent
}

// Targets are the versions q routes new runs to: Current, and Ramping while it takes a
// share; nil stands for unversioned workers.
func (q QueueVersions) Targets() []*worker.WorkerDeploymentVersion {
	targets := []*worker.WorkerDeploymentVersion{q.Current}
	if q.RampingPercentage > 0 {
		targets = append(targets, q.Ramping)
	}
	return targets
}

// Served reports whether a worker of each version q routes new runs to (Targets) polled the
// queue's workflow tasks lately (Polled): a run started there now is picked up.
func (q QueueVersions) Served() bool {
	for _, t := range q.Targets() {
		if !q.Polled(t) {
			return false
		}
	}
	return true
}

// Versioned reports whether the queue routes new runs to a Worker Deployment version.
func (q QueueVersions) Versioned() bool {
	return q.Current != nil || (q.Ramping != nil && q.RampingPercentage > 0)
}

// PollingVersions names the versions that polled the queue within PollerRecent, sorted.
func (q QueueVersions) PollingVersions() []string {
	var names []string
	for v := range q.Pollers {
		if q.Polled(&v) {
			names = append(names, VersionName(&v))
		}
	}
	slices.Sort(names)
	return names
}

// VersionName is "DEPLOYMENT:BUILD_ID", the form the Temporal CLI prints, or "unversioned
// workers" for nil or the zero version.
func VersionName(v *worker.WorkerDeploymentVersion) string {
	if v == nil || v.BuildID == "" {
		return "unversioned workers"
	}
	return v.DeploymentName + ":" + v.BuildID
}

// VersionMetadataWorkflows is the Worker Deployment version metadata entry in which a
// subflow worker of that version states the workflow types it registers (a list of names),
// so that a long-lived workflow does not move to a build that cannot run it (TargetReady).
const VersionMetadataWorkflows = "subflow.workflows"

// RegisteredWorkflows reads the workflow types the workers of version v state they register
// (VersionMetadataWorkflows). ok is false when they state none (a build that predates the
// entry, or workers that have not written it yet).
func RegisteredWorkflows(ctx context.Context, c tclient.Client, v worker.WorkerDeploymentVersion) (types []string, ok bool, err error) {
	desc, err := c.WorkerDeploymentClient().GetHandle(v.DeploymentName).DescribeVersion(ctx,
		tclient.WorkerDeploymentDescribeVersionOptions{BuildID: v.BuildID})
	if err != nil {
		return nil, false, fmt.Errorf("describe version %s: %w", VersionName(&v), err)
	}
	p := desc.Info.Metadata[VersionMetadataWorkflows]
	if p == nil {
		return nil, false, nil
	}
	if err := converter.GetDefaultDataConverter().FromPayload(p, &types); err != nil {
		return nil, false, fmt.Errorf("version %s: metadata %s: %w", VersionName(&v), VersionMetadataWorkflows, err)
	}
	return types, true, nil
}

// TargetReady reports whether the version(s) q routes new runs to can run a new run of
// in.WorkflowType (Own when that is in.BuildID itself): a worker of each polled the queue lately (QueueVersions.Polled) and, when
// the version states the workflows it registers, the type is among them. The batch,
// admission and cleanup workflows ask it (through an activity) before they continue as new
// onto a new build.
func TargetReady(ctx context.Context, c tclient.Client, q QueueVersions, in workflows.TargetBuildInput) workflows.TargetBuild {
	targets := q.Targets()
	var names []string
	for _, t := range targets {
		names = append(names, VersionName(t))
	}
	tb := workflows.TargetBuild{Target: strings.Join(names, " and ramping ")}
	if len(targets) == 1 && q.Current != nil && q.Current.BuildID == in.BuildID {
		tb.Own = true
		return tb
	}
	workflowType := in.WorkflowType
	for _, t := range targets {
		if !q.Polled(t) {
			polling := strings.Join(q.PollingVersions(), ", ")
			if polling == "" {
				polling = "none"
			}
			tb.Reason = fmt.Sprintf("has no worker polling task queue %s (polling it: %s)", q.TaskQueue, polling)
			return tb
		}
		if t == nil {
			continue
		}
		types, ok, err := RegisteredWorkflows(ctx, c, *t)
		if err != nil {
			tb.Reason = fmt.Sprintf("cannot be checked: %v", err)
			return tb
		}
		if ok && !slices.Contains(types, workflowType) {
			tb.Reason = fmt.Sprintf("does not register workflow type %s (its workers register %s)", workflowType, strings.Join(types, ", "))
			return tb
		}
	}
	tb.Ready = true
	return tb
}

// SetCurrentWhenPolled makes version deployment:buildID current as soon as the server knows
// it: a version exists once one of its workers has polled, a moment after the worker
// starts. It gives up after 30 s.
func SetCurrentWhenPolled(ctx context.Context, c tclient.Client, deployment, buildID string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	h := c.WorkerDeploymentClient().GetHandle(deployment)
	for {
		_, err := h.SetCurrentVersion(ctx, tclient.WorkerDeploymentSetCurrentVersionOptions{BuildID: buildID})
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("make %s:%s the current version: %w", deployment, buildID, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
