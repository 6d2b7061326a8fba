package devserver

import (
	"net"
	"testing"
)

// The ports a server picks for itself are distinct. The kernel often hands out again a port
// whose listener was just closed: with each listener closed as soon as its port was read,
// this test fails on Linux well within its 500 sets (a port picked for both the UI and the
// frontend's HTTP, say), and a server given such a set ends the process at start when its
// second service cannot listen ("bind: address already in use"). Every other set gives the
// frontend and UI ports itself, each just released: a pick returns one of them unless they
// are held too.
func TestPickedPortsAreDistinct(t *testing.T) {
	for i := range 500 {
		opts := Options{IP: localhost}
		if i%2 == 1 {
			// Ports the caller chose are held while the others are picked too.
			opts.Port, opts.UIPort = releasedPort(t), releasedPort(t)
		}
		p, err := pickPorts(opts)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[int]string{}
		for name, port := range map[string]int{
			"frontend": p.frontend, "frontend HTTP": p.frontendHTTP, "history": p.history,
			"matching": p.matching, "worker": p.worker, "UI": p.ui,
		} {
			if port <= 0 {
				t.Fatalf("%s port %d: not picked", name, port)
			}
			if other, ok := seen[port]; ok {
				t.Fatalf("port %d picked for both %s and %s", port, other, name)
			}
			seen[port] = name
		}
	}
}

// releasedPort is a port whose listener was just closed: the one the kernel is most likely to
// hand out next.
func releasedPort(t *testing.T) int {
	l, err := net.Listen("tcp", localhost+":0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
