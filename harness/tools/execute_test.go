package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type observed struct {
	call   Call
	result Result
}

// recordObserver adds an observer to s that appends what it sees to *seen.
func recordObserver(s *Scope, seen *[]observed) func() {
	return s.AddObserver(func(_ Env, call Call, result Result) {
		*seen = append(*seen, observed{call, result})
	})
}

func TestGuardDenialSkipsHandler(t *testing.T) {
	calls := 0
	s := NewScope(nil)
	_, err := s.Register(echoTool("act", &calls))
	require.NoError(t, err)
	var order []string
	s.AddGuard(func(context.Context, Env, Call) string { order = append(order, "allow"); return "" })
	s.AddGuard(func(_ context.Context, _ Env, call Call) string {
		order = append(order, "first")
		return "first says no to " + call.Name
	})
	s.AddGuard(func(context.Context, Env, Call) string { order = append(order, "second"); return "second says no" })

	res := s.Execute(context.Background(), Env{}, Call{ID: "1", Name: "act"})
	assert.Equal(t, Result{Content: ErrorResult("first says no to act").Content, IsError: true}, res)
	assert.Equal(t, "Error: first says no to act", resultText(res))
	assert.Equal(t, []string{"allow", "first"}, order, "guards run in order and stop at the first denial")
	assert.Zero(t, calls)
}

func TestRemovedGuardNoLongerDenies(t *testing.T) {
	calls := 0
	s := NewScope(nil)
	_, err := s.Register(echoTool("act", &calls))
	require.NoError(t, err)
	remove := s.AddGuard(func(context.Context, Env, Call) string { return "no" })
	remove()
	remove()

	res := s.Execute(context.Background(), Env{}, Call{ID: "1", Name: "act"})
	assert.False(t, res.IsError)
	assert.Equal(t, 1, calls)
}

func TestObserversSeeEveryFinalResult(t *testing.T) {
	global := &Registry{}
	require.NoError(t, global.Register(echoTool("ok", nil)))
	needs := echoTool("needs", nil)
	needs.NeedsApproval = func(Env, Call) bool { return true }
	require.NoError(t, global.Register(needs))
	s := NewScope(global)
	s.AddGuard(func(_ context.Context, _ Env, call Call) string {
		if string(call.Input) == `{"deny":true}` {
			return "denied"
		}
		return ""
	})
	var first, second []observed
	recordObserver(s, &first)
	removeSecond := recordObserver(s, &second)

	ctx := context.Background()
	results := []Result{
		s.Execute(ctx, Env{}, Call{ID: "1", Name: "ok", Input: json.RawMessage(`{"a":1}`)}),
		s.Execute(ctx, Env{}, Call{ID: "2", Name: "ok", Input: json.RawMessage(`{"deny":true}`)}),
		s.Execute(ctx, Env{}, Call{ID: "3", Name: "missing"}),
		s.Execute(ctx, Env{}, Call{ID: "4", Name: "ok", Input: json.RawMessage(`[1]`)}),
		s.Execute(ctx, Env{}, Call{ID: "5", Name: "needs"}),
	}
	require.Len(t, first, len(results))
	for i, o := range first {
		assert.Equal(t, fmt.Sprint(i+1), o.call.ID)
		assert.Equal(t, results[i], o.result, "observer sees exactly the returned result")
	}
	assert.Equal(t, first, second)
	assert.False(t, first[0].result.IsError)
	assert.Equal(t, "Error: denied", resultText(first[1].result))
	assert.True(t, first[2].result.IsError)
	assert.True(t, first[3].result.IsError)
	assert.True(t, first[4].result.IsError)

	removeSecond()
	s.Execute(ctx, Env{}, Call{ID: "6", Name: "ok"})
	assert.Len(t, first, 6)
	assert.Len(t, second, 5)
}

