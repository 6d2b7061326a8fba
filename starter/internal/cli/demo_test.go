package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subflow-dev/subflow/worker/app"
)

func TestMain(m *testing.M) {
	// The demo's sdk child is this test binary, as it is the starter in production.
	app.MaybeRunChildRuntime()
	os.Exit(m.Run())
}

// TestDemoExit runs the README's main job offline, on free ports, and checks that every
// showcase ended as it should and that the table and the UI address are printed.
func TestDemoExit(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an embedded Temporal server")
	}
	t.Setenv("DEEPSEEK_API_KEY", "")
	var stdout, stderr bytes.Buffer
	code := dispatch(t.Context(), []string{"demo", "--exit", "--port", "0", "--ui-port", "0"}, &stdout, &stderr)
	require.Equal(t, exitCompleted, code, "stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	out := stdout.String()
	assert.Contains(t, out, "Model            scripted")
	for _, row := range []string{"spawn ", "fork ", "structured ", "sdk ", "cancelled "} {
		assert.Contains(t, out, "\n"+row, "results table row %q", row)
	}
	assert.Equal(t, 4, strings.Count(out, " completed "))
	assert.Equal(t, 1, strings.Count(out, " aborted "))
	assert.NotContains(t, out, "/namespaces/default/workflows", "no link to a server --exit stopped")
	assert.NotContains(t, out, "FAILED")
}

// cancelledRow returns the results table's row of the cancelled showcase.
func cancelledRow(t *testing.T, out string) string {
	t.Helper()
	for line := range strings.Lines(out) {
		if strings.HasPrefix(line, "cancelled ") {
			return line
		}
	}
	t.Fatalf("no cancelled row in:\n%s", out)
	return ""
}

// fakeDeepSeek is an OpenAI-compatible chat completions server speaking the real SSE wire
// format, fast as a loopback server is: it answers every request with a short text, and a
// request offering structured_output (with no tool result yet) with a call of it.
func fakeDeepSeek(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Messages []struct {
				Role string `json:"role"`
			} `json:"messages"`
			Tools []struct {
				Function struct {
					Name string `json:"name"`
				} `json:"function"`
			} `json:"tools"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		structured := false
		for _, tool := range req.Tools {
			structured = structured || tool.Function.Name == "structured_output"
		}
		for _, m := range req.Messages {
			structured = structured && m.Role != "tool"
		}
		chunk := func(delta, finish string) string {
			fr := "null"
			if finish != "" {
				fr = strconv.Quote(finish)
			}
			return `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"deepseek-v4-flash","choices":[{"index":0,"delta":` + delta + `,"finish_reason":` + fr + `}]}`
		}
		events := []string{chunk(`{"role":"assistant","content":""}`, "")}
		if structured {
			args, _ := json.Marshal(`{"title":"Release","steps":["build","tag","announce"],"done":false}`)
			events = append(events,
				chunk(`{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"structured_output","arguments":`+string(args)+`}}]}`, ""),
				chunk(`{}`, "tool_calls"))
		} else {
			events = append(events, chunk(`{"content":"The release "}`, ""), chunk(`{"content":"is mentioned twice."}`, ""), chunk(`{}`, "stop"))
		}
		events = append(events, `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"deepseek-v4-flash","choices":[],"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}`)
		w.Header().Set("Content-Type", "text/event-stream")
		for _, e := range events {
			fmt.Fprintf(w, "data: %s\n\n", e)
			w.(http.Flusher).Flush()
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestDemoExitWithAFastModel runs the demo against an OpenAI-compatible server given as
// DEEPSEEK_BASE_URL that answers at once, as a user with a key would: every showcase must
// pass, and the cancelled one still ends aborted with a partial answer.
func TestDemoExitWithAFastModel(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an embedded Temporal server")
	}
	srv := fakeDeepSeek(t)
	t.Setenv("DEEPSEEK_BASE_URL", srv.URL)
	t.Setenv("DEEPSEEK_API_KEY", "dummy-key")
	var stdout, stderr bytes.Buffer
	code := dispatch(t.Context(), []string{"demo", "--exit", "--port", "0", "--ui-port", "0"}, &stdout, &stderr)
	require.Equal(t, exitCompleted, code, "stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	out := stdout.String()
	assert.Contains(t, out, "Model            DeepSeek")
	assert.NotContains(t, out, "FAILED")
	row := cancelledRow(t, out)
	assert.Contains(t, row, " aborted ", "the cancel landed mid-answer")
	assert.Contains(t, row, "The release", "the partial answer is kept")
	assert.Contains(t, out, `{"title":"Release","steps":["build","tag","announce"],"done"`, "the structured run answered through structured_output")
}
