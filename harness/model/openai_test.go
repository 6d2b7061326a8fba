package model

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subflow-dev/subflow/harness/session"
)

// fakeAPI is an OpenAI-compatible chat-completions server speaking the real SSE wire format.
// It records every request it receives.
type fakeAPI struct {
	srv *httptest.Server

	mu       sync.Mutex
	requests []recordedRequest
}

type recordedRequest struct {
	Path   string
	Auth   string
	Header http.Header
	Body   []byte
}

func newFakeAPI(t *testing.T, handle func(w http.ResponseWriter, r *http.Request, n int)) *fakeAPI {
	t.Helper()
	f := &fakeAPI{}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.requests = append(f.requests, recordedRequest{Path: r.URL.Path, Auth: r.Header.Get("Authorization"), Header: r.Header.Clone(), Body: body})
		n := len(f.requests)
		f.mu.Unlock()
		handle(w, r, n)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeAPI) received(t *testing.T) []recordedRequest {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]recordedRequest(nil), f.requests...)
}

// body decodes the i-th request body.
func (f *fakeAPI) body(t *testing.T, i int) map[string]any {
	t.Helper()
	reqs := f.received(t)
	require.Greater(t, len(reqs), i)
	var m map[string]any
	require.NoError(t, json.Unmarshal(reqs[i].Body, &m))
	return m
}

// writeSSE sends each payload as one `data:` event, flushing after each, then `data: [DONE]`.
func writeSSE(w http.ResponseWriter, payloads ...string) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	for _, p := range payloads {
		fmt.Fprintf(w, "data: %s\n\n", p)
		w.(http.Flusher).Flush()
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
	w.(http.Flusher).Flush()
}

// chunk builds a chat.completion.chunk with one choice.
func chunk(delta string, finish string) string {
	fr := "null"
	if finish != "" {
		fr = fmt.Sprintf("%q", finish)
	}
	return fmt.Sprintf(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"deepseek-chat","system_fingerprint":"fp_1","choices":[{"index":0,"delta":%s,"logprobs":null,"finish_reason":%s}],"usage":null}`, delta, fr)
}

func textDelta(s string) string {
	b, _ := json.Marshal(s)
	return chunk(fmt.Sprintf(`{"content":%s}`, b), "")
}

func usageChunk(in, out int) string {
	return fmt.Sprintf(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"deepseek-chat","choices":[],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}}`, in, out, in+out)
}

