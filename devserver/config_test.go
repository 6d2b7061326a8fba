package devserver

import (
	"testing"
)

// The ports a server picks for itself are distinct. The kernel often hands out again a port
// whose listener was just closed: with each listener closed as soon as its port was read,
// this test fails on Linux well within its 500 sets (a port picked for both the UI and the
// frontend's HTTP, say), and a server given such a set ends the process at start when its
// second service cannot listen ("bind: address already in use").
func TestPickedPortsAreDistinct(t *testing.T) {
	for range 500 {
		p, err := pickPorts(Options{IP: localhost})
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
