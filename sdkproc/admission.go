package sdkproc

import (
	"context"
	"encoding/json"
	"strconv"
	"sync"

	"github.com/subflow-dev/subflow/internal/wire"
)

// permits are the admission permits a run's child holds (RunOptions.Admit): the child asks
// for one before each model request to an admitted provider (model/admit) and gives it back
// after (model/release). Those it still holds when the run is disposed — a child killed
// mid-request — are released then, so a dead child never shrinks the limit.
type permits struct {
	admit  func(ctx context.Context, provider string) (release func(), err error)
	ctx    context.Context // ends the waiting admits once the run is disposed
	cancel context.CancelFunc

	mu     sync.Mutex
	next   int64
	held   map[string]func()
	closed bool
}

func newPermits(admit func(ctx context.Context, provider string) (func(), error)) *permits {
	ctx, cancel := context.WithCancel(context.Background())
	return &permits{admit: admit, ctx: ctx, cancel: cancel, held: map[string]func(){}}
}

// handlers answers the child's model/admit and model/release requests.
func (p *permits) handlers() map[string]wire.Handler {
	return map[string]wire.Handler{
		wire.MethodModelAdmit: func(ctx context.Context, raw json.RawMessage) (any, error) {
			var params wire.ModelAdmitParams
			if err := json.Unmarshal(raw, &params); err != nil || params.Provider == "" {
				return nil, &wire.Error{Code: wire.CodeInternalError, Message: "model/admit: params need a provider: " + compact(raw)}
			}
			ctx, cancel := context.WithCancel(ctx)
			defer cancel()
			stop := context.AfterFunc(p.ctx, cancel)
			defer stop()
			release, err := p.admit(ctx, params.Provider)
			if err != nil {
				return nil, err
			}
			p.mu.Lock()
			defer p.mu.Unlock()
			if p.closed {
				release()
				return nil, &wire.Error{Code: wire.CodeInternalError, Message: "model/admit: the run is disposed"}
			}
			p.next++
			id := strconv.FormatInt(p.next, 10)
			p.held[id] = release
			return wire.ModelAdmitResult{Permit: id}, nil
		},
		wire.MethodModelRelease: func(_ context.Context, raw json.RawMessage) (any, error) {
			var params wire.ModelReleaseParams
			if err := json.Unmarshal(raw, &params); err != nil {
				return nil, &wire.Error{Code: wire.CodeInternalError, Message: "model/release: invalid params: " + compact(raw)}
			}
			p.mu.Lock()
			release := p.held[params.Permit]
			delete(p.held, params.Permit)
			p.mu.Unlock()
			if release != nil {
				release()
			}
			return struct{}{}, nil // an unknown permit is already released
		},
	}
}

// releaseAll releases the permits still held and refuses later admits.
func (p *permits) releaseAll() {
	p.cancel()
	p.mu.Lock()
	held := p.held
	p.held, p.closed = map[string]func(){}, true
	p.mu.Unlock()
	for _, release := range held {
		release()
	}
}
