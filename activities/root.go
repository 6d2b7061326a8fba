package activities

import (
	"context"
	"fmt"

	"go.uber.org/zap"

	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/inprocess"
	"github.com/subflow-dev/subflow/subagent"
	subagenttool "github.com/subflow-dev/subflow/subagent/tool"
	"github.com/subflow-dev/subflow/subagent/workdir"
	"github.com/subflow-dev/subflow/workflows"
)

// CreateRootSession creates the depth-0 root parent session of a request that names none
// (contract R-82), if it is absent: a retried call with the same input is a no-op. The cwd must
// be an absolute, accessible directory (its symlinks resolved). The session records this run
// as its Owner: a root that exists with another owner (the root of another run's child of
// the same id) is refused, before anything is written. It returns the session's ParentRef.
func (a *Activities) CreateRootSession(ctx context.Context, in workflows.CreateRootSessionInput) (subagent.ParentRef, error) {
	log := a.logger(ctx, "")
	// The root cwd is the starter's, so a relative one cannot be resolved here.
	cwd, err := workdir.Resolve(workdir.Options{
		Prefix: "subflow", ParentCwd: in.Root.Cwd, ParentLabel: "root session cwd",
	})
	if err != nil {
		return subagent.ParentRef{}, rejection(err)
	}
	if err := a.checkRoot("root session "+in.SessionID, in.Root.Cwd); err != nil {
		return subagent.ParentRef{}, err
	}
	h := session.Header{ID: in.SessionID, Cwd: cwd, AgentPreset: in.Root.Preset, Owner: runOwner(ctx, in.Owner)}
	if !in.Root.Route.IsZero() {
		route := in.Root.Route
		h.Route = &route
	}
	if in.Request != nil {
		// Check the delegation before the root exists: a rejected request leaves no orphan
		// root session behind.
		req := *in.Request
		if err := a.resolveRequest(ctx, &req, in.RequestRef); err != nil {
			return subagent.ParentRef{}, err
		}
		req.Parent = subagent.ParentRef{SessionID: in.SessionID, Cwd: cwd}
		err := a.host.CheckNew(inprocess.CreateRequest{
			Provider: in.Provider, Request: req, RunTools: []string{subagenttool.Name},
		}, h)
		if err != nil {
			log.Info("request rejected before its root session was created", zap.Error(err))
			return subagent.ParentRef{}, rejection(err)
		}
	}
	if in.ChildID != "" {
		if err := a.checkOwner(ctx, runOwner(ctx, in.Owner), in.ChildID, in.SessionID, "its root session "+in.SessionID); err != nil {
			return subagent.ParentRef{}, err
		}
	}
	if err := a.own(ctx, in.SessionID); err != nil {
		return subagent.ParentRef{}, err
	}
	if err := a.store.Create(ctx, h); err != nil {
		return subagent.ParentRef{}, rejection(fmt.Errorf("activities: create root session %s: %w", in.SessionID, err))
	}
	log.Info("root session ready", zap.String("session", in.SessionID), zap.String("cwd", cwd))
	return subagent.ParentRef{SessionID: in.SessionID, Cwd: cwd}, nil
}
