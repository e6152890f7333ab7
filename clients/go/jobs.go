package jobqueue

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Job is a job as the server shows it: enqueued or read (Client.Enqueue, Get,
// Wait), or claimed by a worker (then Attempt, Lease and ParentResults are set, and
// Progress reports its progress).
type Job struct {
	ID      int64           `json:"id"`
	Type    string          `json:"type"`
	Queue   string          `json:"queue"`
	Payload json.RawMessage `json:"payload"`
	// MaxAttempts: attempts allowed.
	MaxAttempts int `json:"max_attempts"`
	// TraceID: the trace its enqueuer recorded (32 hex digits), or "".
	TraceID string `json:"trace_id"`

	// A claimed job's: this attempt (1 for the first), its lease (send it back as
	// it is), when the lease runs out without a heartbeat, and for a workflow job
	// its parents' results by their refs (nil outside workflows).
	Attempt        int                        `json:"attempt,omitempty"`
	Lease          string                     `json:"lease,omitempty"`
	LeaseExpiresAt time.Time                  `json:"lease_expires_at,omitempty"`
	ParentResults  map[string]json.RawMessage `json:"parent_results,omitempty"`

	// A stored job's (Enqueue, Get, Wait): its state; see docs/http-api.md.
	Status            Status          `json:"status,omitempty"`
	Attempts          int             `json:"attempts,omitempty"` // attempts started so far
	Priority          int             `json:"priority,omitempty"`
	RunAt             time.Time       `json:"run_at,omitempty"`
	LastError         string          `json:"last_error,omitempty"`
	WorkerID          string          `json:"worker_id,omitempty"`
	CreatedAt         time.Time       `json:"created_at,omitempty"`
	UpdatedAt         time.Time       `json:"updated_at,omitempty"`
	StartedAt         time.Time       `json:"started_at,omitempty"`
	FinishedAt        time.Time       `json:"finished_at,omitempty"`
	UniqueKey         string          `json:"unique_key,omitempty"`
	CancelRequestedAt time.Time       `json:"cancel_requested_at,omitempty"`
	Result            json.RawMessage `json:"result,omitempty"`
	// LastProgress: the latest progress its handler reported, or nil.
	LastProgress   *Progress `json:"progress,omitempty"`
	WorkflowID     int64     `json:"workflow_id,omitempty"`
	ConcurrencyKey string    `json:"concurrency_key,omitempty"`

	// Tags and Meta: its tags and metadata object (docs/search.md), stored and
	// claimed jobs alike; empty when none were set.
	Tags []string                   `json:"tags,omitempty"`
	Meta map[string]json.RawMessage `json:"meta,omitempty"`

	// Created: Enqueue stored it now (201), rather than answering with the holder
	// of its unique key or the job of its Idempotency-Key (200).
	Created bool `json:"-"`

	client       *Client // a claimed job's, for Progress
	leaseSeconds float64
	run          *running
}

// Status is a job's state.
type Status string

// A job's states.
const (
	Pending   Status = "pending"
	Running   Status = "running"
	Completed Status = "completed"
	Failed    Status = "failed"
	Cancelled Status = "cancelled"
)

// Final reports whether a job in this state has ended.
func (s Status) Final() bool { return s == Completed || s == Failed || s == Cancelled }

// Progress is what a handler last reported of its progress.
type Progress struct {
	Fraction  *float64  `json:"fraction"`
	Message   string    `json:"message"`
	UpdatedAt time.Time `json:"updated_at,omitempty"`
}

// Decode reads the job's payload into v (as json.Unmarshal).
func (j *Job) Decode(v any) error {
	if len(j.Payload) == 0 {
		return json.Unmarshal([]byte("{}"), v)
	}
	return json.Unmarshal(j.Payload, v)
}

// DecodeResult reads the job's result into v (as json.Unmarshal).
func (j *Job) DecodeResult(v any) error {
	if len(j.Result) == 0 {
		return json.Unmarshal([]byte("null"), v)
	}
	return json.Unmarshal(j.Result, v)
}

// EnqueueOptions: each field left zero takes the server's default.
type EnqueueOptions struct {
	Queue       string // default: "default" (or the task's queue under `jobqueue serve`)
	Priority    *int   // lower runs first; nil: the default (0, or the task's)
	MaxAttempts int    // 1 to 1000; 0: the default
	RunAt       time.Time
	// DelaySeconds: do not start before this many seconds from now (not with RunAt).
	DelaySeconds float64
	// UniqueKey: while a job with this key is pending or running (or completed less
	// than UniqueForSeconds ago), no new job is stored: Enqueue answers that job.
	UniqueKey        string
	UniqueForSeconds float64
	ConcurrencyKey   string // the key its queue's key limits count it under
	// Tags (at most 16, each 1 to 64 characters) and Meta (an object of at most
	// 8 KiB as JSON): what GET /jobs?tag=...&meta.KEY=VALUE finds it by.
	Tags []string
	Meta map[string]any
	// IdempotencyKey is sent as the Idempotency-Key header: a retry of the same
	// request gets the job the first one stored, never a second job. With it, every
	// transient failure of the enqueue is retried; without it, only those where
	// the job surely was not stored.
	IdempotencyKey string
	// TraceParent and TraceState: W3C trace context recorded with the job.
	TraceParent string
	TraceState  string
}

// Priority returns a pointer to p, for EnqueueOptions.Priority.
func Priority(p int) *int { return &p }

type newJob struct {
	Type           string          `json:"type"`
	Payload        json.RawMessage `json:"payload,omitempty"`
	Queue          string          `json:"queue,omitempty"`
	Priority       *int            `json:"priority,omitempty"`
	MaxAttempts    int             `json:"max_attempts,omitempty"`
	RunAt          *time.Time      `json:"run_at,omitempty"`
	DelaySeconds   *float64        `json:"delay_seconds,omitempty"`
	UniqueKey      string          `json:"unique_key,omitempty"`
	UniqueFor      *float64        `json:"unique_for,omitempty"`
	ConcurrencyKey string          `json:"concurrency_key,omitempty"`
	Tags           []string        `json:"tags,omitempty"`
	Meta           map[string]any  `json:"meta,omitempty"`
}

// Enqueue stores a job of type jobType with payload (anything that encodes to a
// JSON object; nil: {}), and returns it. opts may be nil.
func (c *Client) Enqueue(ctx context.Context, jobType string, payload any, opts *EnqueueOptions) (*Job, error) {
	if opts == nil {
		opts = &EnqueueOptions{}
	}
	body := newJob{
		Type: jobType, Queue: opts.Queue, Priority: opts.Priority, MaxAttempts: opts.MaxAttempts,
		UniqueKey: opts.UniqueKey, ConcurrencyKey: opts.ConcurrencyKey, Tags: opts.Tags,
		Meta: opts.Meta,
	}
	if payload != nil {
		raw, err := json.Marshal(payload)
		if err != nil {
			return nil, fmt.Errorf("jobqueue: encoding the payload: %w", err)
		}
		body.Payload = raw
	}
	if !opts.RunAt.IsZero() {
		at := opts.RunAt
		body.RunAt = &at
	}
	if opts.DelaySeconds != 0 {
		d := opts.DelaySeconds
		body.DelaySeconds = &d
	}
	if opts.UniqueForSeconds != 0 {
		d := opts.UniqueForSeconds
		body.UniqueFor = &d
	}
	r := &request{method: http.MethodPost, path: "/jobs", body: body, header: http.Header{}, safety: retryUnsent}
	if opts.IdempotencyKey != "" {
		r.header.Set("Idempotency-Key", quoteKey(opts.IdempotencyKey))
		r.safety = retryAny
	}
	if opts.TraceParent != "" {
		r.header.Set("traceparent", opts.TraceParent)
		if opts.TraceState != "" {
			r.header.Set("tracestate", opts.TraceState)
		}
	}
	job := &Job{}
	r.out = job
	status, err := c.do(ctx, r)
	if err != nil {
		return nil, err
	}
	job.Created = status == http.StatusCreated
	return job, nil
}

// quoteKey spells an Idempotency-Key as a structured-field string.
func quoteKey(key string) string {
	if strings.HasPrefix(key, `"`) && strings.HasSuffix(key, `"`) && len(key) >= 2 {
		return key // already quoted
	}
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(key) + `"`
}

// Get returns the job as stored now.
func (c *Client) Get(ctx context.Context, id int64) (*Job, error) {
	job := &Job{}
	_, err := c.do(ctx, &request{method: http.MethodGet, path: jobPath(id), out: job})
	if err != nil {
		return nil, err
	}
	return job, nil
}

// longestWait is the longest GET /jobs/{id}?wait= this client asks for.
const longestWait = 60 * time.Second

// Wait returns the job once it ended (completed, failed or cancelled), asking the
// server to hold each answer until then (GET /jobs/{id}?wait=S) as long as ctx
// allows. When ctx is done first, it returns the job as last seen (nil if never
// seen) and ctx's error.
func (c *Client) Wait(ctx context.Context, id int64) (*Job, error) {
	var last *Job
	for {
		wait := longestWait
		if deadline, ok := ctx.Deadline(); ok {
			// Leave a moment for the answer to come back before the deadline.
			left := time.Until(deadline) - 500*time.Millisecond
			if left < wait {
				wait = left
			}
		}
		if wait < 10*time.Millisecond {
			if err := ctx.Err(); err != nil {
				return last, err
			}
			wait = 10 * time.Millisecond
		}
		job := &Job{}
		seconds := math.Ceil(wait.Seconds()*1000) / 1000
		_, err := c.do(ctx, &request{
			method: http.MethodGet, path: jobPath(id), out: job, longPoll: wait,
			query: url.Values{"wait": {strconv.FormatFloat(seconds, 'f', -1, 64)}},
		})
		if err != nil {
			if ctx.Err() != nil {
				return last, ctx.Err()
			}
			return last, err
		}
		last = job
		if job.Status.Final() {
			return job, nil
		}
		if err := ctx.Err(); err != nil {
			return last, err
		}
	}
}

// Cancel cancels a pending job, or asks a running one to stop (its worker's
// handler sees its ctx cancelled, and the job ends cancelled). It returns the job.
// A completed or failed job is a 409 (ErrConflict).
func (c *Client) Cancel(ctx context.Context, id int64) (*Job, error) {
	job := &Job{}
	_, err := c.do(ctx, &request{method: http.MethodPost, path: jobPath(id) + "/cancel", out: job})
	if err != nil {
		return nil, err
	}
	return job, nil
}

// SignalSent is the answer to SendSignal: the signal's id, its job and its name.
type SignalSent struct {
	ID    int64  `json:"id"`
	JobID int64  `json:"job_id"`
	Name  string `json:"name"`
}

// SendSignal sends a durable job a signal, for its handler's
// ctx.wait_for_signal(name): kept if the job does not wait for it yet, waking it if
// it does (docs/durable.md#signals). payload is any JSON value (nil: null). A job
// that has ended is a 409 (ErrConflict), an unknown one a 404 (ErrNotFound). It
// takes the scope jobs:signal. It is sent again only if it never reached the
// server: a second signal would be a second signal.
func (c *Client) SendSignal(ctx context.Context, id int64, name string, payload any) (*SignalSent, error) {
	body := map[string]any{"name": name, "job_id": id, "payload": payload}
	sent := &SignalSent{}
	r := &request{method: http.MethodPost, path: "/signals", body: body, out: sent, safety: retryUnsent}
	if _, err := c.do(ctx, r); err != nil {
		return nil, err
	}
	return sent, nil
}

// Attempt is one attempt of a job's history (Client.Attempts): every failed one,
// and any other that logged.
type Attempt struct {
	Attempt    int       `json:"attempt"`
	WorkerID   string    `json:"worker_id"`
	Error      string    `json:"error"` // "<type>: <message>"; "" for one that did not fail
	Traceback  string    `json:"traceback"`
	StartedAt  time.Time `json:"started_at"`
	FinishedAt time.Time `json:"finished_at"`
	Seconds    float64   `json:"seconds"`
	Log        string    `json:"log"`
}

// Attempts returns the job's attempt history, oldest first.
func (c *Client) Attempts(ctx context.Context, id int64) ([]Attempt, error) {
	var answer struct {
		Attempts []Attempt `json:"attempts"`
	}
	_, err := c.do(ctx, &request{method: http.MethodGet, path: jobPath(id) + "/attempts", out: &answer})
	return answer.Attempts, err
}

func jobPath(id int64) string { return "/jobs/" + strconv.FormatInt(id, 10) }