func TestApprovalIsRejectedWithoutRunningHandler(t *testing.T) {
	calls := 0
	global := &Registry{}
	tool := echoTool("deploy", &calls)
	tool.NeedsApproval = func(env Env, _ Call) bool { return env.SandboxMode == SandboxReadOnly }
	require.NoError(t, global.Register(tool))
	s := NewScope(global)
	ctx := context.Background()

	res := s.Execute(ctx, Env{SandboxMode: SandboxReadOnly, ApprovalPolicy: ApprovalNever}, Call{ID: "1", Name: "deploy"})
	assert.True(t, res.IsError)
	assert.Equal(t, `Error: deploy needs approval while the sandbox is read-only; it was rejected automatically because no approver is available (approval policy "never")`,
		resultText(res))
	res = s.Execute(ctx, Env{SandboxMode: SandboxReadOnly}, Call{ID: "2", Name: "deploy"})
	assert.Equal(t, `Error: deploy needs approval while the sandbox is read-only; it was rejected automatically because no approver is available`,
		resultText(res))
	assert.Zero(t, calls)

	res = s.Execute(ctx, Env{SandboxMode: SandboxWorkspaceWrite, ApprovalPolicy: ApprovalNever}, Call{ID: "3", Name: "deploy"})
	assert.False(t, res.IsError)
	assert.Equal(t, 1, calls)
}

func TestHandlerErrorAndPanicBecomeErrorResults(t *testing.T) {
	s := NewScope(nil)
	failing := echoTool("failing", nil)
	failing.Handler = func(context.Context, Env, Call) (Result, error) {
		return TextResult("ignored"), errors.New("disk on fire")
	}
	panicking := echoTool("panicking", nil)
	panicking.Handler = func(context.Context, Env, Call) (Result, error) {
		var m map[string]int
		m["x"] = 1 // nil map write: a real runtime panic
		return Result{}, nil
	}
	for _, tool := range []Tool{failing, panicking} {
		_, err := s.Register(tool)
		require.NoError(t, err)
	}
	var seen []observed
	recordObserver(s, &seen)

	res := s.Execute(context.Background(), Env{}, Call{ID: "1", Name: "failing"})
	assert.Equal(t, ErrorResult("disk on fire"), res)

	res = s.Execute(context.Background(), Env{}, Call{ID: "2", Name: "panicking"})
	assert.True(t, res.IsError)
	assert.Equal(t, "Error: tool panicking panicked: assignment to entry in nil map", resultText(res))
	require.Len(t, seen, 2)
	assert.Equal(t, res, seen[1].result)
}

func TestInvalidInputIsRejectedBeforeHandler(t *testing.T) {
	calls := 0
	s := NewScope(nil)
	_, err := s.Register(echoTool("act", &calls))
	require.NoError(t, err)

	for _, input := range []string{`{"a":`, `[1,2]`, `"text"`, `null`, `42`} {
		res := s.Execute(context.Background(), Env{}, Call{ID: "1", Name: "act", Input: json.RawMessage(input)})
		assert.True(t, res.IsError, input)
		assert.Contains(t, resultText(res), "Error: invalid arguments: the input of act must be a JSON object", input)
	}
	assert.Zero(t, calls)

	var seen []observed
	recordObserver(s, &seen)
	res := s.Execute(context.Background(), Env{}, Call{ID: "2", Name: "act", Input: json.RawMessage(" ")})
	assert.Equal(t, "act {}", resultText(res), "empty input is taken as {}")
	assert.JSONEq(t, `{}`, string(seen[0].call.Input))
}

