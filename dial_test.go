package subflow

import "testing"

// TestIsLoopback: Dial turns gzip off only for a frontend on this host.
func TestIsLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:7233":        true,
		"127.0.0.53:7233":       true,
		"localhost:7233":        true,
		"[::1]:7233":            true,
		"10.0.0.7:7233":         false,
		"temporal:7233":         false,
		"ns.tmprl.cloud:7233":   false,
		"[2001:db8::1]:7233":    false,
		"localhost":             false, // no port: not an address Dial would reach either
		"localhost.example:443": false,
	} {
		if got := isLoopback(addr); got != want {
			t.Errorf("isLoopback(%q) = %v, want %v", addr, got, want)
		}
	}
}
