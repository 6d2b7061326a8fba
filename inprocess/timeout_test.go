package inprocess

import (
	"context"
	"fmt"
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

// TestDriveResumesAfterAStalledModelStream: an OpenAI-compatible server whose first stream
// stalls mid-answer. The stream-idle timeout fails the request with a retryable error, the
// drive leaves the turn unfinished and says so, and the next drive resumes it to completion.
func TestDriveResumesAfterAStalledModelStream(t *testing.T) {
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		flush := func(payload string) {
			fmt.Fprintf(w, "data: %s\n\n", payload)
			w.(http.Flusher).Flush()
		}
		chunk := func(delta, finish string) string {
			return fmt.Sprintf(`{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":%s,"finish_reason":%s}]}`, delta, finish)
		}
		if requests.Add(1) == 1 {
			flush(chunk(`{"content":"stalled "}`, "null"))
			<-r.Context().Done() // the stream stalls until the client gives up
			return
		}
		flush(chunk(`{"content":"answer"}`, "null"))
		flush(chunk(`{}`, `"stop"`))
		flush("[DONE]")
	}))
	t.Cleanup(srv.Close)

	f := newFixture(t)
	models := &model.Registry{}
	models.Register("test-openai", model.NewOpenAICompatible(model.OpenAIOptions{
		Provider: "test-openai", BaseURL: srv.URL, APIKey: "k", StreamIdleTimeout: 100 * time.Millisecond,
	}))
	host, err := NewHost(Options{Store: f.store, Models: models, Tools: f.tools, Presets: f.presets})
	require.NoError(t, err)
	parent := f.parent(t, session.Header{Route: &session.Route{Provider: "test-openai", Model: "m"}})
	req := request(parent, "answer me")
	created, err := host.Create(context.Background(), CreateRequest{Provider: subagent.ProviderSpawn, Request: req})
	require.NoError(t, err)
	dr := DriveRequest{ChildID: created.ChildID, Request: req}

	_, err = host.Drive(context.Background(), dr)
	var ie *InterruptedError
	require.ErrorAs(t, err, &ie)
	var te *model.TimeoutError
	require.ErrorAs(t, err, &te)
	assert.True(t, te.Idle)
	assert.True(t, model.IsRetryable(err))
	events := f.events(t, created.ChildID)
	assert.NotContains(t, types(events), session.TypeTurnEnd, "the turn stays unfinished")

	_, err = host.Drive(context.Background(), dr)
	require.NoError(t, err)
	res, err := host.ReadResult(context.Background(), ReadRequest{ChildID: created.ChildID, Request: req})
	require.NoError(t, err)
	assert.Equal(t, subagent.StopCompleted, res.StopReason)
	assert.Equal(t, "answer", session.JoinText(res.Output))
	assert.EqualValues(t, 2, requests.Load())
}