func writeAPIError(w http.ResponseWriter, status int, typ, msg string, header map[string]string) {
	for k, v := range header {
		w.Header().Set(k, v)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"error":{"message":%q,"type":%q,"param":null,"code":null}}`, msg, typ)
}

func newTestAdapter(f *fakeAPI) *OpenAICompatible {
	return NewOpenAICompatible(OpenAIOptions{
		Provider: ProviderDeepSeek,
		BaseURL:  f.srv.URL,
		APIKey:   "test-key",
		KeyEnv:   "DEEPSEEK_API_KEY",
		// The errors surface at once; TestOpenAIWaitsOutRateLimits covers the waits.
		RateLimitWait: -1,
	})
}

// TestOpenAIWaitsOutRateLimits: a 429 and a 503 with Retry-After are waited out and the
// request sent again, without failing; the waits are reported (the worker's heartbeat shows
// them) and every request went through the admission, released after it.
func TestOpenAIWaitsOutRateLimits(t *testing.T) {
	f := newFakeAPI(t, func(w http.ResponseWriter, r *http.Request, n int) {
		switch n {
		case 1:
			writeAPIError(w, http.StatusTooManyRequests, "rate_limit", "slow down", map[string]string{"Retry-After": "1"})
		case 2:
			writeAPIError(w, http.StatusServiceUnavailable, "overloaded", "busy", map[string]string{"Retry-After": "0"})
		default:
			writeSSE(w, textDelta("third time"), chunk(`{}`, "stop"))
		}
	})
	m := NewOpenAICompatible(OpenAIOptions{Provider: ProviderOpenAICompatible, BaseURL: f.srv.URL, APIKey: "k", DefaultModel: "m"})
	var notes []string
	admitted, released := 0, 0
	ctx := WithAdmission(context.Background(), Admission{
		Admit: func(_ context.Context, provider string) (func(), error) {
			assert.Equal(t, ProviderOpenAICompatible, provider)
			admitted++
			return func() { released++ }, nil
		},
		OnWait: func(note string) { notes = append(notes, note) },
	})
	resp, err := m.Stream(ctx, userRequest("hi"), nil)
	require.NoError(t, err)
	assert.Equal(t, "third time", resp.Text)
	assert.Len(t, f.received(t), 3)
	assert.Equal(t, 3, admitted)
	assert.Equal(t, 3, released)
	require.Len(t, notes, 4)
	assert.Contains(t, notes[0], "waiting for rate limit")
	assert.Contains(t, notes[0], "429")
	assert.Equal(t, "", notes[1])
	assert.Contains(t, notes[2], "503")
}

// TestOpenAIRateLimitWaitBounded: a 429 that never ends fails the request once the wait
// budget is spent, with the provider's error.
func TestOpenAIRateLimitWaitBounded(t *testing.T) {
	f := newFakeAPI(t, func(w http.ResponseWriter, r *http.Request, n int) {
		writeAPIError(w, http.StatusTooManyRequests, "rate_limit", "quota exhausted", map[string]string{"Retry-After": "1"})
	})
	m := NewOpenAICompatible(OpenAIOptions{BaseURL: f.srv.URL, APIKey: "k", DefaultModel: "m", RateLimitWait: 1500 * time.Millisecond})
	_, err := m.Stream(context.Background(), userRequest("hi"), nil)
	var apiErr *APIError
	require.ErrorAs(t, err, &apiErr)
	assert.Equal(t, http.StatusTooManyRequests, apiErr.StatusCode)
	assert.Len(t, f.received(t), 2, "one wait of 1s fits the budget, a second does not")
}

func userRequest(text string) Request {
	return Request{
		SessionID: "s1",
		Model:     "deepseek-chat",
		Messages:  []Message{{Role: RoleUser, Content: []session.Block{session.Text(text)}}},
	}
}

func collect(deltas *[]string) func(string) {
	return func(d string) { *deltas = append(*deltas, d) }
}

func TestOpenAIStreamsTextDeltasAndUsage(t *testing.T) {
	f := newFakeAPI(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		writeSSE(w,
			chunk(`{"role":"assistant","content":""}`, ""),
			textDelta("Hel"),
			textDelta("lo, "),
			textDelta("wörld"),
			chunk(`{}`, "stop"),
			usageChunk(12, 5),
		)
	})
	var deltas []string
	resp, err := newTestAdapter(f).Stream(context.Background(), userRequest("hi"), collect(&deltas))
	require.NoError(t, err)

	assert.Equal(t, []string{"Hel", "lo, ", "wörld"}, deltas)
	assert.Equal(t, Response{
		Text:   "Hello, wörld",
		Finish: FinishStop,
		Usage:  session.Usage{InputTokens: 12, OutputTokens: 5},
	}, resp)

	reqs := f.received(t)
	require.Len(t, reqs, 1)
	assert.Equal(t, "/chat/completions", reqs[0].Path)
	assert.Equal(t, "Bearer test-key", reqs[0].Auth)
}

func TestOpenAIBaseURLWithPath(t *testing.T) {
	f := newFakeAPI(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		writeSSE(w, textDelta("ok"), chunk(`{}`, "stop"))
	})
	m := NewOpenAICompatible(OpenAIOptions{Provider: ProviderOpenAICompatible, BaseURL: f.srv.URL + "/v1", APIKey: "k"})
	_, err := m.Stream(context.Background(), userRequest("hi"), nil)
	require.NoError(t, err)
	assert.Equal(t, "/v1/chat/completions", f.received(t)[0].Path)
}

func TestOpenAIAssemblesToolCallDeltas(t *testing.T) {
	f := newFakeAPI(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		writeSSE(w,
			chunk(`{"role":"assistant","content":"Let me look."}`, ""),
			// First call: id and name first, the arguments split mid-JSON over several events.
			chunk(`{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"read_file","arguments":""}}]}`, ""),
			chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"pa"}}]}`, ""),
			chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"th\": \"a/b"}}]}`, ""),
			chunk(`{"tool_calls":[{"index":0,"function":{"arguments":".txt\"}"}}]}`, ""),
			// Second call, split as well.
			chunk(`{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"grep","arguments":"{\"pattern\":"}}]}`, ""),
			chunk(`{"tool_calls":[{"index":1,"function":{"arguments":" \"fo"}}]}`, ""),
			chunk(`{"tool_calls":[{"index":1,"function":{"arguments":"o\", \"n\": 3}"}}]}`, ""),
			// Third call without arguments at all.
			chunk(`{"tool_calls":[{"index":2,"id":"call_c","type":"function","function":{"name":"list","arguments":""}}]}`, ""),
			chunk(`{}`, "tool_calls"),
			usageChunk(40, 30),
		)
	})
	var deltas []string
	resp, err := newTestAdapter(f).Stream(context.Background(), userRequest("read it"), collect(&deltas))
	require.NoError(t, err)

	assert.Equal(t, []string{"Let me look."}, deltas)
	assert.Equal(t, "Let me look.", resp.Text)
	assert.Equal(t, FinishToolCalls, resp.Finish)
	require.Len(t, resp.ToolCalls, 3)
	assert.Equal(t, "call_a", resp.ToolCalls[0].ID)
	assert.Equal(t, "read_file", resp.ToolCalls[0].Name)
	assert.JSONEq(t, `{"path":"a/b.txt"}`, string(resp.ToolCalls[0].Input))
	assert.Equal(t, "call_b", resp.ToolCalls[1].ID)
	assert.Equal(t, "grep", resp.ToolCalls[1].Name)
	assert.JSONEq(t, `{"pattern":"foo","n":3}`, string(resp.ToolCalls[1].Input))
	assert.Equal(t, ToolCall{ID: "call_c", Name: "list", Input: json.RawMessage(`{}`)}, resp.ToolCalls[2])
	assert.Equal(t, session.Usage{InputTokens: 40, OutputTokens: 30}, resp.Usage)
}

func TestOpenAIFinishLength(t *testing.T) {
	f := newFakeAPI(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		writeSSE(w, textDelta("cut o"), chunk(`{}`, "length"), usageChunk(3, 2))
	})
	resp, err := newTestAdapter(f).Stream(context.Background(), userRequest("long"), nil)
	require.NoError(t, err)
	assert.Equal(t, FinishLength, resp.Finish)
	assert.Equal(t, "cut o", resp.Text)
}

func TestOpenAIFinishLengthDropsTruncatedToolCall(t *testing.T) {
	f := newFakeAPI(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		writeSSE(w,
			chunk(`{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"write","arguments":"{\"text\": \"abc"}}]}`, ""),
			chunk(`{}`, "length"),
		)
	})
	resp, err := newTestAdapter(f).Stream(context.Background(), userRequest("write"), nil)
	require.NoError(t, err)
	assert.Equal(t, FinishLength, resp.Finish)
	assert.Empty(t, resp.ToolCalls)
}

func TestOpenAIInvalidToolArgumentsFail(t *testing.T) {
	f := newFakeAPI(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		writeSSE(w,
			chunk(`{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"write","arguments":"not json"}}]}`, ""),
			chunk(`{}`, "tool_calls"),
		)
	})
	_, err := newTestAdapter(f).Stream(context.Background(), userRequest("write"), nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `deepseek-official model "deepseek-chat"`)
	assert.Contains(t, err.Error(), "call_a (write)")
}

func TestOpenAISendsRequestBody(t *testing.T) {
	f := newFakeAPI(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		writeSSE(w, textDelta("done"), chunk(`{}`, "stop"))
	})
	req := Request{
		SessionID: "s1",
		Model:     "deepseek-chat",
		System:    "You are terse.",
		MaxTokens: 256,
		Messages: []Message{
			{Role: RoleUser, Content: []session.Block{session.Text("read a.txt")}},
			{Role: RoleAssistant, Content: []session.Block{
				session.Text("Reading."),
				{Type: session.BlockToolCall, ID: "call_1", Name: "read_file", Input: json.RawMessage(`{"path":"a.txt"}`)},
				{Type: session.BlockToolCall, ID: "call_2", Name: "list"},
			}},
			{Role: RoleTool, ToolCallID: "call_1", Content: []session.Block{session.Text("hello")}},
			{Role: RoleTool, ToolCallID: "call_2", IsError: true, Content: []session.Block{session.Text("Error: no")}},
			{Role: RoleAssistant, Content: []session.Block{session.Text("It says hello.")}},
			{Role: RoleUser, Content: []session.Block{session.Text("thanks"), session.Text("!")}},
		},
		Tools: []ToolSchema{{
			Name:        "read_file",
			Description: "Read a file.",
			Parameters:  json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`),
		}},
	}
	_, err := newTestAdapter(f).Stream(context.Background(), req, nil)
	require.NoError(t, err)

	body := f.body(t, 0)
	assert.Equal(t, "deepseek-chat", body["model"])
	assert.Equal(t, true, body["stream"])
	assert.Equal(t, float64(256), body["max_tokens"])
	assert.NotContains(t, body, "max_completion_tokens")
	assert.Equal(t, map[string]any{"include_usage": true}, body["stream_options"])

	messages, _ := json.Marshal(body["messages"])
	assert.JSONEq(t, `[
		{"role":"system","content":"You are terse."},
		{"role":"user","content":"read a.txt"},
		{"role":"assistant","content":"Reading.","tool_calls":[
			{"id":"call_1","type":"function","function":{"name":"read_file","arguments":"{\"path\":\"a.txt\"}"}},
			{"id":"call_2","type":"function","function":{"name":"list","arguments":"{}"}}
		]},
		{"role":"tool","tool_call_id":"call_1","content":"hello"},
		{"role":"tool","tool_call_id":"call_2","content":"Error: no"},
		{"role":"assistant","content":"It says hello."},
		{"role":"user","content":"thanks!"}
	]`, string(messages))

	tools, _ := json.Marshal(body["tools"])
	assert.JSONEq(t, `[{"type":"function","function":{
		"name":"read_file","description":"Read a file.",
		"parameters":{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}
	}}]`, string(tools))
}

