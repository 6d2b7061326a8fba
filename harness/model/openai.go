package model

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/subflow-dev/subflow/harness/session"
)

// Provider names registered by NewDefaultRegistry.
const (
	ProviderDeepSeek         = "deepseek-official"
	ProviderOpenAICompatible = "openai-compatible"
	ProviderScripted         = "scripted"
)

// Defaults of the environment-configured providers.
const (
	DeepSeekBaseURL   = "https://api.deepseek.com"
	DeepSeekModel     = "deepseek-chat"
	OpenAIBaseURL     = "https://api.openai.com/v1"
	DefaultMaxRetries = 2
)

// OpenAIOptions configures an OpenAICompatible adapter.
type OpenAIOptions struct {
	// Provider names the adapter in error messages; empty means "openai-compatible".
	Provider string
	// BaseURL is the API root; requests go to BaseURL + "/chat/completions".
	BaseURL string
	// APIKey is sent as a bearer token. When empty, every request fails with a
	// *MissingAPIKeyError naming KeyEnv.
	APIKey string
	// KeyEnv names the environment variable APIKey came from, for error messages.
	KeyEnv string
	// DefaultModel is used when Request.Model is empty.
	DefaultModel string
	// HTTPClient sends the requests; nil means http.DefaultClient.
	HTTPClient *http.Client
	// MaxRetries is how many times a request is retried after a connection error, 408, 409,
	// 429 or 5xx (honouring Retry-After); 0 means no retries.
	MaxRetries int
	// RequestTimeout bounds one request, streaming included; 0 means DefaultRequestTimeout,
	// negative none. StreamIdleTimeout bounds the wait for the response and then for each
	// next chunk; 0 means DefaultStreamIdleTimeout, negative none. Either failing gives a
	// *TimeoutError, which IsRetryable.
	RequestTimeout    time.Duration
	StreamIdleTimeout time.Duration
	// RateLimitWait is the longest one request waits out 429s and 503s with Retry-After in
	// all, after the client's own retries, before the error fails the run; 0 means 30
	// minutes, negative means no waiting.
	RateLimitWait time.Duration
}

// OpenAICompatible is a Model speaking the OpenAI chat-completions API (streaming, function
// tools) through the official openai-go client. It serves DeepSeek's endpoint and any
// OpenAI-compatible server. It is safe for concurrent use.
type OpenAICompatible struct {
	opts OpenAIOptions
	chat openai.ChatCompletionService
}

// NewOpenAICompatible returns an adapter for opts. It never fails: configuration problems
// (a missing key, a bad URL) surface as errors of the first request.
func NewOpenAICompatible(opts OpenAIOptions) *OpenAICompatible {
	if opts.Provider == "" {
		opts.Provider = ProviderOpenAICompatible
	}
	if opts.RequestTimeout == 0 {
		opts.RequestTimeout = DefaultRequestTimeout
	}
	if opts.StreamIdleTimeout == 0 {
		opts.StreamIdleTimeout = DefaultStreamIdleTimeout
	}
	reqOpts := []option.RequestOption{
		option.WithBaseURL(opts.BaseURL),
		option.WithAPIKey(opts.APIKey),
		option.WithMaxRetries(max(opts.MaxRetries, 0)),
	}
	if opts.HTTPClient != nil {
		reqOpts = append(reqOpts, option.WithHTTPClient(opts.HTTPClient))
	}
	// The service is built without openai.NewClient so that OPENAI_* variables (organization,
	// project, custom headers) never leak into requests to another provider.
	return &OpenAICompatible{opts: opts, chat: openai.NewChatCompletionService(reqOpts...)}
}

// DeepSeekFromEnv returns the deepseek-official adapter: base URL DEEPSEEK_BASE_URL (default
// https://api.deepseek.com), key DEEPSEEK_API_KEY, default model deepseek-chat.
func DeepSeekFromEnv() *OpenAICompatible {
	return NewOpenAICompatible(OpenAIOptions{
		Provider:     ProviderDeepSeek,
		BaseURL:      envOr("DEEPSEEK_BASE_URL", DeepSeekBaseURL),
		APIKey:       os.Getenv("DEEPSEEK_API_KEY"),
		KeyEnv:       "DEEPSEEK_API_KEY",
		DefaultModel: DeepSeekModel,
		MaxRetries:   DefaultMaxRetries,
	})
}

