package sdkproc

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subflow-dev/subflow/harness/model"
	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/subagent"
)

// countingAdmit is a RunOptions.Admit that counts its permits.
type countingAdmit struct {
	admitted, released, held atomic.Int64
}

func (c *countingAdmit) admit(_ context.Context, provider string) (func(), error) {
	if provider != model.ProviderOpenAICompatible {
		return nil, fmt.Errorf("unexpected provider %q", provider)
	}
	c.admitted.Add(1)
	c.held.Add(1)
	var once atomic.Bool
	return func() {
		if once.CompareAndSwap(false, true) {
			c.held.Add(-1)
			c.released.Add(1)
		}
	}, nil
}

// openAIChild runs the child runtime on the openai-compatible adapter against handler, an
// httptest server speaking the chat-completions wire format.
func openAIChild(t *testing.T, handler http.HandlerFunc) (Config, subagent.Request) {
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	cfg, req := agentConfig(t)
	cfg.Provider, cfg.Model = model.ProviderOpenAICompatible, "m"
	cfg.Env = map[string]string{"OPENAI_BASE_URL": srv.URL, "OPENAI_API_KEY": "test-key"}
	return cfg, req
}

// sse writes one chat-completions stream: the text and its usage.
func sse(w http.ResponseWriter, text string, prompt, completion int) {
	w.Header().Set("Content-Type", "text/event-stream")
	fmt.Fprintf(w, `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":%q},"finish_reason":"stop"}]}`+"\n\n", text)
	fmt.Fprintf(w, `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}}`+"\n\n", prompt, completion, prompt+completion)
	fmt.Fprint(w, "data: [DONE]\n\n")
}

// TestRuntimeAdmitsModelRequests: with RunOptions.Admit, each model request of the child to
// an admitted provider is made while holding a permit of the client's, given back after;
// the run reports the request's token usage.
func TestRuntimeAdmitsModelRequests(t *testing.T) {
	var adm countingAdmit
	var heldDuringRequest atomic.Int64
	cfg, req := openAIChild(t, func(w http.ResponseWriter, r *http.Request) {
		heldDuringRequest.Store(adm.held.Load())
		sse(w, "admitted", 11, 3)
	})
	h := newHarness(t, cfg, Options{})
	r, err := h.p.StartRun(context.Background(), req, RunOptions{Admit: adm.admit, AdmitProviders: []string{model.ProviderOpenAICompatible}})
	require.NoError(t, err)
	res := mustResult(t, r)
	require.NoError(t, r.Dispose(context.Background()))
	assert.Equal(t, subagent.StopCompleted, res.StopReason)
	assert.Equal(t, "admitted", text(res))
	assert.Equal(t, int64(1), adm.admitted.Load())
	assert.Equal(t, int64(1), heldDuringRequest.Load(), "the request went out holding its permit")
	assert.Equal(t, int64(1), adm.released.Load())
	assert.Equal(t, session.Usage{InputTokens: 11, OutputTokens: 3}, r.Usage())
}

// TestRuntimeNotAdmittedWithoutAdmit: a child started without Admit asks for no permit (the
// runtime admits only the providers initialize names) and still reports its usage.
func TestRuntimeNotAdmittedWithoutAdmit(t *testing.T) {
	cfg, req := openAIChild(t, func(w http.ResponseWriter, r *http.Request) { sse(w, "free", 7, 2) })
	h := newHarness(t, cfg, Options{})
	r := h.start(t, req)
	res := mustResult(t, r)
	assert.Equal(t, subagent.StopCompleted, res.StopReason)
	assert.Equal(t, session.Usage{InputTokens: 7, OutputTokens: 2}, r.Usage())
}

// TestRuntimePermitReleasedAtDispose: a child disposed while its admitted request is open
// gives its permit back: a dead child never shrinks the limit.
func TestRuntimePermitReleasedAtDispose(t *testing.T) {
	var adm countingAdmit
	cfg, req := openAIChild(t, func(w http.ResponseWriter, r *http.Request) {
		// The server notices the client's connection close only once the body is read;
		// unread, the handler would hold httptest's Close for its whole minute.
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case <-r.Context().Done():
		case <-time.After(time.Minute):
		}
	})
	h := newHarness(t, cfg, Options{})
	r, err := h.p.StartRun(context.Background(), req, RunOptions{Admit: adm.admit, AdmitProviders: []string{model.ProviderOpenAICompatible}})
	require.NoError(t, err)
	go func() { _, _ = r.Result(context.Background()) }()
	require.Eventually(t, func() bool { return adm.admitted.Load() == 1 }, 10*time.Second, 5*time.Millisecond)
	require.NoError(t, r.Dispose(context.Background()))
	assert.Equal(t, int64(1), adm.released.Load())
	assert.Zero(t, adm.held.Load())
}