// TestStructuredOutputMechanismsFit plays contract with a scoped tool, a guard and an
// observer, the way the structured-output runtime is meant to use them: stage in the handler,
// commit when the same execution's final result succeeds, deny every later call.
func TestStructuredOutputMechanismsFit(t *testing.T) {
	global := newGlobal(t, "read_file")
	s := NewScope(global)
	var mu sync.Mutex
	staged := map[string]json.RawMessage{}
	var committed json.RawMessage
	_, err := s.Register(Tool{
		Name:        "structured_output",
		Description: "Report your final structured result.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"answer":{"type":"integer"}},"required":["answer"]}`),
		Handler: func(_ context.Context, _ Env, call Call) (Result, error) {
			var v struct{ Answer *int }
			if err := json.Unmarshal(call.Input, &v); err != nil || v.Answer == nil {
				return Result{}, errors.New("invalid arguments: answer is required")
			}
			mu.Lock()
			staged[call.ID] = call.Input
			mu.Unlock()
			return TextResult("Structured output recorded."), nil
		},
	})
	require.NoError(t, err)
	s.AddGuard(func(_ context.Context, _ Env, call Call) string {
		mu.Lock()
		defer mu.Unlock()
		if committed != nil {
			return "structured output already recorded: the run is complete, so `" + call.Name + "` is not executed"
		}
		return ""
	})
	s.AddObserver(func(_ Env, call Call, res Result) {
		mu.Lock()
		defer mu.Unlock()
		if v, ok := staged[call.ID]; ok && !res.IsError && committed == nil {
			committed = v
		}
		delete(staged, call.ID)
	})

	ctx := context.Background()
	// One model response with four calls, executed in order.
	r1 := s.Execute(ctx, Env{}, Call{ID: "c1", Name: "structured_output", Input: json.RawMessage(`{}`)})
	r2 := s.Execute(ctx, Env{}, Call{ID: "c2", Name: "read_file", Input: json.RawMessage(`{"path":"x"}`)})
	r3 := s.Execute(ctx, Env{}, Call{ID: "c3", Name: "structured_output", Input: json.RawMessage(`{"answer":42}`)})
	r4 := s.Execute(ctx, Env{}, Call{ID: "c4", Name: "read_file", Input: json.RawMessage(`{"path":"x"}`)})

	assert.Equal(t, "Error: invalid arguments: answer is required", resultText(r1))
	assert.False(t, r2.IsError, "calls before the capture run normally")
	assert.Equal(t, "Structured output recorded.", resultText(r3))
	assert.Equal(t, "Error: structured output already recorded: the run is complete, so `read_file` is not executed", resultText(r4))
	assert.JSONEq(t, `{"answer":42}`, string(committed))

	// Another child over the same registry never sees the tool.
	other := NewScope(global)
	assert.Contains(t, resultText(other.Execute(ctx, Env{}, Call{ID: "c5", Name: "structured_output"})),
		`Error: unknown tool "structured_output"`)
}

func TestExecuteIsSafeForConcurrentUse(t *testing.T) {
	var calls atomic.Int64
	global := &Registry{}
	for i := range 4 {
		name := fmt.Sprintf("t%d", i)
		require.NoError(t, global.Register(Tool{
			Name:       name,
			Parameters: json.RawMessage(`{"type":"object"}`),
			Handler: func(context.Context, Env, Call) (Result, error) {
				calls.Add(1)
				return TextResult(name), nil
			},
		}))
	}
	s := NewScope(global)
	var observedCount atomic.Int64
	s.AddObserver(func(Env, Call, Result) { observedCount.Add(1) })

	const workers, perWorker = 8, 200
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWorker {
				name := fmt.Sprintf("t%d", i%4)
				res := s.Execute(context.Background(), Env{}, Call{ID: fmt.Sprint(w, i), Name: name})
				if !res.IsError {
					assert.Equal(t, name, resultText(res))
				}
			}
		}()
	}
	// Mutate the scope while calls run.
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range perWorker {
			revoke, err := s.Register(echoTool(fmt.Sprintf("scoped%d", i), nil))
			assert.NoError(t, err)
			remove := s.AddGuard(func(context.Context, Env, Call) string { return "" })
			_ = s.Visible()
			remove()
			revoke()
		}
		assert.NoError(t, s.Restrict(nil, []string{"t3"}))
	}()
	wg.Wait()

	assert.Equal(t, int64(workers*perWorker), observedCount.Load())
	assert.LessOrEqual(t, calls.Load(), int64(workers*perWorker))
	assert.GreaterOrEqual(t, calls.Load(), int64(workers*perWorker*3/4))
}

func BenchmarkExecute(b *testing.B) {
	global := &Registry{}
	require.NoError(b, global.Register(echoTool("echo", nil)))
	s := NewScope(global)
	s.AddGuard(func(context.Context, Env, Call) string { return "" })
	s.AddObserver(func(Env, Call, Result) {})
	call := Call{ID: "1", Name: "echo", Input: json.RawMessage(`{"a":1}`)}
	b.ReportAllocs()
	for b.Loop() {
		s.Execute(context.Background(), Env{}, call)
	}
}
