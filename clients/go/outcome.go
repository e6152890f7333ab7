package jobqueue

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"
	"unicode/utf8"
)

// Typed is an error that names its own type for the job's record (its last_error
// is "<ErrorType()>: <Error()>"); otherwise the error's Go type name is used.
type Typed interface {
	error
	ErrorType() string
}

// Traced is an error that carries a traceback for the job's attempt history.
type Traced interface {
	error
	Traceback() string
}

type discardError struct{ err error }

func (d *discardError) Error() string { return d.err.Error() }
func (d *discardError) Unwrap() error { return d.err }

// Discard wraps a handler's error: the job fails for good now, attempts left or not.
func Discard(err error) error {
	if err == nil {
		err = errors.New("discarded")
	}
	return &discardError{err}
}

type retryError struct {
	err   error
	delay time.Duration
}

func (r *retryError) Error() string { return r.err.Error() }
func (r *retryError) Unwrap() error { return r.err }

// RetryIn wraps a handler's error: the attempt failed, and the job is retried
// after d (if attempts are left) rather than after the default backoff.
func RetryIn(d time.Duration, err error) error {
	if err == nil {
		err = fmt.Errorf("retry in %s", d)
	}
	if d < 0 {
		d = 0
	}
	return &retryError{err, d}
}

type snoozeError struct{ delay time.Duration }

func (s *snoozeError) Error() string { return fmt.Sprintf("snoozed for %s", s.delay) }

// Snooze is what a handler returns when its job cannot run yet (a partner API is
// down, a file is not there yet): the job runs again after d, this attempt not
// counted for its retry policy. A job snoozed JOBQUEUE_MAX_SNOOZES times fails
// instead, saying so. d under zero is zero.
func Snooze(d time.Duration) error {
	if d < 0 {
		d = 0
	}
	return &snoozeError{d}
}

// PanicError is what a handler's panic becomes: the job's attempt fails with type
// "panic", the panic's value as message, and the goroutine's stack as traceback.
type PanicError struct {
	Value any
	Stack string
}

func (p *PanicError) Error() string     { return fmt.Sprint(p.Value) }
func (p *PanicError) ErrorType() string { return "panic" }
func (p *PanicError) Traceback() string { return p.Stack }

// Limits of an error as the server stores it.
const (
	maxErrorType      = 200
	maxErrorMessage   = 4000
	maxErrorTraceback = 100_000
)

// failure is what a handler's error reports: the error, and the retry options its
// wrappers gave.
func failure(err error) (JobError, FailOptions) {
	var opts FailOptions
	var d *discardError
	if errors.As(err, &d) {
		opts.Discard = true
	}
	var r *retryError
	if errors.As(err, &r) {
		delay := r.delay
		opts.RetryIn = &delay
	}
	je := JobError{
		Type:    storable(ErrorType(err), maxErrorType),
		Message: storable(err.Error(), maxErrorMessage),
	}
	var traced Traced
	if errors.As(err, &traced) {
		je.Traceback = storable(traced.Traceback(), maxErrorTraceback)
	}
	if je.Type == "" {
		je.Type = "Error"
	}
	return je, opts
}

// ErrorType is the type a failed job's record names for err: the ErrorType() of the
// first error of its chain that declares one; else "Canceled" or "DeadlineExceeded"
// for a context's errors; else the Go type name (without package or pointer) of the
// first error of its chain that is not a mere wrapper (fmt.Errorf's, Discard's,
// RetryIn's); "Error" for errors.New's.
func ErrorType(err error) string {
	if err == nil {
		return ""
	}
	var typed Typed
	if errors.As(err, &typed) {
		if t := typed.ErrorType(); t != "" {
			return t
		}
	}
	switch {
	case errors.Is(err, context.Canceled):
		return "Canceled"
	case errors.Is(err, context.DeadlineExceeded):
		return "DeadlineExceeded"
	}
	for e := err; e != nil; e = errors.Unwrap(e) {
		switch e.(type) {
		case *discardError, *retryError:
			continue
		}
		t := reflect.TypeOf(e)
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		path, name := t.PkgPath(), t.Name()
		switch {
		case name == "":
			continue
		case path == "errors" && name == "errorString":
			return "Error"
		case path == "fmt" && strings.HasPrefix(name, "wrapError"):
			continue
		case path == "errors" && name == "joinError":
			continue
		}
		return name
	}
	return "Error"
}

// storable: s as PostgreSQL can store it (no NUL character, valid UTF-8), and at
// most n characters.
func storable(s string, n int) string {
	if strings.IndexByte(s, 0) >= 0 {
		s = strings.ReplaceAll(s, "\x00", "")
	}
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	runes := []rune(s)
	return string(runes[:n])
}
