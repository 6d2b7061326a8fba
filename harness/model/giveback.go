package model

import (
	"context"
	"sync"
)

// giveBackKey is the context key of a request's giveBack.
type giveBackKey struct{}

// giveBack holds what undoes the answers returned under one context.
type giveBack struct {
	mu  sync.Mutex
	fns []func()
}

// WithGiveBack returns ctx for a model request whose answer the caller may fail to store, and
// the function the caller calls when it could not store the answer (the session log failed
// its assistant message). A model that keeps per-session state advanced by its answers (the
// scripted model's position, contract R-90) registers with OnGiveBack how to undo that, so
// the request that redoes the step takes the same answer, in this process as in a new one
// resuming from the stored history. Calling it more than once, or after a request that
// returned no answer, does nothing more.
func WithGiveBack(ctx context.Context) (context.Context, func()) {
	g := &giveBack{}
	return context.WithValue(ctx, giveBackKey{}, g), func() {
		g.mu.Lock()
		fns := g.fns
		g.fns = nil
		g.mu.Unlock()
		for _, fn := range fns {
			fn()
		}
	}
}

// OnGiveBack registers fn to run when the caller of the request made under ctx gives its
// answer back (WithGiveBack). Without a WithGiveBack in ctx it does nothing.
func OnGiveBack(ctx context.Context, fn func()) {
	g, _ := ctx.Value(giveBackKey{}).(*giveBack)
	if g == nil {
		return
	}
	g.mu.Lock()
	g.fns = append(g.fns, fn)
	g.mu.Unlock()
}
