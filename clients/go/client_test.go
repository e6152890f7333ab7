package jobqueue

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// quick is a client of url whose retries wait little.
func quick(url string) *Client {
	c := NewClient(url, "secret")
	c.Retry = RetryPolicy{Attempts: 4, MinDelay: time.Millisecond, MaxDelay: 5 * time.Second}
	return c
}

func TestAServiceUnavailableIsRetriedAfterRetryAfter(t *testing.T) {
	var calls int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if atomic.AddInt32(&calls, 1) < 3 {
			w.Header().Set("Retry-After", "0.3")
			w.WriteHeader(503)
			_, _ = io.WriteString(w, `{"detail": "database unavailable; retry later"}`)
			return
		}
		_, _ = io.WriteString(w, `{"id": 7, "type": "resize", "queue": "default", "payload": {}, "status": "pending", "attempts": 0, "max_attempts": 3}`)
	}))
	defer srv.Close()
	started := time.Now()
	job, err := quick(srv.URL).Get(context.Background(), 7)
	if err != nil {
		t.Fatal(err)
	}
	if job.ID != 7 || job.Status != Pending || atomic.LoadInt32(&calls) != 3 {
		t.Fatalf("%+v after %d calls", job, calls)
	}
	// Two waits of the server's 0.3 s, not the policy's 1 ms.
	if elapsed := time.Since(started); elapsed < 500*time.Millisecond {
		t.Fatalf("Retry-After not honoured: answered after %s", elapsed)
	}
}

func TestA4xxIsNeverRetried(t *testing.T) {
	for _, status := range []int{400, 401, 403, 404, 409, 422} {
		var calls int32
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			atomic.AddInt32(&calls, 1)
			w.WriteHeader(status)
			_, _ = io.WriteString(w, `{"detail": "refused"}`)
		}))
		_, err := quick(srv.URL).Heartbeat(context.Background(), 1, "1.2.w", 30, nil)
		srv.Close()
		var refused *Error
		if !errors.As(err, &refused) || refused.Status != status || refused.Detail != "refused" {
			t.Fatalf("%d: %v", status, err)
		}
		if calls != 1 {
			t.Fatalf("%d sent %d times", status, calls)
		}
	}
}

func TestRetriesEndWithTheLastFailure(t *testing.T) {
	var calls int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		atomic.AddInt32(&calls, 1)
		w.WriteHeader(503)
		_, _ = io.WriteString(w, `{"detail": "database unavailable; retry later"}`)
	}))
	defer srv.Close()
	_, err := quick(srv.URL).Get(context.Background(), 1)
	if !errors.Is(err, ErrUnavailable) || calls != 4 {
		t.Fatalf("%v after %d calls", err, calls)
	}
}

// flakyTransport fails its first `failures` round trips with err.
type flakyTransport struct {
	failures int32
	err      error
	calls    int32
	next     http.RoundTripper
}

func (f *flakyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if atomic.AddInt32(&f.calls, 1) <= f.failures {
		if r.Body != nil {
			_ = r.Body.Close()
		}
		return nil, f.err
	}
	return f.next.RoundTrip(r)
}

var (
	refused = &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	reset   = &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
)

func enqueueServer(t *testing.T, calls *int32) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		atomic.AddInt32(calls, 1)
		if r.Header.Get("Content-Type") != "application/json" || r.Header.Get("Authorization") != "Bearer secret" {
			t.Errorf("headers: %v", r.Header)
		}
		var body map[string]any
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			t.Error(err)
		}
		w.WriteHeader(201)
		_ = json.NewEncoder(w).Encode(map[string]any{
			"id": 1, "type": body["type"], "queue": "default", "payload": body["payload"],
			"status": "pending", "attempts": 0, "max_attempts": 3,
			"idempotency_key": r.Header.Get("Idempotency-Key"),
		})
	}))
}