func TestOpenAIOmitsUnsetFields(t *testing.T) {
	f := newFakeAPI(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		writeSSE(w, textDelta("ok"), chunk(`{}`, "stop"))
	})
	req := userRequest("hi")
	req.Messages = append(req.Messages, Message{Role: RoleAssistant, Content: []session.Block{
		{Type: session.BlockToolCall, ID: "call_1", Name: "list", Input: json.RawMessage(`{}`)},
	}})
	_, err := newTestAdapter(f).Stream(context.Background(), req, nil)
	require.NoError(t, err)

	body := f.body(t, 0)
	assert.NotContains(t, body, "max_tokens")
	assert.NotContains(t, body, "tools")
	messages := body["messages"].([]any)
	require.Len(t, messages, 2, "no system message when System is empty")
	assert.NotContains(t, messages[1], "content", "a tool-call-only assistant message has no content")
}

func TestOpenAIErrors(t *testing.T) {
	cases := []struct {
		name       string
		status     int
		header     map[string]string
		apiMessage string
		wantParts  []string
		notParts   []string
		retryAfter string
	}{
		{
			name:       "bad key",
			status:     http.StatusUnauthorized,
			apiMessage: "Authentication Fails, Your api key: ****abcd is invalid",
			wantParts:  []string{`deepseek-official model "deepseek-chat"`, "API key rejected (401 Unauthorized)", "DEEPSEEK_API_KEY"},
			notParts:   []string{"abcd"},
		},
		{
			name:       "forbidden",
			status:     http.StatusForbidden,
			apiMessage: "no access",
			wantParts:  []string{"API key rejected (403 Forbidden)", "DEEPSEEK_API_KEY"},
		},
		{
			name:       "rate limited",
			status:     http.StatusTooManyRequests,
			header:     map[string]string{"Retry-After": "7"},
			apiMessage: "Rate limit reached",
			wantParts:  []string{`deepseek-official model "deepseek-chat"`, "rate limited (429 Too Many Requests)", "retry after 7s", "Rate limit reached"},
			retryAfter: "7",
		},
		{
			name:       "server error",
			status:     http.StatusInternalServerError,
			apiMessage: "The server had an error",
			wantParts:  []string{`deepseek-official model "deepseek-chat"`, "server error (500 Internal Server Error)", "The server had an error"},
		},
		{
			name:       "bad request",
			status:     http.StatusBadRequest,
			apiMessage: "max_tokens is too large",
			wantParts:  []string{"request rejected (400 Bad Request): max_tokens is too large"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeAPI(t, func(w http.ResponseWriter, r *http.Request, _ int) {
				writeAPIError(w, tc.status, "some_error", tc.apiMessage, tc.header)
			})
			var deltas []string
			resp, err := newTestAdapter(f).Stream(context.Background(), userRequest("hi"), collect(&deltas))
			require.Error(t, err)
			assert.Zero(t, resp)
			assert.Empty(t, deltas)

			var apiErr *APIError
			require.ErrorAs(t, err, &apiErr)
			assert.Equal(t, tc.status, apiErr.StatusCode)
			assert.Equal(t, tc.retryAfter, apiErr.RetryAfter)
			for _, p := range tc.wantParts {
				assert.Contains(t, err.Error(), p)
			}
			for _, p := range tc.notParts {
				assert.NotContains(t, err.Error(), p)
			}
			assert.Len(t, f.received(t), 1, "MaxRetries 0 sends one request")
		})
	}
}

