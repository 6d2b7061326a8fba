package inprocess

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subflow-dev/subflow/harness/model"
	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/subagent"
)

const answerSchema = `{"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"], "additionalProperties": false}`

func structuredRequest(parent, schema string) subagent.Request {
	req := request(parent, "answer in structure")
	req.OutputSchema = json.RawMessage(schema)
	return req
}

func structuredTool(t *testing.T, req model.Request) model.ToolSchema {
	t.Helper()
	for _, tool := range req.Tools {
		if tool.Name == StructuredToolName {
			return tool
		}
	}
	t.Fatalf("no %s tool in the request", StructuredToolName)
	return model.ToolSchema{}
}

func TestStructuredCaptureTakesOneModelRequest(t *testing.T) {
	f := newFixture(t)
	f.script(t, "child.json",
		`{"toolCalls": [{"name": "structured_output", "input": {"answer": "42"}}]}`,
		`{"text": "a second request would get this"}`)
	parent := f.parent(t, session.Header{Route: route("child.json")})

	r, err := f.host.Start(context.Background(), structuredRequest(parent, answerSchema), StartOptions{})
	require.NoError(t, err)
	res := result(t, r)
	assert.Equal(t, subagent.StopCompleted, res.StopReason)
	assert.JSONEq(t, `{"answer": "42"}`, string(res.Structured))

	reqs := f.recorder.requests(r.ID())
	require.Len(t, reqs, 1)
	tool := structuredTool(t, reqs[0])
	assert.Equal(t, StructuredToolDescription, tool.Description)
	assert.JSONEq(t, answerSchema, string(tool.Parameters))
	assert.Contains(t, reqs[0].System, "\n\n"+StructuredInstruction)

	results := toolResults(t, f.events(t, r.ID()))
	require.Len(t, results, 1)
	assert.False(t, results[0].IsError)
	assert.Equal(t, "Structured output recorded.", session.JoinText(results[0].Content))
}

func TestStructuredInvalidThenValidInOneTurn(t *testing.T) {
	f := newFixture(t)
	f.script(t, "child.json",
		`{"toolCalls": [{"name": "structured_output", "input": {"answer": 42}}]}`,
		`{"toolCalls": [{"name": "structured_output", "input": {"answer": "forty-two"}}]}`)
	parent := f.parent(t, session.Header{Route: route("child.json")})

	r, err := f.host.Start(context.Background(), structuredRequest(parent, answerSchema), StartOptions{})
	require.NoError(t, err)
	res := result(t, r)
	assert.Equal(t, subagent.StopCompleted, res.StopReason)
	assert.JSONEq(t, `{"answer": "forty-two"}`, string(res.Structured))

	events := f.events(t, r.ID())
	results := toolResults(t, events)
	require.Len(t, results, 2)
	assert.True(t, results[0].IsError)
	assert.Equal(t, "Error: invalid arguments: at /answer: expected string, but got number",
		session.JoinText(results[0].Content))
	assert.False(t, results[1].IsError)
	assert.Len(t, f.recorder.requests(r.ID()), 2)
	n := 0
	for _, typ := range types(events) {
		if typ == session.TypeTurnStart {
			n++
		}
	}
	assert.Equal(t, 1, n, "one turn, no re-prompt")
}

func TestStructuredCallsAfterCaptureAreDenied(t *testing.T) {
	f := newFixture(t)
	f.script(t, "child.json", `{"toolCalls": [
		{"name": "count", "input": {}},
		{"name": "structured_output", "input": {"answer": "first"}},
		{"name": "count", "input": {}},
		{"name": "structured_output", "input": {"answer": "second"}}
	]}`)
	parent := f.parent(t, session.Header{Route: route("child.json")})

	r, err := f.host.Start(context.Background(), structuredRequest(parent, answerSchema), StartOptions{})
	require.NoError(t, err)
	res := result(t, r)
	assert.Equal(t, subagent.StopCompleted, res.StopReason)
	assert.JSONEq(t, `{"answer": "first"}`, string(res.Structured))
	assert.Equal(t, int64(1), f.counted.Load(), "the call before the capture ran, the one after did not")
	assert.Len(t, f.recorder.requests(r.ID()), 1)

	results := toolResults(t, f.events(t, r.ID()))
	require.Len(t, results, 4)
	assert.Equal(t, "1", session.JoinText(results[0].Content))
	assert.Equal(t, "Structured output recorded.", session.JoinText(results[1].Content))
	assert.True(t, results[2].IsError)
	assert.Equal(t, "Error: structured output already recorded: the run is complete, so `count` is not executed",
		session.JoinText(results[2].Content))
	assert.Equal(t, "Error: structured output already recorded: the run is complete, so `structured_output` is not executed",
		session.JoinText(results[3].Content))
}