func TestAConnectionRefusedIsRetried(t *testing.T) {
	var calls int32
	srv := enqueueServer(t, &calls)
	defer srv.Close()
	c := quick(srv.URL)
	flaky := &flakyTransport{failures: 2, err: refused, next: http.DefaultTransport}
	c.HTTPClient = &http.Client{Transport: flaky}
	job, err := c.Enqueue(context.Background(), "resize", map[string]string{"path": "a.png"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !job.Created || job.Type != "resize" || flaky.calls != 3 || calls != 1 {
		t.Fatalf("%+v, %d tries", job, flaky.calls)
	}
}

func TestAnEnqueueThatMayHaveBeenStoredIsRetriedOnlyWithAnIdempotencyKey(t *testing.T) {
	var calls int32
	srv := enqueueServer(t, &calls)
	defer srv.Close()
	c := quick(srv.URL)
	flaky := &flakyTransport{failures: 1, err: reset, next: http.DefaultTransport}
	c.HTTPClient = &http.Client{Transport: flaky}
	if _, err := c.Enqueue(context.Background(), "resize", nil, nil); !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("a reset enqueue without a key is not retried: %v", err)
	}
	flaky = &flakyTransport{failures: 1, err: reset, next: http.DefaultTransport}
	c.HTTPClient = &http.Client{Transport: flaky}
	if _, err := c.Enqueue(context.Background(), "resize", nil, &EnqueueOptions{IdempotencyKey: "order-7"}); err != nil {
		t.Fatalf("with a key it is: %v", err)
	}
	if flaky.calls != 2 {
		t.Fatalf("%d tries", flaky.calls)
	}
}

func TestAnEnqueueAnswered503StoredUnknownIsNotRetriedWithoutAKey(t *testing.T) {
	var calls int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		atomic.AddInt32(&calls, 1)
		w.WriteHeader(503)
		_, _ = io.WriteString(w, `{"detail": "it may or may not be stored", "stored": "unknown"}`)
	}))
	defer srv.Close()
	_, err := quick(srv.URL).Enqueue(context.Background(), "resize", nil, nil)
	var e *Error
	if !errors.As(err, &e) || e.Stored != "unknown" || calls != 1 {
		t.Fatalf("%v after %d calls", err, calls)
	}
}

func TestEnqueueSendsItsOptions(t *testing.T) {
	var got map[string]any
	var header http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		header = r.Header
		_ = json.NewDecoder(r.Body).Decode(&got)
		_, _ = io.WriteString(w, `{"id": 3, "type": "resize", "queue": "images", "payload": {}, "status": "pending", "attempts": 0, "max_attempts": 5}`)
	}))
	defer srv.Close()
	at := time.Date(2026, 12, 4, 15, 0, 0, 0, time.UTC)
	job, err := quick(srv.URL).Enqueue(context.Background(), "resize", map[string]int{"w": 1}, &EnqueueOptions{
		Queue: "images", Priority: Priority(0), MaxAttempts: 5, RunAt: at, UniqueKey: "u",
		ConcurrencyKey: "k", IdempotencyKey: `order "7"`, TraceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		Tags: []string{"import"}, Meta: map[string]any{"customer": "acme"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if job.Created {
		t.Fatal("a 200 is an existing job")
	}
	want := map[string]any{
		"type": "resize", "payload": map[string]any{"w": 1.0}, "queue": "images", "priority": 0.0,
		"max_attempts": 5.0, "run_at": "2026-12-04T15:00:00Z", "unique_key": "u", "concurrency_key": "k",
		"tags": []any{"import"}, "meta": map[string]any{"customer": "acme"},
	}
	gotJSON, _ := json.Marshal(got)
	wantJSON, _ := json.Marshal(want)
	if string(gotJSON) != string(wantJSON) {
		t.Fatalf("sent %s, want %s", gotJSON, wantJSON)
	}
	if header.Get("Idempotency-Key") != `"order \"7\""` || header.Get("Traceparent") == "" {
		t.Fatalf("headers %v", header)
	}
}

func TestWaitAsksTheServerToHoldItsAnswerUntilTheJobEnded(t *testing.T) {
	var calls int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := atomic.AddInt32(&calls, 1)
		if r.URL.Query().Get("wait") == "" {
			t.Errorf("no wait: %s", r.URL)
		}
		status := "running"
		if n == 3 {
			status = "completed"
		}
		_, _ = io.WriteString(w, `{"id": 9, "type": "resize", "queue": "default", "payload": {}, "status": "`+
			status+`", "attempts": 1, "max_attempts": 3, "result": {"width": 100}}`)
	}))
	defer srv.Close()
	job, err := quick(srv.URL).Wait(context.Background(), 9)
	if err != nil || job.Status != Completed || calls != 3 {
		t.Fatalf("%+v %v after %d calls", job, err, calls)
	}
	var result struct{ Width int }
	if err := job.DecodeResult(&result); err != nil || result.Width != 100 {
		t.Fatalf("%+v %v", result, err)
	}
}

func TestWaitEndsWithItsContext(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		wait := r.URL.Query().Get("wait")
		if !strings.HasPrefix(wait, "0.") && !strings.HasPrefix(wait, "1") {
			t.Errorf("wait %q beyond the context's deadline", wait)
		}
		time.Sleep(20 * time.Millisecond)
		_, _ = io.WriteString(w, `{"id": 9, "type": "resize", "queue": "default", "payload": {}, "status": "running", "attempts": 1, "max_attempts": 3}`)
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	job, err := quick(srv.URL).Wait(ctx, 9)
	if !errors.Is(err, context.DeadlineExceeded) || job == nil || job.Status != Running {
		t.Fatalf("%+v %v", job, err)
	}
}
