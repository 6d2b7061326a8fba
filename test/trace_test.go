package e2e

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"google.golang.org/protobuf/proto"

	"github.com/subflow-dev/subflow/workflows"
)

// otlpSpan is one span an OTLP receiver got, with its service and attributes.
type otlpSpan struct {
	service             string
	traceID, id, parent string
	name                string
	attrs               map[string]*commonpb.AnyValue
}

func (s otlpSpan) str(key string) string { return s.attrs[key].GetStringValue() }

// otlpReceiver is an OTLP/HTTP trace receiver: it decodes the protobuf
// ExportTraceServiceRequests that the exporters POST to /v1/traces.
type otlpReceiver struct {
	*httptest.Server
	mu    sync.Mutex
	spans []otlpSpan
}

func newOTLPReceiver(t testing.TB) *otlpReceiver {
	r := &otlpReceiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(req.Body)
		var export coltracepb.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(body, &export)
		}
		if req.URL.Path != "/v1/traces" || req.Header.Get("Content-Type") != "application/x-protobuf" || err != nil {
			t.Errorf("OTLP receiver: %s %s (%s): %v", req.Method, req.URL.Path, req.Header.Get("Content-Type"), err)
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		r.add(&export)
		resp, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(resp)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *otlpReceiver) add(export *coltracepb.ExportTraceServiceRequest) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range export.GetResourceSpans() {
		var service string
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				service = kv.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				s := otlpSpan{
					service: service, name: sp.GetName(),
					traceID: hex.EncodeToString(sp.GetTraceId()), id: hex.EncodeToString(sp.GetSpanId()),
					parent: hex.EncodeToString(sp.GetParentSpanId()), attrs: map[string]*commonpb.AnyValue{},
				}
				for _, kv := range sp.GetAttributes() {
					s.attrs[kv.GetKey()] = kv.GetValue()
				}
				r.spans = append(r.spans, s)
			}
		}
	}
}

func (r *otlpReceiver) all() []otlpSpan {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]otlpSpan(nil), r.spans...)
}

// spanTree indexes the spans of one test.
type spanTree struct {
	t     *testing.T
	spans []otlpSpan
	byID  map[string]otlpSpan
}

// find returns the spans named name (of workflow wf when wf is not empty).
func (s spanTree) find(name, wf string) []otlpSpan {
	var out []otlpSpan
	for _, sp := range s.spans {
		if sp.name == name && (wf == "" || sp.str("temporalWorkflowID") == wf) {
			out = append(out, sp)
		}
	}
	return out
}

// one returns the only span named name (of workflow wf).
func (s spanTree) one(name, wf string) otlpSpan {
	s.t.Helper()
	got := s.find(name, wf)
	require.Len(s.t, got, 1, "spans %s of %q", name, wf)
	return got[0]
}

// childOf asserts that span's parent is parent.
func (s spanTree) childOf(span, parent otlpSpan) {
	s.t.Helper()
	assert.Equal(s.t, parent.id, span.parent, "%s (%s) is a child of %s (%s)", span.name, span.service, parent.name, parent.service)
}

