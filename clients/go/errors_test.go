package jobqueue

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"
)

func TestParseErrorOfA422NamesEachField(t *testing.T) {
	body := []byte(`{"detail": [{"field": "max", "loc": ["body", "max"], "msg": "Input should be less than or equal to 100", "type": "less_than_equal"},
		{"field": "queues.0", "loc": ["body", "queues", 0], "msg": "String should match pattern", "type": "string_pattern_mismatch"}]}`)
	e := parseError("POST", "/claims", 422, http.Header{}, body)
	if !errors.Is(e, ErrInvalid) || errors.Is(e, ErrLeaseLost) {
		t.Fatalf("422 is ErrInvalid only: %v", e)
	}
	if !e.HasField("max") || !e.HasField("queues.0") || e.HasField("worker") {
		t.Fatalf("fields: %+v", e.Fields)
	}
	want := "max: Input should be less than or equal to 100; queues.0: String should match pattern"
	if e.Detail != want {
		t.Fatalf("detail %q, want %q", e.Detail, want)
	}
	if got := e.Error(); got != "jobqueue: POST /claims: 422 Unprocessable Entity: "+want {
		t.Fatalf("message %q", got)
	}
}

func TestParseErrorKeepsTheServersMessage(t *testing.T) {
	e := parseError("POST", "/jobs/7/complete", 409, http.Header{},
		[]byte(`{"detail": "this lease no longer holds its job; nothing changed"}`))
	if !errors.Is(e, ErrLeaseLost) || !errors.Is(e, ErrConflict) || errors.Is(e, ErrInvalid) {
		t.Fatalf("409: %v", e)
	}
	if e.Detail != "this lease no longer holds its job; nothing changed" || e.Status != 409 {
		t.Fatalf("%+v", e)
	}
	wrapped := fmt.Errorf("completing: %w", e)
	var typed *Error
	if !errors.As(wrapped, &typed) || !errors.Is(wrapped, ErrLeaseLost) {
		t.Fatal("a wrapped *Error is still found")
	}
	for status, sentinel := range map[int]error{
		401: ErrUnauthorized, 403: ErrForbidden, 404: ErrNotFound, 422: ErrInvalid, 503: ErrUnavailable,
	} {
		if !errors.Is(&Error{Status: status}, sentinel) {
			t.Errorf("%d is not %v", status, sentinel)
		}
	}
}

func TestParseErrorOfAnUnavailableEnqueue(t *testing.T) {
	h := http.Header{}
	h.Set("Retry-After", "1")
	e := parseError("POST", "/jobs", 503, h, []byte(`{"detail": "database unavailable; nothing stored, retry later", "stored": false}`))
	if e.Stored != "false" || e.RetryAfter != time.Second || !e.Temporary() {
		t.Fatalf("%+v", e)
	}
	e = parseError("POST", "/jobs", 503, http.Header{}, []byte(`{"detail": "lost", "stored": "unknown"}`))
	if e.Stored != "unknown" {
		t.Fatalf("%+v", e)
	}
	e = parseError("GET", "/jobs/1", 502, http.Header{}, []byte("<html>bad gateway</html>"))
	if e.Detail != "<html>bad gateway</html>" {
		t.Fatalf("a body that is not JSON is the detail: %+v", e)
	}
}

func TestRetryAfterReadsSecondsAndDates(t *testing.T) {
	now := time.Date(2026, 12, 4, 15, 0, 0, 0, time.UTC)
	cases := map[string]time.Duration{
		"":                              0,
		"2":                             2 * time.Second,
		"0.5":                           500 * time.Millisecond,
		"-1":                            0,
		"soon":                          0,
		"Fri, 04 Dec 2026 15:00:03 GMT": 3 * time.Second,
		"Fri, 04 Dec 2026 14:00:00 GMT": 0,
	}
	for value, want := range cases {
		if got := retryAfter(value, now); got != want {
			t.Errorf("Retry-After %q: %s, want %s", value, got, want)
		}
	}
}

type resizeError struct{ width int }

func (e *resizeError) Error() string { return fmt.Sprintf("too wide: %d", e.width) }

type quotaError struct{}

func (quotaError) Error() string     { return "over quota" }
func (quotaError) ErrorType() string { return "QuotaExceeded" }

func TestErrorTypeNamesTheErrorsType(t *testing.T) {
	cases := []struct {
		err  error
		want string
	}{
		{errors.New("boom"), "Error"},
		{fmt.Errorf("plain %d", 1), "Error"},
		{&resizeError{3}, "resizeError"},
		{fmt.Errorf("resizing a.png: %w", &resizeError{3}), "resizeError"},
		{Discard(&resizeError{3}), "resizeError"},
		{RetryIn(time.Second, fmt.Errorf("x: %w", quotaError{})), "QuotaExceeded"},
		{quotaError{}, "QuotaExceeded"},
		{context.Canceled, "Canceled"},
		{fmt.Errorf("waiting: %w", context.DeadlineExceeded), "DeadlineExceeded"},
		{&PanicError{Value: "nil map"}, "panic"},
	}
	for _, c := range cases {
		if got := ErrorType(c.err); got != c.want {
			t.Errorf("ErrorType(%#v) = %q, want %q", c.err, got, c.want)
		}
	}
}

func TestFailureCarriesTheWrappersOptions(t *testing.T) {
	je, opts := failure(Discard(&resizeError{5}))
	if je.Type != "resizeError" || je.Message != "too wide: 5" || !opts.Discard || opts.RetryIn != nil {
		t.Fatalf("%+v %+v", je, opts)
	}
	je, opts = failure(RetryIn(90*time.Second, errors.New("rate limited")))
	if je.Type != "Error" || je.Message != "rate limited" || opts.Discard || *opts.RetryIn != 90*time.Second {
		t.Fatalf("%+v %+v", je, opts)
	}
	je, _ = failure(&PanicError{Value: "boom", Stack: "goroutine 1"})
	if je.Type != "panic" || je.Traceback != "goroutine 1" {
		t.Fatalf("%+v", je)
	}
}

func TestStorableDropsWhatPostgreSQLCannotStore(t *testing.T) {
	if got := storable("a\x00b\xffc", 100); got != "ab\uFFFDc" {
		t.Fatalf("%q", got)
	}
	if got := storable("ééé", 2); got != "éé" {
		t.Fatalf("%q", got)
	}
}
