package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"

	"github.com/subflow-dev/subflow"
	"github.com/subflow-dev/subflow/activities"
	"github.com/subflow-dev/subflow/subagent"
	"github.com/subflow-dev/subflow/workflows"
)

// badRuntime is an sdk child command that never completes its handshake, misbehaving as the
// name of its cwd says: silent (reads nothing, answers nothing), garbage (writes lines that
// are not JSON-RPC), term (ignores SIGTERM and leaves a grandchild that ignores it too,
// whose pid it writes to grandchild.pid).
const badRuntime = `#!/bin/sh
case "$(basename "$PWD")" in
silent) while :; do sleep 0.2; done ;;
garbage) while :; do echo 'not json at all'; sleep 0.05; done ;;
term) trap '' TERM; sleep 3600 & echo $! > grandchild.pid; wait ;;
esac
`

// TestSDKHandshakeFailureIsFinal: a run whose sdk child stays silent, writes garbage or
// ignores SIGTERM and leaves a grandchild fails at RunSDKChild's first attempt with the
// handshake's message (type sdk-start), and every process it started — the child and the
// grandchild, listed through /proc while the handshake waits — has ended when the run has.
func TestSDKHandshakeFailureIsFinal(t *testing.T) {
	t.Parallel()
	f := newFaultEnv(t, "")
	bin := filepath.Join(t.TempDir(), "bad-runtime.sh")
	require.NoError(t, os.WriteFile(bin, []byte(badRuntime), 0o755))
	w := f.startWorker("--gc-every", "0", "--sdk-command", bin)

	t.Run("group", func(t *testing.T) {
		for _, mode := range []string{"silent", "garbage", "term"} {
			t.Run(mode, func(t *testing.T) {
				t.Parallel()
				base, err := filepath.EvalSymlinks(t.TempDir())
				require.NoError(t, err)
				cwd := filepath.Join(base, mode)
				require.NoError(t, os.Mkdir(cwd, 0o755))
				in := rootInput(subagent.ProviderSDK, cwd, script(t, t.TempDir(), `{"text": "never"}`), "hello")
				in.ChildID = uuid.NewString()
				workflowID := workflows.WorkflowID(in.ChildID)
				ctx, cancel := context.WithTimeout(context.Background(), 2*waitLimit)
				defer cancel()

				errc := make(chan error, 1)
				go func() {
					_, _, err := subflow.Start(ctx, f.c, subflow.StartOptions{TaskQueue: f.taskQueue, Input: in})
					errc <- err
				}()
				// The processes of this run, while its handshake waits.
				var child, grandchild int
				require.Eventually(t, func() bool {
					for _, pid := range processesOf(t, w.pid(), bin) {
						if cwdOf(pid) == cwd {
							child = pid
						}
					}
					if mode == "term" {
						data, _ := os.ReadFile(filepath.Join(cwd, "grandchild.pid"))
						grandchild, _ = strconv.Atoi(strings.TrimSpace(string(data)))
						return child != 0 && grandchild != 0
					}
					return child != 0
				}, waitLimit, waitTick, "the child never ran")

				err = <-errc
				require.Error(t, err)
				assert.Contains(t, err.Error(), "did not complete the handshake within 10s; it was stopped")
				assert.False(t, alive(child), "the child %d outlived its run", child)
				if grandchild != 0 {
					assert.False(t, alive(grandchild), "the grandchild %d outlived its run", grandchild)
				}

				desc, err := f.c.DescribeWorkflowExecution(ctx, workflowID, "")
				require.NoError(t, err)
				assert.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_FAILED, desc.GetWorkflowExecutionInfo().GetStatus())
				var attempt int32
				var failure string
				iter := f.c.GetWorkflowHistory(ctx, workflowID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
				for iter.HasNext() {
					ev, err := iter.Next()
					require.NoError(t, err)
					if a := ev.GetActivityTaskStartedEventAttributes(); a != nil {
						attempt = a.GetAttempt()
					}
					if a := ev.GetActivityTaskFailedEventAttributes(); a != nil {
						failure = a.GetFailure().GetApplicationFailureInfo().GetType()
					}
				}
				assert.Equal(t, int32(1), attempt, "RunSDKChild ran once")
				assert.Equal(t, activities.TypeSDKStart, failure)
			})
		}
	})
}

// cwdOf returns the working directory of process pid, or "".
func cwdOf(pid int) string {
	dir, _ := os.Readlink(filepath.Join("/proc", strconv.Itoa(pid), "cwd"))
	return dir
}