func TestOpenAIRetriesServerErrors(t *testing.T) {
	f := newFakeAPI(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if n == 1 {
			writeAPIError(w, http.StatusServiceUnavailable, "overloaded", "busy", map[string]string{"Retry-After-Ms": "1"})
			return
		}
		writeSSE(w, textDelta("second time"), chunk(`{}`, "stop"))
	})
	m := NewOpenAICompatible(OpenAIOptions{Provider: ProviderDeepSeek, BaseURL: f.srv.URL, APIKey: "k", MaxRetries: 1})
	resp, err := m.Stream(context.Background(), userRequest("hi"), nil)
	require.NoError(t, err)
	assert.Equal(t, "second time", resp.Text)
	assert.Len(t, f.received(t), 2)
}

func TestOpenAIStreamErrorEvent(t *testing.T) {
	f := newFakeAPI(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		writeSSE(w, textDelta("par"), `{"error":{"message":"model overloaded","type":"server_error"}}`)
	})
	var deltas []string
	_, err := newTestAdapter(f).Stream(context.Background(), userRequest("hi"), collect(&deltas))
	require.Error(t, err)
	assert.Contains(t, err.Error(), `deepseek-official model "deepseek-chat"`)
	assert.Contains(t, err.Error(), "model overloaded")
	assert.Equal(t, []string{"par"}, deltas)
}

