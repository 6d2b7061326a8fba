package subflow

import (
	"errors"
	"testing"

	"github.com/subflow-dev/subflow/subagent"
	"github.com/subflow-dev/subflow/workflows"
)

func TestParseWorkspaceRoot(t *testing.T) {
	for in, want := range map[string]WorkspaceRoot{
		"local:/srv/ws/":                {Dir: "/srv/ws", Local: true},
		"shared:/mnt/x":                 {Dir: "/mnt/x"},
		"/mnt/shared":                   {Dir: "/mnt/shared"},
		"local,trust-hardlinks:/srv/ws": {Dir: "/srv/ws", Local: true, TrustHardLinks: true},
		"trust-hardlinks,shared:/mnt/x": {Dir: "/mnt/x", TrustHardLinks: true},
		"trust-hardlinks:/mnt/y":        {Dir: "/mnt/y", TrustHardLinks: true},
	} {
		got, err := ParseWorkspaceRoot(in)
		if err != nil || got != want {
			t.Errorf("ParseWorkspaceRoot(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "local:", "local:rel/dir", "ws", "trust-hardlinks:ws"} {
		if _, err := ParseWorkspaceRoot(in); err == nil {
			t.Errorf("ParseWorkspaceRoot(%q) accepted a relative directory", in)
		}
	}
	for in, want := range map[string]string{
		"hardlinks:/srv/ws":    `workspace root "hardlinks:/srv/ws": unknown option "hardlinks"; want local, shared or trust-hardlinks before the colon`,
		"local,shared:/srv/ws": `workspace root "local,shared:/srv/ws": a root is local or shared, not both`,
	} {
		if _, err := ParseWorkspaceRoot(in); err == nil || err.Error() != want {
			t.Errorf("ParseWorkspaceRoot(%q) = %v, want %s", in, err, want)
		}
	}
	for _, in := range []string{"local:/srv/ws", "local,trust-hardlinks:/srv/ws", "trust-hardlinks:/mnt/x", "/mnt/y"} {
		r, err := ParseWorkspaceRoot(in)
		if err != nil || r.String() != in {
			t.Errorf("ParseWorkspaceRoot(%q).String() = %q, %v", in, r.String(), err)
		}
	}
}

func TestWorkspaceRootHolds(t *testing.T) {
	r := WorkspaceRoot{Dir: "/srv/ws"}
	for cwd, want := range map[string]bool{
		"/srv/ws": true, "/srv/ws/a/b": true, "/srv/wsx": false, "/srv": false, "/srv/ws/../x": false,
	} {
		if got := r.holds(cwd); got != want {
			t.Errorf("%s holds %s = %v, want %v", r, cwd, got, want)
		}
	}
}

func TestWorkerIdentityRoots(t *testing.T) {
	roots := []WorkspaceRoot{{Dir: "/srv/ws", Local: true}, {Dir: "/mnt/a b"}}
	id := WorkerIdentity("12@host@", roots)
	got := identityRoots(id)
	if len(got) != 2 || got[0] != roots[0] || got[1] != roots[1] {
		t.Errorf("identityRoots(%q) = %+v, want %+v", id, got, roots)
	}
	if identityRoots("12@host@") != nil || WorkerIdentity("12@host@", nil) != "12@host@" {
		t.Error("a worker without roots states none")
	}
}

func TestWorkspacesRoute(t *testing.T) {
	w := Workspaces{TaskQueue: "q", Served: []WorkspaceRoot{
		{Dir: "/srv/ws", Local: true}, {Dir: "/mnt/shared"}, {Dir: "/mnt/shared/here", Local: true},
	}}
	for cwd, want := range map[string]string{
		"":                      "q",
		"/srv/ws/proj":          "q@local:/srv/ws",
		"/mnt/shared/a":         "q",
		"/mnt/shared/here/deep": "q@local:/mnt/shared/here",
	} {
		if got, err := w.Route(cwd); err != nil || got != want {
			t.Errorf("Route(%q) = %q, %v; want %q", cwd, got, err, want)
		}
	}
	_, err := w.Route("/elsewhere")
	var ve *subagent.ValidationError
	if !errors.As(err, &ve) || ve.Rule != RuleWorkspace ||
		ve.Message != "no worker serves the cwd /elsewhere: the workers on task queue q serve local:/srv/ws, /mnt/shared, local:/mnt/shared/here" {
		t.Errorf("Route of an unserved cwd: %v", err)
	}
	if got, err := (Workspaces{TaskQueue: "q"}).Route("/anywhere"); err != nil || got != "q" {
		t.Errorf("without served roots Route = %q, %v; want the common queue", got, err)
	}
}

func TestWorkspacesRouteTask(t *testing.T) {
	w := Workspaces{TaskQueue: "q", Served: []WorkspaceRoot{{Dir: "/srv/ws", Local: true}, {Dir: "/mnt/shared"}}}
	d := workflows.TaskDefaults{Dir: "/srv/ws"}
	local := workflows.Task{Task: "t", Cwd: "proj"}
	if err := w.RouteTask(&local, d); err != nil || local.TaskQueue != "q@local:/srv/ws" {
		t.Errorf("a relative cwd under a local root: queue %q, %v", local.TaskQueue, err)
	}
	shared := workflows.Task{Task: "t", Cwd: "/mnt/shared/p", TaskQueue: "stale"}
	if err := w.RouteTask(&shared, d); err != nil || shared.TaskQueue != "" {
		t.Errorf("a cwd under a shared root keeps the batch's queue: %q, %v", shared.TaskQueue, err)
	}
	nobody := workflows.Task{Task: "t", Cwd: "/tmp/x"}
	if err := w.RouteTask(&nobody, d); err == nil {
		t.Error("a cwd nobody serves was routed")
	}
}
