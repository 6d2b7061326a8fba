package model

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// Rate-limit waits of one request: a 429 or 503 is waited out and the request sent again,
// for at most defaultRateLimitWait in all (OpenAIOptions.RateLimitWait); then the run fails
// with the provider's error.
const (
	defaultRateLimitWait = 30 * time.Minute
	// rateLimitBackoff is the first wait after a 429 without Retry-After; it doubles up to
	// maxRateLimitBackoff.
	rateLimitBackoff    = time.Second
	maxRateLimitBackoff = 30 * time.Second
)

// Admission is what a model adapter consults around each request. Callers (the worker's
// activities) put it in the request's context with WithAdmission; without one every request
// goes at once and no wait is reported.
type Admission struct {
	// Admit blocks until one more request to provider may be open and returns the function
	// that ends its admission; nil admits every request. The worker's Admit asks a
	// cluster-wide limiter, so the limit holds across workers and batches.
	Admit func(ctx context.Context, provider string) (release func(), err error)
	// OnWait is told why a request waits (admission, or a 429/503 being waited out), and ""
	// when it goes on; nil ignores it. The worker shows it in the run's heartbeat.
	OnWait func(note string)
}

type admissionKey struct{}

// WithAdmission returns ctx carrying a for the model requests made under it.
func WithAdmission(ctx context.Context, a Admission) context.Context {
	return context.WithValue(ctx, admissionKey{}, a)
}

// AdmissionOf returns the Admission of ctx; the zero Admission when there is none.
func AdmissionOf(ctx context.Context) Admission {
	a, _ := ctx.Value(admissionKey{}).(Admission)
	return a
}

func (a Admission) admit(ctx context.Context, provider string) (func(), error) {
	if a.Admit == nil {
		return func() {}, nil
	}
	return a.Admit(ctx, provider)
}

func (a Admission) note(s string) {
	if a.OnWait != nil {
		a.OnWait(s)
	}
}

// rateLimited reports how long to wait before sending a request again that failed with err:
// a 429 (after Retry-After, else backoff) or a 503 with Retry-After.
func rateLimited(err error, backoff time.Duration, now time.Time) (time.Duration, bool) {
	var apiErr *APIError
	if !errors.As(err, &apiErr) {
		return 0, false
	}
	after, ok := parseRetryAfter(apiErr.RetryAfter, now)
	switch {
	case apiErr.StatusCode == http.StatusTooManyRequests && ok:
		return after, true
	case apiErr.StatusCode == http.StatusTooManyRequests:
		return backoff, true
	case apiErr.StatusCode == http.StatusServiceUnavailable && ok:
		return after, true
	}
	return 0, false
}

// parseRetryAfter reads a Retry-After header: delay seconds or an HTTP date.
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil && s >= 0 {
		return time.Duration(s * float64(time.Second)), true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

// withRateLimits runs send under the admission of ctx, waiting out 429s and 503s with
// Retry-After as long as send streamed nothing yet (a request that produced output is never
// sent twice).
func withRateLimits(ctx context.Context, provider string, maxWait time.Duration, send func(ctx context.Context) (resp Response, streamed bool, err error)) (Response, error) {
	adm := AdmissionOf(ctx)
	if maxWait == 0 {
		maxWait = defaultRateLimitWait
	}
	backoff := rateLimitBackoff
	var waited time.Duration
	for {
		release, err := adm.admit(ctx, provider)
		if err != nil {
			if ctx.Err() != nil {
				return Response{}, ctx.Err()
			}
			return Response{}, fmt.Errorf("%s: admission: %w", provider, err)
		}
		resp, streamed, err := send(ctx)
		release()
		wait, limited := rateLimited(err, backoff, time.Now())
		if !limited || streamed || waited+wait > maxWait {
			return resp, err
		}
		adm.note(fmt.Sprintf("waiting for rate limit: %v, retry in %v", err, wait.Round(time.Millisecond)))
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return Response{}, ctx.Err()
		case <-t.C:
		}
		adm.note("")
		waited += wait
		backoff = min(backoff*2, maxRateLimitBackoff)
	}
}

// Admitted returns m with every request made under a: the adapter behind m consults a.Admit
// around each request as if the caller had put a in the request's context (WithAdmission).
// The sdk child runtime wraps the providers its client limits this way.
func Admitted(m Model, a Admission) Model { return admittedModel{inner: m, adm: a} }

type admittedModel struct {
	inner Model
	adm   Admission
}

func (m admittedModel) Stream(ctx context.Context, req Request, onText func(string)) (Response, error) {
	return m.inner.Stream(WithAdmission(ctx, m.adm), req, onText)
}
