package jobqueue

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"time"
)

// Version is this client's version, sent in its User-Agent.
const Version = "0.1.0"

// Client calls jobqueue's HTTP API (`jobqueue api` or `jobqueue serve`). It is safe
// for concurrent use. Change its fields before its first call only.
type Client struct {
	// BaseURL is the API's address, e.g. "http://127.0.0.1:5001" (a path prefix is
	// kept: "https://example.com/jobqueue").
	BaseURL string
	// Token is sent as "Authorization: Bearer <token>"; empty: none.
	Token string
	// HTTPClient sends the requests. NewClient makes one of its own; its Timeout
	// should stay 0 (each request has a deadline of its own, its long poll included).
	HTTPClient *http.Client
	// Retry says how transient failures are retried.
	Retry RetryPolicy
	// RequestTimeout bounds each try of a request, beyond its long poll. Default 30 s.
	RequestTimeout time.Duration
	// UserAgent is sent with each request.
	UserAgent string
}

// RetryPolicy: a transient failure (a connection refused or reset, a timeout, a
// 503) is retried after an exponential backoff with jitter, or after the server's
// Retry-After. A 4xx is never retried. A request that may have been applied is
// retried only where that is safe: an enqueue without an IdempotencyKey only when
// it surely was not sent, or was answered 503 "nothing stored".
type RetryPolicy struct {
	Attempts int           // tries in all, the first included; default 6; 1: no retry
	MinDelay time.Duration // the first backoff; default 100 ms
	MaxDelay time.Duration // the longest backoff, Retry-After included; default 10 s
}

// NewClient returns a client of the API at baseURL, authenticated with token.
func NewClient(baseURL, token string) *Client {
	return &Client{
		BaseURL:    strings.TrimRight(baseURL, "/"),
		Token:      token,
		HTTPClient: &http.Client{Transport: newTransport()},
		UserAgent:  "jobqueue-go/" + Version,
	}
}

func newTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	// A worker keeps several requests open at once (a long poll, heartbeats,
	// outcomes, progress): keep their connections instead of making new ones.
	t.MaxIdleConns = 256
	t.MaxIdleConnsPerHost = 64
	return t
}

// retrySafety says which failures a request may be sent again after.
type retrySafety int

const (
	// retryAny: sending it twice does no harm (reads, claims, heartbeats, fenced
	// outcomes, enqueues with an Idempotency-Key).
	retryAny retrySafety = iota
	// retryUnsent: only when it surely was not applied: the connection was never
	// made, or a 503 said nothing was stored.
	retryUnsent
)

type request struct {
	method   string
	path     string
	query    url.Values
	header   http.Header
	body     any
	out      any
	longPoll time.Duration // how long the server may hold the answer
	safety   retrySafety
}

func (c *Client) policy() RetryPolicy {
	p := c.Retry
	if p.Attempts <= 0 {
		p.Attempts = 6
	}
	if p.MinDelay <= 0 {
		p.MinDelay = 100 * time.Millisecond
	}
	if p.MaxDelay <= 0 {
		p.MaxDelay = 10 * time.Second
	}
	if p.MaxDelay < p.MinDelay {
		p.MaxDelay = p.MinDelay
	}
	return p
}

// do sends the request, retrying transient failures, and decodes a 2xx answer
// into r.out. It returns the answer's status.
func (c *Client) do(ctx context.Context, r *request) (int, error) {
	var body []byte
	if r.body != nil {
		var err error
		if body, err = json.Marshal(r.body); err != nil {
			return 0, fmt.Errorf("jobqueue: %s %s: encoding the request: %w", r.method, r.path, err)
		}
	}
	policy := c.policy()
	for attempt := 1; ; attempt++ {
		status, retry, err := c.once(ctx, r, body)
		if err == nil || !retry || attempt >= policy.Attempts {
			return status, err
		}
		delay := backoff(policy, attempt)
		var refused *Error
		if errors.As(err, &refused) && refused.RetryAfter > 0 {
			delay = refused.RetryAfter
			if delay > policy.MaxDelay {
				delay = policy.MaxDelay
			}
		}
		if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < delay {
			return status, err // no time left to retry: the last failure
		}
		if sleep(ctx, delay) != nil {
			return status, err
		}
	}
}

