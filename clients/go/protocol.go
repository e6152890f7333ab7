package jobqueue

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// The HTTP worker protocol (docs/http-workers.md), call by call. Worker runs it for
// you; these are for a loop of your own. Every call needs the scope jobs:work.

// ClaimRequest asks for jobs (POST /claims). Zero fields take the server's default.
type ClaimRequest struct {
	Worker       string   `json:"worker"`           // 1 to 100 of A-Z a-z 0-9 . _ : @ - (required)
	Queues       []string `json:"queues,omitempty"` // in this order; default ["default"]
	Types        []string `json:"types,omitempty"`  // only these types; nil: every type
	Max          int      `json:"max,omitempty"`    // 1 to 100; default 1
	WaitSeconds  float64  `json:"wait_seconds,omitempty"`
	LeaseSeconds float64  `json:"lease_seconds,omitempty"` // default JOBQUEUE_LEASE_SECONDS
}

// Claim claims up to req.Max due jobs, each with a lease, waiting up to
// req.WaitSeconds for one when none is due. A claim abandoned by ctx claims
// nothing: the server hands back what it claimed for it meanwhile.
func (c *Client) Claim(ctx context.Context, req ClaimRequest) ([]*Job, error) {
	var answer struct {
		Jobs []*Job `json:"jobs"`
	}
	_, err := c.do(ctx, &request{
		method: http.MethodPost, path: "/claims", body: req, out: &answer,
		longPoll: time.Duration(req.WaitSeconds * float64(time.Second)),
	})
	if err != nil {
		return nil, err
	}
	for _, job := range answer.Jobs {
		job.client = c
		job.leaseSeconds = req.LeaseSeconds
		job.Status = Running
	}
	return answer.Jobs, nil
}

// Renewal is a lease renewed by a heartbeat.
type Renewal struct {
	Lease string `json:"lease"`
	// OK: renewed (always true from Heartbeat, which answers ErrLeaseLost instead).
	// False in Heartbeats' answer: the lease lost its job, nothing changed.
	OK              bool      `json:"ok"`
	LeaseExpiresAt  time.Time `json:"lease_expires_at"`
	CancelRequested bool      `json:"cancel_requested"` // the job was asked to stop
	Detail          string    `json:"detail"`
}

// ProgressUpdate is a progress report sent with a heartbeat.
type ProgressUpdate struct {
	Fraction *float64 `json:"fraction,omitempty"` // 0 to 1
	Message  string   `json:"message,omitempty"`
}

// Heartbeat renews one lease for leaseSeconds (0: the server's default), with a
// progress report if given. A lease that lost its job is ErrLeaseLost (409).
func (c *Client) Heartbeat(ctx context.Context, id int64, lease string, leaseSeconds float64, progress *ProgressUpdate) (*Renewal, error) {
	body := struct {
		Lease        string          `json:"lease"`
		LeaseSeconds float64         `json:"lease_seconds,omitempty"`
		Progress     *ProgressUpdate `json:"progress,omitempty"`
	}{lease, leaseSeconds, progress}
	renewal := &Renewal{Lease: lease, OK: true}
	_, err := c.do(ctx, &request{
		method: http.MethodPost, path: jobPath(id) + "/heartbeat", body: body, out: renewal,
	})
	if err != nil {
		return nil, err
	}
	return renewal, nil
}

// MaxBatch is the most leases or outcomes one call of Heartbeats or Outcomes takes.
const MaxBatch = 1000

// Heartbeats renews many leases in one call: one Renewal each, in their order.
func (c *Client) Heartbeats(ctx context.Context, leases []string, leaseSeconds float64) ([]Renewal, error) {
	body := struct {
		Leases       []string `json:"leases"`
		LeaseSeconds float64  `json:"lease_seconds,omitempty"`
	}{leases, leaseSeconds}
	var answer struct {
		Leases []Renewal `json:"leases"`
	}
	_, err := c.do(ctx, &request{method: http.MethodPost, path: "/heartbeats", body: body, out: &answer})
	if err != nil {
		return nil, err
	}
	if len(answer.Leases) != len(leases) {
		return nil, fmt.Errorf("jobqueue: POST /heartbeats: %d answers for %d leases", len(answer.Leases), len(leases))
	}
	return answer.Leases, nil
}

// JobError is a failed attempt's error, as the job's last_error and attempt
// history record it: "<Type>: <Message>", and the traceback.
type JobError struct {
	Type      string `json:"type"` // 1 to 200 characters
	Message   string `json:"message,omitempty"`
	Traceback string `json:"traceback,omitempty"`
}

// Outcome is how one leased job ended: a completion (Result) or, with Error, a
// failed attempt, retried after RetryInSeconds (nil: the default backoff) while
// attempts are left, unless Discard.
type Outcome struct {
	Lease          string          `json:"lease"`
	Result         json.RawMessage `json:"result,omitempty"`
	Error          *JobError       `json:"error,omitempty"`
	RetryInSeconds *float64        `json:"retry_in_seconds,omitempty"`
	Discard        bool            `json:"discard,omitempty"`
	// SnoozeSeconds: a snooze, not a failure; the job runs again after this long,
	// its attempt not counted (Snooze).
	SnoozeSeconds *float64 `json:"snooze_seconds,omitempty"`
}

