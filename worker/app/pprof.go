package app

import (
	"fmt"
	"net/http"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"
)

// ProfilesPath is where ServeProfiles answers: the index of the Go runtime's profiles (heap,
// goroutine, allocs, …), each at ProfilesPath+name (?debug=1 for text, ?gc=1 to collect
// garbage before a heap profile), and a CPU profile at ProfilesPath+"profile?seconds=N", as
// `go tool pprof` reads them.
const ProfilesPath = "/debug/pprof/"

// maxCPUProfile bounds a CPU profile's ?seconds.
const maxCPUProfile = 5 * time.Minute

// Profiles serves the worker process's runtime profiles, to find where its memory or CPU goes
// on a live worker. They show function names and sizes, never payloads; still, serve them on
// a loopback or an operator-only address. Unlike net/http/pprof, whose import registers the
// profiles on http.DefaultServeMux, it serves them only on its own listener, so a binary that
// embeds the worker exposes nothing it did not ask for.
type Profiles struct{ srv *httpServer }

// ServeProfiles listens on addr ("127.0.0.1:6060"; port 0 picks a free one) and serves the
// profiles under ProfilesPath until Close.
func ServeProfiles(addr string) (*Profiles, error) {
	mux := http.NewServeMux()
	mux.HandleFunc(ProfilesPath, serveProfile)
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

// serveProfile answers ProfilesPath: the index, a named profile, or a CPU profile.
func serveProfile(w http.ResponseWriter, r *http.Request) {
	name := strings.TrimPrefix(r.URL.Path, ProfilesPath)
	q := r.URL.Query()
	switch name {
	case "":
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		for _, p := range pprof.Profiles() {
			fmt.Fprintf(w, "%s%s\t%d\n", ProfilesPath, p.Name(), p.Count())
		}
		fmt.Fprintf(w, "%sprofile?seconds=N\tCPU\n", ProfilesPath)
	case "profile":
		seconds, err := strconv.Atoi(q.Get("seconds"))
		if q.Get("seconds") == "" {
			seconds, err = 30, nil
		}
		d := time.Duration(seconds) * time.Second
		if err != nil || d <= 0 || d > maxCPUProfile {
			http.Error(w, fmt.Sprintf("profiles: seconds=%q: want a whole number from 1 to %d", q.Get("seconds"), int(maxCPUProfile.Seconds())), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		if err := pprof.StartCPUProfile(w); err != nil {
			http.Error(w, "profiles: CPU profile: "+err.Error(), http.StatusConflict)
			return
		}
		select {
		case <-time.After(d):
		case <-r.Context().Done():
		}
		pprof.StopCPUProfile()
	default:
		p := pprof.Lookup(name)
		if p == nil {
			http.Error(w, fmt.Sprintf("profiles: no profile %q (the index is %s)", name, ProfilesPath), http.StatusNotFound)
			return
		}
		debug, _ := strconv.Atoi(q.Get("debug"))
		if name == "heap" && q.Get("gc") == "1" {
			runtime.GC()
		}
		if debug > 0 {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		} else {
			w.Header().Set("Content-Type", "application/octet-stream")
		}
		if err := p.WriteTo(w, debug); err != nil {
			http.Error(w, "profiles: "+name+": "+err.Error(), http.StatusInternalServerError)
		}
	}
}
