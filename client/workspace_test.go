package client

import (
	"testing"
)

func TestParseWorkspaceRoot(t *testing.T) {
	for in, want := range map[string]WorkspaceRoot{
		"local:/srv/ws/": {Dir: "/srv/ws", Local: true},
		"shared:/mnt/x":  {Dir: "/mnt/x"},
		"/mnt/shared":    {Dir: "/mnt/shared"},
	} {
		got, err := ParseWorkspaceRoot(in)
		if err != nil || got != want {
			t.Errorf("ParseWorkspaceRoot(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "local:", "local:rel/dir", "ws"} {
		if _, err := ParseWorkspaceRoot(in); err == nil {
			t.Errorf("ParseWorkspaceRoot(%q) accepted a relative directory", in)
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