func TestOpenAIStreamCutWithoutFinish(t *testing.T) {
	f := newFakeAPI(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "data: %s\n\n", textDelta("half"))
	})
	_, err := newTestAdapter(f).Stream(context.Background(), userRequest("hi"), nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "stream ended without a finish reason")
}

func TestOpenAICancelMidStream(t *testing.T) {
	f := newFakeAPI(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, d := range []string{"one ", "two "} {
			fmt.Fprintf(w, "data: %s\n\n", textDelta(d))
			w.(http.Flusher).Flush()
		}
		// Never finishes: only the client going away ends this response.
		<-r.Context().Done()
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var deltas []string
	onText := func(d string) {
		deltas = append(deltas, d)
		if len(deltas) == 2 {
			cancel()
		}
	}
	resp, err := newTestAdapter(f).Stream(ctx, userRequest("hi"), onText)
	require.ErrorIs(t, err, context.Canceled)
	assert.Zero(t, resp)
	assert.Equal(t, []string{"one ", "two "}, deltas)
}

func TestOpenAICancelBeforeRequest(t *testing.T) {
	f := newFakeAPI(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		writeSSE(w, textDelta("x"), chunk(`{}`, "stop"))
	})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := newTestAdapter(f).Stream(ctx, userRequest("hi"), nil)
	require.ErrorIs(t, err, context.Canceled)
}

func TestDeepSeekFromEnv(t *testing.T) {
	f := newFakeAPI(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		writeSSE(w, textDelta("hi"), chunk(`{}`, "stop"))
	})
	t.Setenv("DEEPSEEK_BASE_URL", f.srv.URL)
	t.Setenv("DEEPSEEK_API_KEY", "env-key")
	t.Setenv("OPENAI_ORG_ID", "org-should-not-leak")

	req := userRequest("hi")
	req.Model = ""
	_, err := DeepSeekFromEnv().Stream(context.Background(), req, nil)
	require.NoError(t, err)

	got := f.received(t)[0]
	assert.Equal(t, "Bearer env-key", got.Auth)
	assert.Empty(t, got.Header.Get("OpenAI-Organization"))
	assert.Equal(t, DeepSeekModel, f.body(t, 0)["model"], "empty model name falls back to deepseek-chat")
}

func TestMissingKeyFailsAtRequestTime(t *testing.T) {
	f := newFakeAPI(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		writeSSE(w, textDelta("hi"), chunk(`{}`, "stop"))
	})
	t.Setenv("DEEPSEEK_BASE_URL", f.srv.URL)
	t.Setenv("DEEPSEEK_API_KEY", "")
	t.Setenv("OPENAI_BASE_URL", f.srv.URL)
	t.Setenv("OPENAI_API_KEY", "")

	reg := NewDefaultRegistry() // registration itself must not fail without keys
	for provider, env := range map[string]string{ProviderDeepSeek: "DEEPSEEK_API_KEY", ProviderOpenAICompatible: "OPENAI_API_KEY"} {
		m, err := reg.Lookup(provider)
		require.NoError(t, err)
		_, err = m.Stream(context.Background(), userRequest("hi"), nil)
		var missing *MissingAPIKeyError
		require.ErrorAs(t, err, &missing, provider)
		assert.Equal(t, fmt.Sprintf("%s model %q: no API key: set %s", provider, "deepseek-chat", env), err.Error())
	}
	assert.Empty(t, f.received(t), "no request is sent without a key")
}

