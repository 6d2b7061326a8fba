package sdkproc

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestHandshakeFailuresReapEveryProcess: a child runtime that stays silent, writes garbage
// instead of answering, or ignores SIGTERM and leaves a grandchild behind fails its
// handshake with a *HandshakeTimeoutError, and StartRun returns only once every process of
// the child's process group has ended (listed through /proc while the handshake waits).
func TestHandshakeFailuresReapEveryProcess(t *testing.T) {
	for _, tc := range []struct {
		mode    string
		members int // processes of the group while the handshake waits
	}{
		{"hang", 1},
		{"garbage-only", 1},
		{"term-grandchild", 2},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			cfg := badConfig(tc.mode)
			cfg.HandshakeTimeoutMs = 1500
			h := newHarness(t, cfg, Options{})
			errc := make(chan error, 1)
			go func() {
				_, err := h.p.Start(context.Background(), request(t, "hi"))
				errc <- err
			}()
			pid := h.startedPID(t)
			var seen []int
			require.Eventually(t, func() bool {
				seen = groupMembers(t, pid)
				return len(seen) == tc.members
			}, 10*time.Second, 10*time.Millisecond, "the group of %d: %v", pid, seen)

			var err error
			select {
			case err = <-errc:
			case <-time.After(30 * time.Second):
				t.Fatal("StartRun did not return")
			}
			var te *HandshakeTimeoutError
			require.ErrorAs(t, err, &te)
			assert.Equal(t, pid, te.PID)
			assert.Contains(t, err.Error(), "did not complete the handshake within 1.5s; it was stopped")
			// Start returns once the leader is reaped, every member of the group SIGKILLed; a
			// grandchild (not ours to reap) may still be tearing down its memory for a moment
			// on a loaded machine, so its end is awaited, not read at once.
			assert.Eventually(t, func() bool { return len(groupMembers(t, pid)) == 0 }, 2*time.Second, 10*time.Millisecond,
				"processes of the group left running: %v", groupMembers(t, pid))
			for _, p := range seen {
				assert.Eventually(t, func() bool { return ended(p) }, 2*time.Second, 10*time.Millisecond, "process %d of the group still runs", p)
			}
		})
	}
}

// groupMembers lists the live processes (zombies aside) whose process group is pgid.
func groupMembers(t *testing.T, pgid int) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	require.NoError(t, err)
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		state, group, ok := procStat(pid)
		if ok && group == pgid && state != "Z" {
			pids = append(pids, pid)
		}
	}
	slices.Sort(pids)
	return pids
}

// ended reports whether pid is gone or a zombie: an orphaned grandchild is reaped by init,
// not by us, so its entry may linger after it died.
func ended(pid int) bool {
	state, _, ok := procStat(pid)
	return !ok || state == "Z"
}

// procStat reads the state and the process group of pid from /proc/<pid>/stat.
func procStat(pid int) (state string, pgid int, ok bool) {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return "", 0, false
	}
	// pid (comm) state ppid pgrp …; comm may hold spaces and parentheses.
	i := strings.LastIndexByte(string(data), ')')
	if i < 0 {
		return "", 0, false
	}
	fields := strings.Fields(string(data[i+1:]))
	if len(fields) < 3 {
		return "", 0, false
	}
	if pgid, err = strconv.Atoi(fields[2]); err != nil {
		return "", 0, false
	}
	return fields[0], pgid, true
}