// OpenAICompatibleFromEnv returns the openai-compatible adapter: base URL OPENAI_BASE_URL
// (default https://api.openai.com/v1), key OPENAI_API_KEY.
func OpenAICompatibleFromEnv() *OpenAICompatible {
	return NewOpenAICompatible(OpenAIOptions{
		Provider:   ProviderOpenAICompatible,
		BaseURL:    envOr("OPENAI_BASE_URL", OpenAIBaseURL),
		APIKey:     os.Getenv("OPENAI_API_KEY"),
		KeyEnv:     "OPENAI_API_KEY",
		MaxRetries: DefaultMaxRetries,
	})
}

func envOr(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}

// Stream sends req as one streaming chat completion. Text deltas of the first choice go to
// onText as they arrive; tool calls are assembled from their deltas. On error the Response is
// zero; on cancellation the error is ctx.Err().
func (m *OpenAICompatible) Stream(ctx context.Context, req Request, onText func(delta string)) (Response, error) {
	modelName := req.Model
	if modelName == "" {
		modelName = m.opts.DefaultModel
	}
	if m.opts.APIKey == "" {
		return Response{}, &MissingAPIKeyError{Provider: m.opts.Provider, Model: modelName, KeyEnv: m.opts.KeyEnv}
	}
	if modelName == "" {
		return Response{}, fmt.Errorf("%s: no model name given", m.opts.Provider)
	}
	params, err := chatParams(modelName, req)
	if err != nil {
		return Response{}, m.wrap(modelName, err)
	}

	// Admission and rate-limit waits wrap the whole request (admission.go).
	return withRateLimits(ctx, m.opts.Provider, m.opts.RateLimitWait, func(ctx context.Context) (Response, bool, error) {
		return m.stream(ctx, modelName, params, onText)
	})
}

// stream sends one streaming request; streamed says whether any text reached onText.
// Each attempt has its own request and stream-idle timeouts.
func (m *OpenAICompatible) stream(ctx context.Context, modelName string, params openai.ChatCompletionNewParams, onText func(delta string)) (Response, bool, error) {
	parent := ctx
	ctx, dog := newWatchdog(ctx, m.opts.Provider, modelName, m.opts.RequestTimeout, m.opts.StreamIdleTimeout)
	defer dog.stop()
	stream := m.chat.NewStreaming(ctx, params)
	defer stream.Close()
	var acc openai.ChatCompletionAccumulator
	streamed := false
	for stream.Next() {
		dog.alive()
		chunk := stream.Current()
		if !acc.AddChunk(chunk) {
			return Response{}, streamed, m.wrap(modelName, errors.New("malformed stream chunk"))
		}
		if onText == nil {
			continue
		}
		for _, choice := range chunk.Choices {
			if choice.Index == 0 && choice.Delta.Content != "" {
				streamed = true
				onText(choice.Delta.Content)
			}
		}
	}
	if err := parent.Err(); err != nil {
		return Response{}, streamed, err
	}
	if err := stream.Err(); err != nil {
		if te := timeout(ctx); te != nil {
			return Response{}, streamed, te
		}
		return Response{}, streamed, m.apiError(modelName, err)
	}
	resp, err := completion(acc.ChatCompletion)
	if err != nil {
		return Response{}, streamed, m.wrap(modelName, err)
	}
	return resp, streamed, nil
}

func (m *OpenAICompatible) wrap(modelName string, err error) error {
	return fmt.Errorf("%s model %q: %w", m.opts.Provider, modelName, err)
}

// apiError turns an HTTP error status into an *APIError; other failures are wrapped as they are.
func (m *OpenAICompatible) apiError(modelName string, err error) error {
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) {
		return m.wrap(modelName, err)
	}
	e := &APIError{
		Provider:   m.opts.Provider,
		Model:      modelName,
		StatusCode: apiErr.StatusCode,
		KeyEnv:     m.opts.KeyEnv,
		Message:    apiErr.Message,
	}
	if apiErr.Response != nil {
		e.RetryAfter = apiErr.Response.Header.Get("Retry-After")
	}
	return e
}