// TestTraceOfADelegationTree: a run whose model reads a file and delegates to an sdk child
// exports, from the starter, two workers and two child runtime processes, spans that form one
// trace: the start, the workflows, their activities, each model request (GenAI attributes),
// each tool call, the sdk child runtime's spans under its activity, and the nested run under
// the run that delegated (docs/tracing.md). The first worker is stopped while the sdk child
// streams and a second takes over, replaying both workflows: no workflow span is emitted
// twice.
func TestTraceOfADelegationTree(t *testing.T) {
	recv := newOTLPReceiver(t)
	otelEnv := []string{
		"OTEL_EXPORTER_OTLP_ENDPOINT=" + recv.URL, "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf",
		"OTEL_BSP_SCHEDULE_DELAY=100",
	}
	f := newFaultEnv(t, "")
	f.extraEnv = otelEnv
	// A numeric depth cap cannot go with a delegation to the sdk provider (docs/sdk-children.md).
	// No cleanup schedule: creating it at start is a trace of its own, not the run's.
	f.extraArgs = []string{"--subagent-max-depth", "provider-managed", "--gc-every", "0"}
	first := f.startWorker()

	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "note.txt"), []byte("a note"), 0o644))
	sdkLeaf := script(t, dir, `{"delayMs": 3000, "chunks": 6, "text": "the sdk leaf took its time"}`)
	calls, err := json.Marshal(map[string]any{"toolCalls": []any{
		map[string]any{"name": "read_file", "input": map[string]any{"path": "note.txt"}},
		map[string]any{"name": "subagent", "input": map[string]any{
			"task": "answer slowly", "provider": "sdk", "modelProvider": "scripted", "model": sdkLeaf,
		}},
	}})
	require.NoError(t, err)
	root := script(t, dir, string(calls), `{"text": "root done"}`)

	rootID := "trace-" + uuid.NewString()
	ctx, cancel := context.WithTimeout(context.Background(), 3*waitLimit)
	defer cancel()
	cmd := exec.CommandContext(ctx, env.starter, "run", "--json", "--id", rootID, "--task-queue", f.taskQueue,
		"--cwd", dir, "--model-provider", "scripted", "--model", root, "read and delegate")
	cmd.Env = append(append(os.Environ(), "TEMPORAL_ADDRESS="+f.addr, "TEMPORAL_NAMESPACE="+f.namespace), otelEnv...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Start())

	// Once the sdk child streams, the first worker stops; the second one replays.
	nested := waitStatusesAny(t, fmt.Sprintf("ParentWorkflowId = '%s'", rootID), 1)
	var nestedID string
	for id := range nested {
		nestedID = id
	}
	waitAllStreaming(t, []string{nestedID})
	stopWorker(t, first)
	second := f.startWorker()

	require.NoError(t, cmd.Wait(), "starter: %s", stderr.String())
	var res starterJSON
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &res), "stdout: %s", stdout.String())
	require.Equal(t, "root done", res.Output)
	waitStatuses(t, fmt.Sprintf("WorkflowId = '%s'", nestedID), 1, enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED, waitLimit)
	stopWorker(t, second) // flushes its spans
	requireReplayed(t, rootID)

	spans := recv.all()
	t.Cleanup(func() {
		if t.Failed() {
			for _, sp := range spans {
				t.Logf("span %s parent %s %s [%s] %s", sp.id, sp.parent, sp.name, sp.service, sp.str("temporalWorkflowID"))
			}
		}
	})
	tree := spanTree{t: t, spans: spans, byID: map[string]otlpSpan{}}
	for _, sp := range spans {
		_, dup := tree.byID[sp.id]
		assert.False(t, dup, "span id %s (%s) emitted twice", sp.id, sp.name)
		tree.byID[sp.id] = sp
	}

	// One trace, rooted at the starter's start.
	start := tree.one("UpdateWithStartWorkflow:"+workflows.UpdatePublished, "")
	assert.Equal(t, "subflow-starter", start.service)
	assert.Empty(t, start.parent)
	for _, sp := range spans {
		assert.Equal(t, start.traceID, sp.traceID, "%s (%s) is in the run's trace", sp.name, sp.service)
		if sp.id != start.id {
			_, ok := tree.byID[sp.parent]
			assert.True(t, ok, "the parent of %s (%s) was exported", sp.name, sp.service)
		}
	}

	// The root run: each workflow span once, although the second worker replayed it.
	rootRun := tree.one("RunWorkflow:"+workflows.WorkflowName, rootID)
	tree.childOf(rootRun, start)
	tree.childOf(tree.one("HandleUpdate:"+workflows.UpdatePublished, rootID), start)
	drives := tree.find("StartActivity:"+workflows.ActivityDrive, rootID)
	require.Len(t, drives, 2, "two drives: before and after the delegation")
	var chats []otlpSpan
	for _, d := range drives {
		tree.childOf(d, rootRun)
	}
	driveRuns := tree.find("RunActivity:"+workflows.ActivityDrive, rootID)
	require.Len(t, driveRuns, 2)
	for _, r := range driveRuns {
		assert.Contains(t, []string{drives[0].id, drives[1].id}, r.parent)
		for _, sp := range spans {
			if sp.parent == r.id && strings.HasPrefix(sp.name, "chat ") {
				chats = append(chats, sp)
			}
		}
	}
	require.Len(t, chats, 2, "one model request per drive")
	for _, c := range chats {
		assert.Equal(t, "chat "+root, c.name)
		assert.Equal(t, "chat", c.str("gen_ai.operation.name"))
		assert.Equal(t, "scripted", c.str("gen_ai.provider.name"))
		assert.Equal(t, root, c.str("gen_ai.request.model"))
		assert.Positive(t, c.attrs["gen_ai.usage.input_tokens"].GetIntValue())
		assert.Positive(t, c.attrs["gen_ai.usage.output_tokens"].GetIntValue())
		require.NotNil(t, c.attrs["gen_ai.response.finish_reasons"])
	}
	var reasons []string
	for _, c := range chats {
		reasons = append(reasons, c.attrs["gen_ai.response.finish_reasons"].GetArrayValue().GetValues()[0].GetStringValue())
	}
	assert.ElementsMatch(t, []string{"tool-calls", "stop"}, reasons)
	readFile := tree.one("execute_tool read_file", "")
	assert.Equal(t, "read_file", readFile.str("gen_ai.tool.name"))
	assert.Contains(t, []string{driveRuns[0].id, driveRuns[1].id}, readFile.parent)
	tree.one("execute_tool subagent", "")

	// The nested run is a child workflow of the root's, its sdk child under its activity.
	startNested := tree.one("StartChildWorkflow:"+workflows.WorkflowName, rootID)
	tree.childOf(startNested, rootRun)
	nestedRun := tree.one("RunWorkflow:"+workflows.WorkflowName, nestedID)
	tree.childOf(nestedRun, startNested)
	startSDK := tree.one("StartActivity:"+workflows.ActivityRunSDKChild, nestedID)
	tree.childOf(startSDK, nestedRun)
	attempts := tree.find("RunActivity:"+workflows.ActivityRunSDKChild, nestedID)
	require.Len(t, attempts, 2, "the stopped worker's attempt and the second worker's")
	var childChats int
	for _, a := range attempts {
		tree.childOf(a, startSDK)
		for _, sp := range spans {
			if sp.parent == a.id && sp.service == "subflow-agent" {
				assert.Equal(t, "chat "+sdkLeaf, sp.name)
				assert.Equal(t, sdkLeaf, sp.str("gen_ai.request.model"))
				childChats++
			}
		}
	}
	assert.Positive(t, childChats, "the sdk child runtime's model requests join the trace under its activity")
}

// stopWorker stops a worker process as an operator does (SIGTERM: it drains, flushing its
// spans) and waits until it is gone.
func stopWorker(t testing.TB, w *workerProc) {
	t.Helper()
	require.NoError(t, w.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-w.done:
	case <-time.After(waitLimit):
		t.Fatalf("worker %d did not stop", w.pid())
	}
}

// requireReplayed asserts that the run's workflow tasks ran on two workers, so the second one
// replayed its history.
func requireReplayed(t testing.TB, workflowID string) {
	t.Helper()
	run := env.c.GetWorkflow(context.Background(), workflowID, "")
	identities := map[string]bool{}
	for _, ev := range history(t, env.c, run) {
		if a := ev.GetWorkflowTaskStartedEventAttributes(); a != nil {
			identities[a.GetIdentity()] = true
		}
	}
	require.Len(t, identities, 2, "workflow tasks of %s ran on both workers: %v", workflowID, identities)
}
