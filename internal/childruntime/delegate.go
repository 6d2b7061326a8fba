package childruntime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"go.uber.org/zap"

	"github.com/subflow-dev/subflow/harness/tools"
	"github.com/subflow-dev/subflow/internal/wire"
	"github.com/subflow-dev/subflow/subagent"
	subagenttool "github.com/subflow-dev/subflow/subagent/tool"
)

// errClientGone fails the runtime's calls to the client once its input ended.
var errClientGone = errors.New("server: the client closed the connection")

// clientCalls are the runtime's own requests to the client, waiting for their responses.
type clientCalls struct {
	next    int64
	pending map[string]chan *wire.Message
	gone    bool
}

// callClient sends the client a request and waits for its response, ctx's end, or the end
// of the client's input. An error response is returned as its *wire.Error.
func (s *server) callClient(ctx context.Context, method string, params, result any) error {
	raw, err := json.Marshal(params)
	if err != nil {
		return fmt.Errorf("server: encode %s: %w", method, err)
	}
	ch := make(chan *wire.Message, 1)
	s.callsMu.Lock()
	if s.calls.gone {
		s.callsMu.Unlock()
		return errClientGone
	}
	s.calls.next++
	id := strconv.FormatInt(s.calls.next, 10)
	s.calls.pending[id] = ch
	s.callsMu.Unlock()
	defer func() {
		s.callsMu.Lock()
		delete(s.calls.pending, id)
		s.callsMu.Unlock()
	}()
	if err := s.enc.Encode(&wire.Message{ID: json.RawMessage(id), Method: method, Params: raw}); err != nil {
		return fmt.Errorf("server: send %s: %w", method, err)
	}
	select {
	case m, ok := <-ch:
		switch {
		case !ok:
			return errClientGone
		case m.Error != nil:
			return m.Error
		}
		if err := json.Unmarshal(m.Result, result); err != nil {
			return fmt.Errorf("server: decode result of %s: %w", method, err)
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// deliverResponse hands a response of the client to the call waiting for it; unknown ids
// are ignored (contract R-60).
func (s *server) deliverResponse(m *wire.Message) {
	s.callsMu.Lock()
	ch, ok := s.calls.pending[string(m.ID)]
	delete(s.calls.pending, string(m.ID))
	s.callsMu.Unlock()
	if ok {
		ch <- m
	}
}

// clientGone fails every waiting call and every later one.
func (s *server) clientGone() {
	s.callsMu.Lock()
	defer s.callsMu.Unlock()
	s.calls.gone = true
	for id, ch := range s.calls.pending {
		close(ch)
		delete(s.calls.pending, id)
	}
}

// subagentTool is the subagent tool of session sessionID: each call is a subagent/run request
// to the client, which runs the delegation in its own tree (a subflow worker: as a child
// workflow of the sdk run) and answers with the result. The call is announced with
// subagent.started before and subagent.finished after; the child session id is the one the
// client derives from the session and call ids (subagenttool.NestedChildID).
func (s *server) subagentTool(sessionID string) (tools.Tool, error) {
	return subagenttool.New(subagenttool.Options{
		DefaultProvider: subagent.ProviderSpawn,
		MaxDepth:        s.subagentCap,
		Capabilities:    subagent.ProviderCapabilities,
		Delegate: func(ctx context.Context, call subagenttool.DelegateCall) (subagent.Result, error) {
			child := subagenttool.NestedChildID(sessionID, call.CallID)
			s.out.push(wire.NotifySubagentStarted, wire.SubagentStartedParams{ParentSessionID: sessionID, ChildSessionID: child})
			var res wire.SubagentRunResult
			err := s.callClient(ctx, wire.MethodSubagentRun, wire.SubagentRunParams{
				ParentSessionID: sessionID, CallID: call.CallID, Provider: call.Provider, Request: call.Request,
			}, &res)
			stop := res.Result.StopReason
			switch {
			case err != nil && ctx.Err() != nil:
				stop = subagent.StopAborted
			case err != nil:
				stop = subagent.StopError
			}
			s.out.push(wire.NotifySubagentFinished, wire.SubagentFinishedParams{
				ParentSessionID: sessionID, ChildSessionID: child, StopReason: string(stop),
			})
			if err != nil {
				s.log.Info("server: delegation failed", zap.String("session", sessionID), zap.String("callId", call.CallID), zap.Error(err))
				var we *wire.Error
				if errors.As(err, &we) {
					return subagent.Result{}, errors.New(we.Message) // the exact message
				}
				return subagent.Result{}, err
			}
			return res.Result, nil
		},
	})
}