// once sends the request one time: its status, its error, and whether the error
// is one to retry.
func (c *Client) once(ctx context.Context, r *request, body []byte) (int, bool, error) {
	timeout := c.RequestTimeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	tryCtx, cancel := context.WithTimeout(ctx, timeout+r.longPoll)
	defer cancel()
	target := c.BaseURL + r.path
	if len(r.query) > 0 {
		target += "?" + r.query.Encode()
	}
	var reader io.Reader
	if body != nil {
		reader = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(tryCtx, r.method, target, reader)
	if err != nil {
		return 0, false, fmt.Errorf("jobqueue: %s %s: %w", r.method, r.path, err)
	}
	for k, vs := range r.header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	if c.UserAgent != "" {
		req.Header.Set("User-Agent", c.UserAgent)
	}
	httpClient := c.HTTPClient
	if httpClient == nil {
		httpClient = http.DefaultClient
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		if ctx.Err() != nil { // the caller gave up: say so, plainly
			return 0, false, fmt.Errorf("jobqueue: %s %s: %w", r.method, r.path, ctx.Err())
		}
		retry := transient(err) && (r.safety == retryAny || unsent(err))
		return 0, retry, fmt.Errorf("jobqueue: %s %s: %w", r.method, r.path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		if ctx.Err() != nil {
			return resp.StatusCode, false, fmt.Errorf("jobqueue: %s %s: %w", r.method, r.path, ctx.Err())
		}
		return resp.StatusCode, r.safety == retryAny && transient(err),
			fmt.Errorf("jobqueue: %s %s: reading the answer: %w", r.method, r.path, err)
	}
	if resp.StatusCode >= 400 {
		refused := parseError(r.method, r.path, resp.StatusCode, resp.Header, data)
		retry := refused.Status == http.StatusServiceUnavailable &&
			(r.safety == retryAny || refused.Stored != "unknown")
		return resp.StatusCode, retry, refused
	}
	if r.out != nil && len(bytes.TrimSpace(data)) > 0 {
		if err := json.Unmarshal(data, r.out); err != nil {
			return resp.StatusCode, false, fmt.Errorf("jobqueue: %s %s: decoding the answer: %w", r.method, r.path, err)
		}
	}
	return resp.StatusCode, false, nil
}

// transient: a failure of the connection or of the network, not of the request.
func transient(err error) bool {
	var certificate x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var invalid x509.CertificateInvalidError
	if errors.As(err, &certificate) || errors.As(err, &hostname) || errors.As(err, &invalid) {
		return false
	}
	if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNABORTED) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var netErr net.Error
	if errors.As(err, &netErr) {
		return true
	}
	var opErr *net.OpError
	return errors.As(err, &opErr)
}

// unsent: the request never reached the server (its connection was never made).
func unsent(err error) bool {
	var opErr *net.OpError
	if errors.As(err, &opErr) && opErr.Op == "dial" {
		return true
	}
	var dnsErr *net.DNSError
	return errors.As(err, &dnsErr) || errors.Is(err, syscall.ECONNREFUSED)
}

func backoff(p RetryPolicy, attempt int) time.Duration {
	d := p.MinDelay
	for i := 1; i < attempt && d < p.MaxDelay; i++ {
		d *= 2
	}
	if d > p.MaxDelay {
		d = p.MaxDelay
	}
	// ±20% so that clients that failed together do not come back together.
	jitter := 0.8 + 0.4*rand.Float64()
	return time.Duration(float64(d) * jitter)
}

// sleep waits d, or until ctx is done (its error then).
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
