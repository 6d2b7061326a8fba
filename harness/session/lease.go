package session

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// ErrLeased: another holder kept the session's lease until the caller's context ended.
var ErrLeased = errors.New("session is leased by another holder")

// ErrFenced: a write carried a lease token that is no longer the session's, because the lease
// expired and another holder took it. Errors that wrap it are *FencedError.
var ErrFenced = errors.New("session lease is held by a newer holder")

// FencedError is the error of an append or renewal whose fencing token is stale: nothing was
// written. errors.Is(err, ErrFenced) reports it.
type FencedError struct {
	// Token is the stale token the caller carried.
	Token int64
}

func (e *FencedError) Error() string {
	return fmt.Sprintf("fencing token %d is stale: %v", e.Token, ErrFenced)
}

// Is makes errors.Is(err, ErrFenced) true.
func (e *FencedError) Is(target error) bool { return target == ErrFenced }

// Leaser is implemented by stores that grant exclusive, expiring leases on sessions with
// fencing tokens. A drive holds the lease of its session while it appends, so a second drive
// of the same session, in this or another process or host sharing the store, waits or fails
// clearly instead of racing it for seqs; and a holder that stalled (a frozen process, a host
// cut off from the network) past its lease's expiry cannot write once another holder took the
// lease, whatever it still believes: every fenced append checks the token.
//
// Use TakeLease rather than the primitives, which it drives. Lease state lives with the
// session's data: in the database for Postgres, in a file next to the log for the file store.
// Expiry is judged by the store's clock (the database's; the file store's hosts' clocks must
// agree to well within a ttl).
type Leaser interface {
	Store

	// TryLease grants the session's lease for ttl if no other holder's lease is live (never
	// granted, released, or expired), and returns its fencing token: larger than every token
	// granted before for the session (until the session is removed). A live lease fails with
	// ErrLeased, a missing session with ErrNotFound. It does not wait.
	TryLease(ctx context.Context, id string, ttl time.Duration) (token int64, err error)

	// RenewLease extends the lease of token to ttl from now. It succeeds also after expiry if
	// no one took the lease since; a stale token fails with a *FencedError.
	RenewLease(ctx context.Context, id string, token int64, ttl time.Duration) error

	// ReleaseLease ends the lease of token at once, so the next TryLease succeeds. Releasing
	// a stale token does nothing.
	ReleaseLease(ctx context.Context, id string, token int64) error

	// AppendFenced is Append, done only if token is the session's lease token (held, or
	// expired and not taken since): else nothing is written and the error is a *FencedError.
	// The check and the write are atomic with respect to TryLease.
	AppendFenced(ctx context.Context, id string, token int64, events ...Event) error
}

// Lease polling backoff: short at first, so a handover between drives is quick, and capped so
// a long wait costs little.
const (
	leaseFirstWait = 5 * time.Millisecond
	leaseMaxWait   = 250 * time.Millisecond
	// leaseFirstTryTimeout bounds the first try, which ignores ctx's end.
	leaseFirstTryTimeout = 10 * time.Second
)

// Lease is a held session lease (see TakeLease). Its methods are safe for concurrent use.
type Lease struct {
	leaser Leaser
	id     string
	token  int64
	ttl    time.Duration

	lost  chan struct{}
	cause error // set before lost is closed

	stop    chan struct{}
	stopped chan struct{}
	release func() error
}

// TakeLease blocks until the caller holds the session's lease for ttl, then renews it every
// ttl/3 until Release. While another holder's lease is live it retries with backoff until ctx
// ends; then the error names the session and wraps ErrLeased and ctx.Err(). The first try
// ignores ctx's end, so a done ctx asks for the lease without waiting. A missing session
// fails with ErrNotFound.
//
// The holder's writes to the session must go through Store, whose appends are fenced. The
// lease is lost (Lost is closed) when a renewal finds the token stale, or when renewals
// failed for a whole ttl: the holder should then stop, as its appends will be refused as soon
// as another holder takes over.
func TakeLease(ctx context.Context, l Leaser, id string, ttl time.Duration) (*Lease, error) {
	if ttl <= 0 {
		return nil, opErr("lease", id, fmt.Errorf("lease ttl %v must be positive", ttl))
	}
	first, cancel := context.WithTimeout(context.WithoutCancel(ctx), leaseFirstTryTimeout)
	token, err := l.TryLease(first, id, ttl)
	cancel()
	wait := leaseFirstWait
	for errors.Is(err, ErrLeased) {
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil, opErr("lease", id, fmt.Errorf("%w: %w", ErrLeased, ctx.Err()))
		case <-timer.C:
		}
		wait = min(2*wait, leaseMaxWait)
		token, err = l.TryLease(ctx, id, ttl)
		if err != nil && ctx.Err() != nil {
			return nil, opErr("lease", id, fmt.Errorf("%w: %w", ErrLeased, ctx.Err()))
		}
	}
	if err != nil {
		return nil, err
	}
	ls := &Lease{
		leaser: l, id: id, token: token, ttl: ttl,
		lost: make(chan struct{}), stop: make(chan struct{}), stopped: make(chan struct{}),
	}
	ls.release = sync.OnceValue(func() error {
		close(ls.stop)
		<-ls.stopped
		rctx, cancel := context.WithTimeout(context.Background(), leaseFirstTryTimeout)
		defer cancel()
		return l.ReleaseLease(rctx, id, token)
	})
	go ls.renew()
	return ls, nil
}

// renew renews the lease every ttl/3 until Release, or until the lease is lost.
func (l *Lease) renew() {
	defer close(l.stopped)
	every := l.ttl / 3
	t := time.NewTicker(every)
	defer t.Stop()
	renewed := time.Now()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), every)
		err := l.leaser.RenewLease(ctx, l.id, l.token, l.ttl)
		cancel()
		switch {
		case err == nil:
			renewed = time.Now()
			continue
		case errors.Is(err, ErrFenced):
		case time.Since(renewed) < l.ttl:
			continue // a passing fault: the next renewal may succeed in time
		default:
			err = opErr("renew lease", l.id, fmt.Errorf("no renewal succeeded for %v: %w", l.ttl, err))
		}
		l.cause = err
		close(l.lost)
		return
	}
}

// Token returns the lease's fencing token.
func (l *Lease) Token() int64 { return l.token }

// Lost is closed when the lease is lost (see TakeLease); Err then says why.
func (l *Lease) Lost() <-chan struct{} { return l.lost }

// Err returns why the lease was lost, or nil while it is not.
func (l *Lease) Err() error {
	select {
	case <-l.lost:
		return l.cause
	default:
		return nil
	}
}

// Release stops renewing and ends the lease, so the next holder need not wait for its expiry.
// Later calls return the first call's result.
func (l *Lease) Release() error { return l.release() }

// Store returns the leasing store with the appends to the leased session fenced by the
// lease's token: once another holder took the lease, they fail with a *FencedError and write
// nothing. Other sessions' appends are not fenced.
func (l *Lease) Store() Store { return fencedStore{Leaser: l.leaser, id: l.id, token: l.token} }

type fencedStore struct {
	Leaser
	id    string
	token int64
}

func (s fencedStore) Append(ctx context.Context, id string, events ...Event) error {
	if id != s.id {
		return s.Leaser.Append(ctx, id, events...)
	}
	return s.Leaser.AppendFenced(ctx, id, s.token, events...)
}

// opErr wraps err with the operation and the session id, as the stores do.
func opErr(op, id string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("session: %s %s: %w", op, id, err)
}