// chatParams maps a Request onto chat-completion parameters.
func chatParams(modelName string, req Request) (openai.ChatCompletionNewParams, error) {
	params := openai.ChatCompletionNewParams{
		Model:         shared.ChatModel(modelName),
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	}
	if req.MaxTokens > 0 {
		// max_tokens, not max_completion_tokens: DeepSeek and most compatible servers read it.
		params.MaxTokens = openai.Int(req.MaxTokens)
	}
	if req.System != "" {
		params.Messages = append(params.Messages, openai.SystemMessage(req.System))
	}
	for i, msg := range req.Messages {
		p, err := messageParam(msg)
		if err != nil {
			return params, fmt.Errorf("message %d: %w", i, err)
		}
		params.Messages = append(params.Messages, p)
	}
	for _, tool := range req.Tools {
		p, err := toolParam(tool)
		if err != nil {
			return params, err
		}
		params.Tools = append(params.Tools, p)
	}
	return params, nil
}

func messageParam(msg Message) (openai.ChatCompletionMessageParamUnion, error) {
	text := session.JoinText(msg.Content)
	switch msg.Role {
	case RoleUser:
		return openai.UserMessage(text), nil
	case RoleTool:
		return openai.ToolMessage(text, msg.ToolCallID), nil
	case RoleAssistant:
		var p openai.ChatCompletionAssistantMessageParam
		for _, b := range msg.Content {
			if b.Type != session.BlockToolCall {
				continue
			}
			args := string(b.Input)
			if args == "" {
				args = "{}"
			}
			p.ToolCalls = append(p.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{
				OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
					ID:       b.ID,
					Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: b.Name, Arguments: args},
				},
			})
		}
		// An assistant message needs content or tool calls; an empty answer is sent as "".
		if text != "" || len(p.ToolCalls) == 0 {
			p.Content.OfString = openai.String(text)
		}
		return openai.ChatCompletionMessageParamUnion{OfAssistant: &p}, nil
	}
	return openai.ChatCompletionMessageParamUnion{}, fmt.Errorf("unknown role %q", msg.Role)
}

func toolParam(tool ToolSchema) (openai.ChatCompletionToolUnionParam, error) {
	def := shared.FunctionDefinitionParam{Name: tool.Name}
	if tool.Description != "" {
		def.Description = openai.String(tool.Description)
	}
	if len(tool.Parameters) > 0 {
		var schema shared.FunctionParameters
		if err := json.Unmarshal(tool.Parameters, &schema); err != nil {
			return openai.ChatCompletionToolUnionParam{}, fmt.Errorf("tool %q: parameters schema: %w", tool.Name, err)
		}
		def.Parameters = schema
	}
	return openai.ChatCompletionFunctionTool(def), nil
}

// completion turns the accumulated stream into a Response.
func completion(cc openai.ChatCompletion) (Response, error) {
	if len(cc.Choices) == 0 || cc.Choices[0].FinishReason == "" {
		return Response{}, errors.New("stream ended without a finish reason")
	}
	choice := cc.Choices[0]
	resp := Response{
		Text: choice.Message.Content,
		Usage: session.Usage{
			InputTokens:  cc.Usage.PromptTokens,
			OutputTokens: cc.Usage.CompletionTokens,
		},
	}
	truncated := choice.FinishReason == "length"
	for _, tc := range choice.Message.ToolCalls {
		input, err := toolInput(tc.Function.Arguments)
		if err != nil {
			if truncated {
				// Cut off by the token cap: the call was never complete, so it is not one.
				continue
			}
			return Response{}, fmt.Errorf("tool call %s (%s): %w", tc.ID, tc.Function.Name, err)
		}
		resp.ToolCalls = append(resp.ToolCalls, ToolCall{ID: tc.ID, Name: tc.Function.Name, Input: input})
	}
	switch choice.FinishReason {
	case "length":
		resp.Finish = FinishLength
	case "tool_calls", "function_call":
		resp.Finish = FinishToolCalls
	case "stop":
		// Some compatible servers report "stop" after tool calls; the calls still need running.
		resp.Finish = FinishStop
		if len(resp.ToolCalls) > 0 {
			resp.Finish = FinishToolCalls
		}
	default:
		return Response{}, fmt.Errorf("unsupported finish reason %q", choice.FinishReason)
	}
	return resp, nil
}

// toolInput checks a tool call's arguments: empty or null is {}, anything else must be a JSON
// object (it ends up verbatim in the session log).
func toolInput(args string) (json.RawMessage, error) {
	trimmed := bytes.TrimSpace([]byte(args))
	if len(trimmed) == 0 || string(trimmed) == "null" {
		return json.RawMessage("{}"), nil
	}
	if trimmed[0] != '{' || !json.Valid(trimmed) {
		return nil, fmt.Errorf("arguments are not a JSON object: %.200q", args)
	}
	return json.RawMessage(trimmed), nil
}