func TestDefaultRegistryProviders(t *testing.T) {
	assert.Equal(t, []string{ProviderDeepSeek, ProviderOpenAICompatible, ProviderScripted}, NewDefaultRegistry().Providers())
}

func TestOpenAIRejectsBadRequestShape(t *testing.T) {
	f := newFakeAPI(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		writeSSE(w, textDelta("x"), chunk(`{}`, "stop"))
	})
	req := userRequest("hi")
	req.Tools = []ToolSchema{{Name: "broken", Parameters: json.RawMessage(`{"type":`)}}
	_, err := newTestAdapter(f).Stream(context.Background(), req, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `tool "broken": parameters schema`)

	req = userRequest("hi")
	req.Messages[0].Role = "robot"
	_, err = newTestAdapter(f).Stream(context.Background(), req, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `message 0: unknown role "robot"`)
	assert.Empty(t, f.received(t))
}

func BenchmarkOpenAIStream(b *testing.B) {
	payloads := []string{chunk(`{"role":"assistant","content":""}`, "")}
	for range 50 {
		payloads = append(payloads, textDelta("token "))
	}
	payloads = append(payloads, chunk(`{}`, "stop"), usageChunk(10, 50))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		writeSSE(w, payloads...)
	}))
	defer srv.Close()
	m := NewOpenAICompatible(OpenAIOptions{Provider: ProviderDeepSeek, BaseURL: srv.URL, APIKey: "k"})
	req := userRequest("hi")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.Stream(context.Background(), req, func(string) {}); err != nil {
			b.Fatal(err)
		}
	}
}

// stalledAPI answers with the headers and one text delta, then sends nothing more until the
// client goes away: a stream stalled mid-answer.
func stalledAPI(t *testing.T) *fakeAPI {
	return newFakeAPI(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "data: %s\n\n", textDelta("partial "))
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
}

func TestOpenAIStreamIdleTimeout(t *testing.T) {
	f := stalledAPI(t)
	m := NewOpenAICompatible(OpenAIOptions{
		Provider: ProviderDeepSeek, BaseURL: f.srv.URL, APIKey: "k",
		StreamIdleTimeout: 50 * time.Millisecond,
	})
	var deltas []string
	_, err := m.Stream(context.Background(), userRequest("hi"), collect(&deltas))
	var te *TimeoutError
	require.ErrorAs(t, err, &te)
	assert.True(t, te.Idle)
	assert.True(t, IsRetryable(err))
	assert.EqualError(t, err, `deepseek-official model "deepseek-chat": timed out: no response data for 50ms (stream-idle timeout)`)
	assert.Equal(t, []string{"partial "}, deltas)
}

func TestOpenAIRequestTimeout(t *testing.T) {
	// Chunks keep coming, so only the request timeout can end this stream.
	f := newFakeAPI(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		w.Header().Set("Content-Type", "text/event-stream")
		for r.Context().Err() == nil {
			fmt.Fprintf(w, "data: %s\n\n", textDelta("x"))
			w.(http.Flusher).Flush()
			time.Sleep(5 * time.Millisecond) // pacing of the fake server, not synchronisation
		}
	})
	m := NewOpenAICompatible(OpenAIOptions{
		Provider: ProviderDeepSeek, BaseURL: f.srv.URL, APIKey: "k",
		RequestTimeout: 100 * time.Millisecond, StreamIdleTimeout: time.Minute,
	})
	_, err := m.Stream(context.Background(), userRequest("hi"), nil)
	var te *TimeoutError
	require.ErrorAs(t, err, &te)
	assert.False(t, te.Idle)
	assert.True(t, IsRetryable(err))
}

func TestOpenAICancelIsNotATimeout(t *testing.T) {
	f := stalledAPI(t)
	ctx, cancel := context.WithCancel(context.Background())
	_, err := newTestAdapter(f).Stream(ctx, userRequest("hi"), func(string) { cancel() })
	require.ErrorIs(t, err, context.Canceled)
	assert.False(t, IsRetryable(err))
}
