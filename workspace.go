package subflow

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"

	enumspb "go.temporal.io/api/enums/v1"
	tclient "go.temporal.io/sdk/client"

	"github.com/subflow-dev/subflow/subagent"
	"github.com/subflow-dev/subflow/workflows"
)

// RuleWorkspace is the Rule of the rejection of a run whose cwd no worker serves.
const RuleWorkspace = "workspace"

// WorkspaceRoot is a directory a worker serves runs in. A shared root is mounted at the
// same path on every worker that names it (a network file system); a host-local root exists
// on its worker's host only, so runs under it go to that host's own task queue.
type WorkspaceRoot struct {
	Dir   string `json:"dir"`
	Local bool   `json:"local,omitempty"`
	// TrustHardLinks declares that no file under the root is a hard link to a file outside
	// it (tools.Env.HardLinkRoots): the file tools then read files with several hard links
	// there. It concerns this worker only, so it is not stated to starters.
	TrustHardLinks bool `json:"-"`
}

// Options of a workspace root, before the colon of its flag form.
const (
	rootLocal          = "local"
	rootShared         = "shared"
	rootTrustHardLinks = "trust-hardlinks"
)

// ParseWorkspaceRoot reads the worker flag --workspace-root: [OPTIONS:]DIR, where DIR is
// absolute and OPTIONS a comma-separated list of "local" (a host-local root), "shared" (a
// shared one, as a bare DIR is) and "trust-hardlinks" (TrustHardLinks): "local:DIR",
// "local,trust-hardlinks:DIR", "/mnt/shared".
func ParseWorkspaceRoot(s string) (WorkspaceRoot, error) {
	var root WorkspaceRoot
	dir := s
	if !strings.HasPrefix(s, "/") {
		if opts, rest, ok := strings.Cut(s, ":"); ok {
			dir = rest
			shared := false
			for _, o := range strings.Split(opts, ",") {
				switch o {
				case rootLocal:
					root.Local = true
				case rootShared:
					shared = true
				case rootTrustHardLinks:
					root.TrustHardLinks = true
				default:
					return WorkspaceRoot{}, fmt.Errorf("workspace root %q: unknown option %q; want %s, %s or %s before the colon",
						s, o, rootLocal, rootShared, rootTrustHardLinks)
				}
			}
			if root.Local && shared {
				return WorkspaceRoot{}, fmt.Errorf("workspace root %q: a root is %s or %s, not both", s, rootLocal, rootShared)
			}
		}
	}
	if !filepath.IsAbs(dir) {
		return WorkspaceRoot{}, fmt.Errorf("workspace root %q: want an absolute directory, optionally prefixed local:, shared: or trust-hardlinks: (options joined by commas)", s)
	}
	root.Dir = filepath.Clean(dir)
	return root, nil
}

// String is the flag form of r, which ParseWorkspaceRoot reads back.
func (r WorkspaceRoot) String() string {
	var opts []string
	if r.Local {
		opts = append(opts, rootLocal)
	}
	if r.TrustHardLinks {
		opts = append(opts, rootTrustHardLinks)
	}
	if len(opts) == 0 {
		return r.Dir
	}
	return strings.Join(opts, ",") + ":" + r.Dir
}

