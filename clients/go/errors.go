package jobqueue

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Error is a refusal of the server: an answer with a status of 400 or above. Its
// Detail is the server's message; for a 422, Fields names each field at fault.
type Error struct {
	Status int    // the HTTP status, e.g. 409
	Detail string // the server's message ("; "-joined "field: message" for a 422)
	// Fields: for a 422 (and a 415), each field at fault as the server names it
	// ("max", "queues.0", "error.type", "Idempotency-Key"...).
	Fields []FieldError
	// Stored: for a 503 of an enqueue, whether the job may have been stored
	// ("false" or "unknown"); empty otherwise.
	Stored string
	// RetryAfter is the server's Retry-After, if it sent one (503).
	RetryAfter time.Duration
	Method     string // the request's method
	Path       string // the request's path, without the query
}

// FieldError is one field of a 422's detail.
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"msg"`
	Type    string `json:"type"`
}

func (e *Error) Error() string {
	text := http.StatusText(e.Status)
	if text == "" {
		text = "error"
	}
	if e.Detail == "" {
		return fmt.Sprintf("jobqueue: %s %s: %d %s", e.Method, e.Path, e.Status, text)
	}
	return fmt.Sprintf("jobqueue: %s %s: %d %s: %s", e.Method, e.Path, e.Status, text, e.Detail)
}

// HasField reports whether the server named the field (a 422's detail).
func (e *Error) HasField(name string) bool {
	for _, f := range e.Fields {
		if f.Field == name {
			return true
		}
	}
	return false
}

// Is makes errors.Is(err, ErrLeaseLost) and the like true for an *Error of the
// sentinel's status.
func (e *Error) Is(target error) bool {
	s, ok := target.(*statusError)
	return ok && s.status == e.Status
}

// Temporary reports whether the request may succeed if sent again: a 503.
func (e *Error) Temporary() bool { return e.Status == http.StatusServiceUnavailable }

type statusError struct {
	status int
	name   string
}

func (s *statusError) Error() string { return "jobqueue: " + s.name }

// Sentinels for errors.Is: each matches an *Error of its status.
var (
	ErrBadRequest   error = &statusError{400, "malformed request (400)"}
	ErrUnauthorized error = &statusError{401, "no token, or an unknown, expired or revoked one (401)"}
	ErrForbidden    error = &statusError{403, "the token may not do this (403)"}
	ErrNotFound     error = &statusError{404, "not found (404)"}
	// ErrLeaseLost (409): the lease no longer holds its job (rescued, ended, or
	// another token's); nothing changed. On job routes a 409 is ErrConflict: a
	// retry or cancel that does not apply to the job's state. Both match any 409.
	ErrLeaseLost        error = &statusError{409, "the lease no longer holds its job (409)"}
	ErrConflict         error = &statusError{409, "conflict with the job's state (409)"}
	ErrGone             error = &statusError{410, "gone (410)"}
	ErrTooLarge         error = &statusError{413, "request too large (413)"}
	ErrInvalid          error = &statusError{422, "invalid request (422)"}
	ErrUnavailable      error = &statusError{503, "service unavailable (503)"}
	ErrUnsupportedMedia error = &statusError{415, "unsupported media type (415)"}
)

// parseError builds the *Error of an answer of status 400 or above from its body.
func parseError(method, path string, status int, header http.Header, body []byte) *Error {
	e := &Error{Status: status, Method: method, Path: path}
	e.RetryAfter = retryAfter(header.Get("Retry-After"), time.Now())
	var parsed struct {
		Detail json.RawMessage `json:"detail"`
		Stored json.RawMessage `json:"stored"`
	}
	if json.Unmarshal(body, &parsed) != nil || len(parsed.Detail) == 0 {
		e.Detail = strings.TrimSpace(truncate(string(body), 2000))
		return e
	}
	var text string
	var fields []FieldError
	switch {
	case json.Unmarshal(parsed.Detail, &text) == nil:
		e.Detail = text
	case json.Unmarshal(parsed.Detail, &fields) == nil:
		e.Fields = fields
		parts := make([]string, 0, len(fields))
		for _, f := range fields {
			if f.Field != "" {
				parts = append(parts, f.Field+": "+f.Message)
			} else {
				parts = append(parts, f.Message)
			}
		}
		e.Detail = strings.Join(parts, "; ")
	default:
		e.Detail = string(parsed.Detail)
	}
	if len(parsed.Stored) > 0 {
		var b bool
		var s string
		if json.Unmarshal(parsed.Stored, &b) == nil {
			e.Stored = fmt.Sprint(b)
		} else if json.Unmarshal(parsed.Stored, &s) == nil {
			e.Stored = s
		}
	}
	return e
}

// retryAfter reads a Retry-After header: seconds, or an HTTP date.
func retryAfter(value string, now time.Time) time.Duration {
	value = strings.TrimSpace(value)
	if value == "" {
		return 0
	}
	if seconds, err := strconv.ParseFloat(value, 64); err == nil {
		if seconds < 0 || seconds != seconds || seconds > 86400 {
			return 0
		}
		return time.Duration(seconds * float64(time.Second))
	}
	if at, err := http.ParseTime(value); err == nil && at.After(now) {
		return at.Sub(now)
	}
	return 0
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	// Cut on a rune boundary.
	for n > 0 && n < len(s) && (s[n]&0xC0) == 0x80 {
		n--
	}
	return s[:n]
}