// Applied is the server's answer to an outcome, or to a release.
type Applied struct {
	Lease string `json:"lease"`
	// OK: applied. False: the lease lost its job, and nothing changed.
	OK bool  `json:"ok"`
	ID int64 `json:"id"`
	// Status: completed; or after a failure pending (retried), failed, or
	// cancelled (the job had been asked to stop); after a release pending (its
	// attempt not counted) or cancelled.
	Status         Status   `json:"status"`
	RetryInSeconds *float64 `json:"retry_in_seconds"`
	Detail         string   `json:"detail"`
}

// Complete ends a leased job as completed (cancelled if it was asked to stop), with result (anything JSON encodes;
// nil: null). A lease that lost its job is ErrLeaseLost (409).
func (c *Client) Complete(ctx context.Context, id int64, lease string, result any) (*Applied, error) {
	raw, err := json.Marshal(result)
	if err != nil {
		return nil, fmt.Errorf("jobqueue: encoding the result: %w", err)
	}
	body := struct {
		Lease  string          `json:"lease"`
		Result json.RawMessage `json:"result"`
	}{lease, raw}
	applied := &Applied{Lease: lease, OK: true}
	_, err = c.do(ctx, &request{method: http.MethodPost, path: jobPath(id) + "/complete", body: body, out: applied})
	if err != nil {
		return nil, err
	}
	return applied, nil
}

// FailOptions: retry after RetryIn (nil: the default backoff), or Discard the job
// (failed for good, attempts left or not).
type FailOptions struct {
	RetryIn *time.Duration
	Discard bool
}

// Fail ends a leased job's attempt as failed with jobErr. A lease that lost its
// job is ErrLeaseLost (409).
func (c *Client) Fail(ctx context.Context, id int64, lease string, jobErr JobError, opts FailOptions) (*Applied, error) {
	body := struct {
		Lease          string   `json:"lease"`
		Error          JobError `json:"error"`
		RetryInSeconds *float64 `json:"retry_in_seconds,omitempty"`
		Discard        bool     `json:"discard,omitempty"`
	}{Lease: lease, Error: jobErr, Discard: opts.Discard}
	if opts.RetryIn != nil {
		s := opts.RetryIn.Seconds()
		body.RetryInSeconds = &s
	}
	applied := &Applied{Lease: lease, OK: true}
	_, err := c.do(ctx, &request{method: http.MethodPost, path: jobPath(id) + "/fail", body: body, out: applied})
	if err != nil {
		return nil, err
	}
	return applied, nil
}

// Snooze runs a leased job again after d, its attempt not counted for its retry
// policy (POST /jobs/{id}/snooze). The answer's Status is pending; or failed once
// the job was snoozed JOBQUEUE_MAX_SNOOZES times, or cancelled if it was asked to
// stop. A lease that lost its job is ErrLeaseLost (409).
func (c *Client) Snooze(ctx context.Context, id int64, lease string, d time.Duration) (*Applied, error) {
	body := struct {
		Lease   string  `json:"lease"`
		Seconds float64 `json:"seconds"`
	}{lease, d.Seconds()}
	applied := &Applied{Lease: lease, OK: true}
	_, err := c.do(ctx, &request{method: http.MethodPost, path: jobPath(id) + "/snooze", body: body, out: applied})
	if err != nil {
		return nil, err
	}
	return applied, nil
}

// Release hands a leased job back (POST /jobs/{id}/release): pending again at once,
// for another worker to take, its attempt not counted; what a worker does with a job
// it could not finish when it stops. A job asked to stop ends cancelled instead.
// The answer's Status says which: pending or cancelled. A lease that lost its job is
// ErrLeaseLost (409).
func (c *Client) Release(ctx context.Context, id int64, lease string) (*Applied, error) {
	body := struct {
		Lease string `json:"lease"`
	}{lease}
	applied := &Applied{Lease: lease, OK: true}
	_, err := c.do(ctx, &request{method: http.MethodPost, path: jobPath(id) + "/release", body: body, out: applied})
	if err != nil {
		return nil, err
	}
	return applied, nil
}

// Outcomes reports many outcomes in one call: one Applied each, in their order.
func (c *Client) Outcomes(ctx context.Context, outcomes []Outcome) ([]Applied, error) {
	body := struct {
		Outcomes []Outcome `json:"outcomes"`
	}{outcomes}
	var answer struct {
		Outcomes []Applied `json:"outcomes"`
	}
	_, err := c.do(ctx, &request{method: http.MethodPost, path: "/outcomes", body: body, out: &answer})
	if err != nil {
		return nil, err
	}
	if len(answer.Outcomes) != len(outcomes) {
		return nil, fmt.Errorf("jobqueue: POST /outcomes: %d answers for %d outcomes", len(answer.Outcomes), len(outcomes))
	}
	return answer.Outcomes, nil
}