// holds reports whether cwd lies under r.
func (r WorkspaceRoot) holds(cwd string) bool {
	rel, err := filepath.Rel(r.Dir, cwd)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// WorkspaceQueue is the task queue of the host-local root dir under the common queue
// taskQueue: the workers serving the root poll it besides taskQueue, and every workflow and
// activity of a run whose cwd lies under the root runs there. A host-local root's path names
// one host: two hosts serving the same local path would share the queue.
func WorkspaceQueue(taskQueue, dir string) string {
	return taskQueue + "@local:" + filepath.Clean(dir)
}

// identityMark separates a worker's Temporal identity from the workspace roots it serves.
const identityMark = " workspace-roots="

// WorkerIdentity is the Temporal identity of a worker that serves roots: base (the default
// "pid@host@" form) followed by the roots, which RouteWorkspace reads back from the pollers
// of the common task queue. Nothing else is needed for the discovery: every host reaching
// the Temporal frontend sees the same pollers.
func WorkerIdentity(base string, roots []WorkspaceRoot) string {
	if len(roots) == 0 {
		return base
	}
	b, _ := json.Marshal(roots) // a slice of plain structs always encodes
	return base + identityMark + string(b)
}

// identityRoots returns the roots in a worker identity made by WorkerIdentity.
func identityRoots(identity string) []WorkspaceRoot {
	_, list, ok := strings.Cut(identity, identityMark)
	if !ok {
		return nil
	}
	var roots []WorkspaceRoot
	if json.Unmarshal([]byte(list), &roots) != nil {
		return nil
	}
	return roots
}

// RouteWorkspace returns the task queue a run whose cwd is cwd starts on: ReadWorkspaces of
// taskQueue, then Workspaces.Route of cwd. An empty cwd starts on taskQueue without asking.
func RouteWorkspace(ctx context.Context, c tclient.Client, taskQueue, cwd string) (string, error) {
	if cwd == "" {
		return taskQueue, nil
	}
	w, err := ReadWorkspaces(ctx, c, taskQueue)
	if err != nil {
		return "", fmt.Errorf("subflow: route the cwd %s: %w", cwd, err)
	}
	return w.Route(cwd)
}

// Workspaces is the workspace roots the workers polling a task queue serve, read once
// (ReadWorkspaces) to route any number of runs: a batch of 10,000 tasks costs one
// DescribeTaskQueue.
type Workspaces struct {
	// TaskQueue is the common task queue the roots were read from.
	TaskQueue string
	// Served is every root some poller states, each once; empty when roots are not in use.
	Served []WorkspaceRoot
}

// ReadWorkspaces reads the roots the workers polling taskQueue state in their identities
// (WorkerIdentity). The roots are those of the workers that polled taskQueue recently
// (DescribeTaskQueue): a worker that stopped within the last minutes still counts.
func ReadWorkspaces(ctx context.Context, c tclient.Client, taskQueue string) (Workspaces, error) {
	desc, err := c.DescribeTaskQueue(ctx, taskQueue, enumspb.TASK_QUEUE_TYPE_WORKFLOW)
	if err != nil {
		return Workspaces{}, fmt.Errorf("describe task queue %s for its workspace roots: %w", taskQueue, err)
	}
	w := Workspaces{TaskQueue: taskQueue}
	seen := map[WorkspaceRoot]bool{}
	for _, p := range desc.GetPollers() {
		for _, r := range identityRoots(p.GetIdentity()) {
			if !seen[r] {
				seen[r] = true
				w.Served = append(w.Served, r)
			}
		}
	}
	return w, nil
}

// Route returns the task queue a run whose cwd is cwd starts on: the host queue
// (WorkspaceQueue) of the deepest host-local root holding cwd, w.TaskQueue when the deepest
// is shared, and w.TaskQueue when no root is served (a cluster that does not use workspace
// roots) or cwd is empty. A cwd that no served root holds is rejected with a
// *subagent.ValidationError (Rule RuleWorkspace) naming the cwd and the served roots.
func (w Workspaces) Route(cwd string) (string, error) {
	if cwd == "" || len(w.Served) == 0 {
		return w.TaskQueue, nil
	}
	var best *WorkspaceRoot
	for i, r := range w.Served {
		if r.holds(cwd) && (best == nil || len(r.Dir) > len(best.Dir)) {
			best = &w.Served[i]
		}
	}
	if best == nil {
		names := make([]string, len(w.Served))
		for i, r := range w.Served {
			names[i] = r.String()
		}
		return "", subagent.Rejectf(RuleWorkspace, "no worker serves the cwd %s: the workers on task queue %s serve %s",
			cwd, w.TaskQueue, strings.Join(names, ", "))
	}
	if best.Local {
		return WorkspaceQueue(w.TaskQueue, best.Dir), nil
	}
	return w.TaskQueue, nil
}

// RouteTask sets t.TaskQueue to the queue Route picks for the cwd t's run works in (its root
// session's, resolved against d.Dir; see workflows.Task.StartInput), or clears it when that
// is w.TaskQueue: a batch then starts the task's child on that queue, and an unrouted task
// exactly as a batch always did. The error is Route's, or the task's own when it is invalid.
func (w Workspaces) RouteTask(t *workflows.Task, d workflows.TaskDefaults) error {
	in, err := t.StartInput("", d)
	if err != nil {
		return err
	}
	queue, err := w.Route(in.Cwd())
	if err != nil {
		return err
	}
	t.TaskQueue = ""
	if queue != w.TaskQueue {
		t.TaskQueue = queue
	}
	return nil
}