func TestStructuredProseFinishIsError(t *testing.T) {
	f := newFixture(t)
	f.script(t, "child.json", `{"text": "the answer is 42"}`, `{"text": "a nudge would get this"}`)
	parent := f.parent(t, session.Header{Route: route("child.json")})

	r, err := f.host.Start(context.Background(), structuredRequest(parent, answerSchema), StartOptions{})
	require.NoError(t, err)
	res := result(t, r)
	assert.Equal(t, subagent.StopError, res.StopReason)
	assert.Nil(t, res.Structured)
	assert.Equal(t, []session.Block{session.Text("the answer is 42")}, res.Output)
	assert.Len(t, f.recorder.requests(r.ID()), 1, "no re-prompt")
}

func TestStructuredUnsupportedSchemaRejectedBeforeChildExists(t *testing.T) {
	f := newFixture(t)
	parent := f.parent(t, session.Header{Route: route("child.json")})
	schema := `{"type": "object", "properties": {"v": {"type": "string", "oneOf": [{"type": "string"}, {"type": "null"}]}}}`

	_, err := f.host.Start(context.Background(), structuredRequest(parent, schema), StartOptions{})
	require.EqualError(t, err, subagent.CheckSchema(json.RawMessage(schema)).Error())
	assert.Contains(t, err.Error(), "unsupported JSON schema: schema.properties.v")
	assert.Equal(t, []string{parent}, f.sessions(t))
	assert.Empty(t, f.host.Live())
}

func TestStructuredToolAndSectionOnlyOnStructuredChildren(t *testing.T) {
	f := newFixture(t)
	f.script(t, "plain.json", `{"toolCalls": [{"name": "structured_output", "input": {"answer": "x"}}]}`, `{"text": "plain"}`)
	f.script(t, "structured.json", `{"toolCalls": [{"name": "structured_output", "input": {"answer": "x"}}]}`)
	parent := f.parent(t, session.Header{Route: route("plain.json")})

	plain, err := f.host.Start(context.Background(), request(parent, "go"), StartOptions{})
	require.NoError(t, err)
	req := structuredRequest(parent, answerSchema)
	req.AgentOptions.Model = "structured.json"
	structured, err := f.host.Start(context.Background(), req, StartOptions{})
	require.NoError(t, err)

	assert.Equal(t, subagent.StopCompleted, result(t, plain).StopReason)
	assert.Equal(t, subagent.StopCompleted, result(t, structured).StopReason)
	for _, req := range f.recorder.requests(plain.ID()) {
		assert.NotContains(t, toolNames(req), StructuredToolName)
		assert.NotContains(t, req.System, StructuredInstruction)
	}
	results := toolResults(t, f.events(t, plain.ID()))
	require.Len(t, results, 1)
	assert.Contains(t, session.JoinText(results[0].Content), `Error: unknown tool "structured_output"`)

	for _, req := range f.recorder.requests(structured.ID()) {
		assert.Contains(t, toolNames(req), StructuredToolName)
		assert.Contains(t, req.System, StructuredInstruction)
	}
}

func TestConcurrentStructuredChildrenSeeTheirOwnSchema(t *testing.T) {
	f := newFixture(t)
	schemas := map[string]string{
		"a.json": `{"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}`,
		"b.json": `{"type": "object", "properties": {"b": {"type": "boolean"}}, "required": ["b"]}`,
	}
	values := map[string]string{"a.json": `{"a": 1}`, "b.json": `{"b": true}`}
	for script, v := range values {
		f.script(t, script, `{"delayMs": 50, "toolCalls": [{"name": "structured_output", "input": `+v+`}]}`)
	}
	parent := f.parent(t, session.Header{Route: route("a.json")})

	var wg sync.WaitGroup
	runs := make(map[string]*Run)
	var mu sync.Mutex
	for script, schema := range schemas {
		wg.Go(func() {
			req := structuredRequest(parent, schema)
			req.AgentOptions.Model = script
			r, err := f.host.Start(context.Background(), req, StartOptions{})
			assert.NoError(t, err)
			mu.Lock()
			runs[script] = r
			mu.Unlock()
		})
	}
	wg.Wait()
	for script, r := range runs {
		res := result(t, r)
		assert.Equal(t, subagent.StopCompleted, res.StopReason)
		assert.JSONEq(t, values[script], string(res.Structured))
		reqs := f.recorder.requests(r.ID())
		require.Len(t, reqs, 1)
		assert.JSONEq(t, schemas[script], string(structuredTool(t, reqs[0]).Parameters))
	}
}
