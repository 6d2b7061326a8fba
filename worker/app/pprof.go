package app

import (
	"net/http"
	"net/http/pprof"
)

// ProfilesPath is where ServeProfiles answers: the index of the Go runtime's profiles (heap,
// goroutine, allocs, profile for CPU, …), each at ProfilesPath+name, as `go tool pprof` reads
// them.
const ProfilesPath = "/debug/pprof/"

// Profiles serves the worker process's runtime profiles, to find where its memory or CPU goes
// on a live worker. They show function names and payload sizes, never payloads; still, serve
// them on a loopback or an operator-only address.
type Profiles struct{ srv *httpServer }

// ServeProfiles listens on addr ("127.0.0.1:6060"; port 0 picks a free one) and serves the
// profiles under ProfilesPath until Close.
func ServeProfiles(addr string) (*Profiles, error) {
	mux := http.NewServeMux()
	mux.HandleFunc(ProfilesPath, pprof.Index)
	mux.HandleFunc(ProfilesPath+"cmdline", pprof.Cmdline)
	mux.HandleFunc(ProfilesPath+"profile", pprof.Profile)
	mux.HandleFunc(ProfilesPath+"symbol", pprof.Symbol)
	mux.HandleFunc(ProfilesPath+"trace", pprof.Trace)
	srv, err := serveHTTP("profiles", addr, mux)
	if err != nil {
		return nil, err
	}
	return &Profiles{srv: srv}, nil
}

// Addr is the address the profiles are served on, with the port resolved.
func (p *Profiles) Addr() string { return p.srv.addr }

// Close stops serving the profiles.
func (p *Profiles) Close() error { return p.srv.close() }
