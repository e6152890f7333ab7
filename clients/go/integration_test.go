package jobqueue

// Against a live `jobqueue api`: JOBQUEUE_URL, and JOBQUEUE_TOKEN, a token with the
// scopes jobs:work, jobs:enqueue, jobs:read, payloads:read, jobs:control and jobs:signal;
// JOBQUEUE_READ_TOKEN, one with jobs:read only, for the 403. Skipped when they are
// unset (tests/acceptance/test_go_client.py sets them).

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func live(t *testing.T) (*Client, string) {
	t.Helper()
	url, token := os.Getenv("JOBQUEUE_URL"), os.Getenv("JOBQUEUE_TOKEN")
	if url == "" || token == "" {
		t.Skip("JOBQUEUE_URL and JOBQUEUE_TOKEN are unset: no live server to test against")
	}
	// A queue of the test's own: the tests share one server.
	queue := fmt.Sprintf("go-%d-%d", time.Now().UnixNano()%1e9, rand.Intn(1e6))
	return NewClient(url, token), queue
}

// liveWorker runs a worker on queue until the test ends.
func liveWorker(t *testing.T, client *Client, queue string, handlers map[string]HandlerFunc) *Worker {
	t.Helper()
	w := NewWorker(WorkerConfig{
		Client: client, Name: "go-test-" + strings.ReplaceAll(t.Name(), "/", "-"), Queues: []string{queue},
		Concurrency: 4, LeaseSeconds: 3, WaitSeconds: 5, GracePeriod: time.Second, Logger: quiet(),
	})
	for name, h := range handlers {
		w.Handle(name, h)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("worker: %v", err)
		}
	})
	return w
}

func waitFor(t *testing.T, client *Client, id int64) *Job {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	job, err := client.Wait(ctx, id)
	if err != nil {
		t.Fatalf("job %d: %v (last seen %+v)", id, err, job)
	}
	return job
}

func TestLiveEnqueueGetAndIdempotency(t *testing.T) {
	client, queue := live(t)
	ctx := context.Background()
	job, err := client.Enqueue(ctx, "resize", map[string]string{"path": "a.png"}, &EnqueueOptions{
		Queue: queue, Priority: Priority(3), MaxAttempts: 5, DelaySeconds: 3600,
		IdempotencyKey: queue + "-order-7",
	})
	if err != nil {
		t.Fatal(err)
	}
	if !job.Created || job.ID == 0 || job.Status != Pending || job.Queue != queue || job.MaxAttempts != 5 ||
		job.Priority != 3 || !job.RunAt.After(time.Now().Add(59*time.Minute)) {
		t.Fatalf("%+v", job)
	}
	again, err := client.Enqueue(ctx, "resize", map[string]string{"path": "a.png"}, &EnqueueOptions{
		Queue: queue, Priority: Priority(3), MaxAttempts: 5, DelaySeconds: 3600,
		IdempotencyKey: queue + "-order-7",
	})
	if err != nil || again.ID != job.ID || again.Created {
		t.Fatalf("the same key is the same job: %+v %v", again, err)
	}
	_, err = client.Enqueue(ctx, "other", nil, &EnqueueOptions{Queue: queue, IdempotencyKey: queue + "-order-7"})
	var refused *Error
	if !errors.As(err, &refused) || refused.Status != 422 || !refused.HasField("Idempotency-Key") {
		t.Fatalf("a key reused for another request: %v", err)
	}
	got, err := client.Get(ctx, job.ID)
	if err != nil || got.ID != job.ID || string(got.Payload) != `{"path":"a.png"}` && string(got.Payload) != `{"path": "a.png"}` {
		t.Fatalf("%+v %v", got, err)
	}
	var p struct{ Path string }
	if err := got.Decode(&p); err != nil || p.Path != "a.png" {
		t.Fatalf("%+v %v", p, err)
	}
	unique, err := client.Enqueue(ctx, "resize", nil, &EnqueueOptions{Queue: queue, UniqueKey: queue, DelaySeconds: 60})
	if err != nil || !unique.Created {
		t.Fatalf("%+v %v", unique, err)
	}
	holder, err := client.Enqueue(ctx, "resize", nil, &EnqueueOptions{Queue: queue, UniqueKey: queue, DelaySeconds: 60})
	if err != nil || holder.Created || holder.ID != unique.ID {
		t.Fatalf("the unique key's holder: %+v %v", holder, err)
	}
	sent, err := client.SendSignal(ctx, unique.ID, "approved", map[string]string{"by": "ana"})
	if err != nil || sent.JobID != unique.ID || sent.Name != "approved" || sent.ID <= 0 {
		t.Fatalf("a signal to a pending job: %+v %v", sent, err)
	}
	cancelled, err := client.Cancel(ctx, unique.ID)
	if err != nil || cancelled.Status != Cancelled {
		t.Fatalf("%+v %v", cancelled, err)
	}
	if _, err := client.SendSignal(ctx, unique.ID, "approved", nil); !errors.Is(err, ErrConflict) {
		t.Fatalf("a signal to an ended job: %v", err)
	}
	if _, err := client.SendSignal(ctx, 1<<40, "approved", nil); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a signal to no job: %v", err)
	}
}

func TestLiveAWorkerCompletesAJobAndWaitSeesItsResult(t *testing.T) {
	client, queue := live(t)
	ctx := context.Background()
	liveWorker(t, client, queue, map[string]HandlerFunc{
		"resize": func(ctx context.Context, job *Job) (any, error) {
			var p struct{ Width int }
			if err := job.Decode(&p); err != nil {
				return nil, Discard(err)
			}
			if err := job.Progress(ctx, 0.5, "half"); err != nil {
				return nil, err
			}
			return map[string]any{"width": p.Width / 2, "attempt": job.Attempt, "lease": job.Lease != ""}, nil
		},
	})
	job, err := client.Enqueue(ctx, "resize", map[string]int{"width": 200}, &EnqueueOptions{Queue: queue})
	if err != nil {
		t.Fatal(err)
	}
	done := waitFor(t, client, job.ID)
	var result struct {
		Width   int
		Attempt int
		Lease   bool
	}
	if err := done.DecodeResult(&result); err != nil {
		t.Fatal(err)
	}
	if done.Status != Completed || done.Attempts != 1 || result.Width != 100 || result.Attempt != 1 || !result.Lease {
		t.Fatalf("%+v %+v", done, result)
	}
	if done.LastProgress == nil || *done.LastProgress.Fraction != 0.5 || done.LastProgress.Message != "half" {
		t.Fatalf("progress %+v", done.LastProgress)
	}
}

func TestLiveAFailedAttemptIsRetriedAndADiscardedJobFailsForGood(t *testing.T) {
	client, queue := live(t)
	ctx := context.Background()
	liveWorker(t, client, queue, map[string]HandlerFunc{
		"flaky": func(ctx context.Context, job *Job) (any, error) {
			if job.Attempt == 1 {
				return nil, RetryIn(0, &resizeError{9000})
			}
			return "second time lucky", nil
		},
		"fatal": func(ctx context.Context, job *Job) (any, error) {
			return nil, Discard(quotaError{})
		},
		"panics": func(ctx context.Context, job *Job) (any, error) {
			panic("the handler broke")
		},
	})
	flaky, err := client.Enqueue(ctx, "flaky", nil, &EnqueueOptions{Queue: queue, MaxAttempts: 3})
	if err != nil {
		t.Fatal(err)
	}
	fatal, err := client.Enqueue(ctx, "fatal", nil, &EnqueueOptions{Queue: queue, MaxAttempts: 3})
	if err != nil {
		t.Fatal(err)
	}
	panics, err := client.Enqueue(ctx, "panics", nil, &EnqueueOptions{Queue: queue, MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}

	done := waitFor(t, client, flaky.ID)
	if done.Status != Completed || done.Attempts != 2 || string(done.Result) != `"second time lucky"` {
		t.Fatalf("flaky: %+v", done)
	}
	attempts, err := client.Attempts(ctx, flaky.ID)
	if err != nil || len(attempts) == 0 || attempts[0].Error != "resizeError: too wide: 9000" {
		t.Fatalf("flaky's attempts: %+v %v", attempts, err)
	}

	done = waitFor(t, client, fatal.ID)
	if done.Status != Failed || done.Attempts != 1 || done.LastError != "QuotaExceeded: over quota" {
		t.Fatalf("fatal: %+v", done)
	}

	done = waitFor(t, client, panics.ID)
	if done.Status != Failed || done.LastError != "panic: the handler broke" {
		t.Fatalf("panics: %+v", done)
	}
	attempts, err = client.Attempts(ctx, panics.ID)
	if err != nil || len(attempts) != 1 || !strings.Contains(attempts[0].Traceback, "integration_test.go") {
		t.Fatalf("panics' attempts: %+v %v", attempts, err)
	}
}

func TestLiveACancelRequestCancelsTheHandlersContext(t *testing.T) {
	client, queue := live(t)
	ctx := context.Background()
	running := make(chan time.Time, 1)
	liveWorker(t, client, queue, map[string]HandlerFunc{
		"long": func(ctx context.Context, job *Job) (any, error) {
			running <- time.Now()
			<-ctx.Done()
			if !job.CancelRequested() {
				return nil, errors.New("cancelled, but not asked to stop")
			}
			return nil, ctx.Err()
		},
	})
	job, err := client.Enqueue(ctx, "long", nil, &EnqueueOptions{Queue: queue})
	if err != nil {
		t.Fatal(err)
	}
	<-running
	asked := time.Now()
	requested, err := client.Cancel(ctx, job.ID)
	if err != nil || requested.Status != Running || requested.CancelRequestedAt.IsZero() {
		t.Fatalf("%+v %v", requested, err)
	}
	done := waitFor(t, client, job.ID)
	if done.Status != Cancelled {
		t.Fatalf("%+v", done)
	}
	t.Logf("cancelled %s after the request (heartbeats every 1s)", time.Since(asked).Round(time.Millisecond))
	if _, err := client.Cancel(ctx, job.ID); err != nil {
		t.Fatalf("cancelling a cancelled job changes nothing: %v", err)
	}
}

func TestLiveRefusalsAreTypedErrorsWithTheServersMessage(t *testing.T) {
	client, queue := live(t)
	ctx := context.Background()

	// 401: an unknown token.
	stranger := NewClient(client.BaseURL, "jqt_nobody_0000")
	_, err := stranger.Get(ctx, 1)
	var refused *Error
	if !errors.Is(err, ErrUnauthorized) || !errors.As(err, &refused) || refused.Detail == "" {
		t.Fatalf("401: %v", err)
	}

	// 403: a token without jobs:work.
	if read := os.Getenv("JOBQUEUE_READ_TOKEN"); read != "" {
		reader := NewClient(client.BaseURL, read)
		_, err = reader.Claim(ctx, ClaimRequest{Worker: "w1", Queues: []string{queue}})
		if !errors.Is(err, ErrForbidden) || !errors.As(err, &refused) || !strings.Contains(refused.Detail, "jobs:work") {
			t.Fatalf("403: %v", err)
		}
	} else {
		t.Log("JOBQUEUE_READ_TOKEN unset: no 403 checked")
	}

	// 404
	if _, err = client.Get(ctx, 1<<62); !errors.Is(err, ErrNotFound) {
		t.Fatalf("404: %v", err)
	}

	// 422, naming the field.
	_, err = client.Claim(ctx, ClaimRequest{Worker: "w1", Queues: []string{queue}, Max: 101})
	if !errors.Is(err, ErrInvalid) || !errors.As(err, &refused) || !refused.HasField("max") ||
		!strings.Contains(refused.Detail, "max: ") {
		t.Fatalf("422: %v", err)
	}
	_, err = client.Enqueue(ctx, "resize", nil, &EnqueueOptions{Queue: queue, MaxAttempts: 5000})
	if !errors.As(err, &refused) || !refused.HasField("max_attempts") {
		t.Fatalf("422: %v", err)
	}

	// 409: a lease that no longer holds its job changes nothing.
	job, err := client.Enqueue(ctx, "resize", nil, &EnqueueOptions{Queue: queue})
	if err != nil {
		t.Fatal(err)
	}
	claimed, err := client.Claim(ctx, ClaimRequest{Worker: "w1", Queues: []string{queue}, Max: 5, LeaseSeconds: 30})
	if err != nil || len(claimed) != 1 || claimed[0].ID != job.ID || claimed[0].Attempt != 1 {
		t.Fatalf("%+v %v", claimed, err)
	}
	stale := claimed[0]
	_, err = client.Fail(ctx, stale.ID, stale.Lease, JobError{}, FailOptions{})
	if !errors.As(err, &refused) || !refused.HasField("error.type") {
		t.Fatalf("422 naming error.type: %v", err)
	}
	applied, err := client.Complete(ctx, stale.ID, stale.Lease, map[string]string{"by": "first"})
	if err != nil || applied.Status != Completed {
		t.Fatalf("%+v %v", applied, err)
	}
	// The same lease's completion sent again (its answer lost): answered as applied,
	// the first result kept.
	again, err := client.Complete(ctx, stale.ID, stale.Lease, "late")
	if err != nil || again.Status != Completed {
		t.Fatalf("sent again: %+v %v", again, err)
	}
	_, err = client.Fail(ctx, stale.ID, stale.Lease, JobError{Type: "Late"}, FailOptions{})
	if !errors.Is(err, ErrLeaseLost) || !errors.As(err, &refused) || !strings.Contains(refused.Detail, "nothing changed") {
		t.Fatalf("409: %v", err)
	}
	if _, err = client.Heartbeat(ctx, stale.ID, stale.Lease, 30, nil); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("409: %v", err)
	}
	renewals, err := client.Heartbeats(ctx, []string{stale.Lease}, 30)
	if err != nil || renewals[0].OK {
		t.Fatalf("%+v %v", renewals, err)
	}
	late := &JobError{Type: "Late"}
	answers, err := client.Outcomes(ctx, []Outcome{{Lease: stale.Lease, Error: late}})
	if err != nil || answers[0].OK || answers[0].ID != stale.ID {
		t.Fatalf("%+v %v", answers, err)
	}
	done, err := client.Get(ctx, job.ID)
	if err != nil || string(done.Result) != `{"by": "first"}` && string(done.Result) != `{"by":"first"}` {
		t.Fatalf("the first result stays: %+v %v", done, err)
	}
	// 409 of a job route: cancelling a completed job.
	if _, err = client.Cancel(ctx, job.ID); !errors.Is(err, ErrConflict) {
		t.Fatalf("409: %v", err)
	}
}

func TestLiveAReleasedJobIsPendingAgainItsAttemptNotCounted(t *testing.T) {
	client, queue := live(t)
	ctx := context.Background()
	claim := ClaimRequest{Worker: "w1", Queues: []string{queue}, Max: 5, LeaseSeconds: 30}
	// Its one attempt: a failure would end it failed; a release does not count it.
	job, err := client.Enqueue(ctx, "resize", nil, &EnqueueOptions{Queue: queue, MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	claimed, err := client.Claim(ctx, claim)
	if err != nil || len(claimed) != 1 || claimed[0].ID != job.ID || claimed[0].Attempt != 1 {
		t.Fatalf("%+v %v", claimed, err)
	}
	held := claimed[0]
	applied, err := client.Release(ctx, held.ID, held.Lease)
	if err != nil || applied.ID != job.ID || applied.Status != Pending || applied.RetryInSeconds != nil {
		t.Fatalf("%+v %v", applied, err)
	}
	got, err := client.Get(ctx, job.ID)
	if err != nil || got.Status != Pending || got.Attempts != 0 {
		t.Fatalf("released: %+v %v", got, err)
	}

	// The lease lost its job: releasing again changes nothing.
	_, err = client.Release(ctx, held.ID, held.Lease)
	var refused *Error
	if !errors.Is(err, ErrLeaseLost) || !errors.As(err, &refused) || !strings.Contains(refused.Detail, "nothing changed") {
		t.Fatalf("409: %v", err)
	}
	// A lease that is not one.
	if _, err = client.Release(ctx, held.ID, "not-a-lease"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("422: %v", err)
	}

	// Due at once, and claimed again it is still its first attempt.
	claimed, err = client.Claim(ctx, claim)
	if err != nil || len(claimed) != 1 || claimed[0].ID != job.ID || claimed[0].Attempt != 1 || claimed[0].Lease == held.Lease {
		t.Fatalf("claimed again: %+v %v", claimed, err)
	}
	// Asked to stop, then released: it ends cancelled.
	if requested, err := client.Cancel(ctx, job.ID); err != nil || requested.Status != Running {
		t.Fatalf("%+v %v", requested, err)
	}
	applied, err = client.Release(ctx, job.ID, claimed[0].Lease)
	if err != nil || applied.Status != Cancelled {
		t.Fatalf("%+v %v", applied, err)
	}
	if got, err = client.Get(ctx, job.ID); err != nil || got.Status != Cancelled {
		t.Fatalf("%+v %v", got, err)
	}
}

func TestLiveAWorkerStoppingHandsBackTheJobsItsShutdownInterrupted(t *testing.T) {
	client, queue := live(t)
	w := NewWorker(WorkerConfig{
		Client: client, Name: "go-test-shutdown", Queues: []string{queue},
		LeaseSeconds: 3, WaitSeconds: 5, GracePeriod: 200 * time.Millisecond, Logger: quiet(),
	})
	running := make(chan struct{}, 1)
	w.Handle("long", func(ctx context.Context, job *Job) (any, error) {
		running <- struct{}{}
		<-ctx.Done()
		return nil, ctx.Err()
	})
	job, err := client.Enqueue(context.Background(), "long", nil, &EnqueueOptions{Queue: queue, MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	select {
	case <-running:
	case <-time.After(30 * time.Second):
		stop()
		t.Fatal("the job never ran")
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	got, err := client.Get(context.Background(), job.ID)
	if err != nil || got.Status != Pending || got.Attempts != 0 || got.LastError != "" {
		t.Fatalf("handed back: %+v %v", got, err)
	}
	if s := w.Stats(); s.Claimed != 1 || s.Released != 1 || s.Retried != 0 || s.Failed != 0 {
		t.Fatalf("%+v", s)
	}
}

func TestLiveASnoozedJobRunsAgainLaterItsAttemptNotCounted(t *testing.T) {
	client, queue := live(t)
	ctx := context.Background()
	var runs int32
	w := liveWorker(t, client, queue, map[string]HandlerFunc{
		"poll": func(ctx context.Context, job *Job) (any, error) {
			if atomic.AddInt32(&runs, 1) == 1 {
				return nil, fmt.Errorf("partner down: %w", Snooze(200*time.Millisecond))
			}
			return "ready", nil
		},
	})
	job, err := client.Enqueue(ctx, "poll", nil, &EnqueueOptions{Queue: queue, MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	done := waitFor(t, client, job.ID)
	// One attempt allowed, and the snooze did not spend it.
	if done.Status != Completed || done.Attempts != 1 || string(done.Result) != `"ready"` {
		t.Fatalf("%+v", done)
	}
	if s := w.Stats(); s.Snoozed != 1 || s.Retried != 0 || s.Failed != 0 {
		t.Fatalf("stats %+v", s)
	}
	attempts, err := client.Attempts(ctx, job.ID)
	if err != nil || len(attempts) != 2 || attempts[0].Error != "snoozed for 0.200s" ||
		attempts[1].Attempt != 1 || attempts[1].Error != "" {
		t.Fatalf("attempts %+v %v", attempts, err)
	}

	// By hand, for a loop of one's own.
	byHand := queue + "-hand"
	other, err := client.Enqueue(ctx, "poll", nil, &EnqueueOptions{Queue: byHand})
	if err != nil {
		t.Fatal(err)
	}
	claimed, err := client.Claim(ctx, ClaimRequest{Worker: "w1", Queues: []string{byHand}, Max: 1, LeaseSeconds: 30})
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claim %+v %v", claimed, err)
	}
	applied, err := client.Snooze(ctx, other.ID, claimed[0].Lease, time.Hour)
	if err != nil || applied.Status != Pending || applied.RetryInSeconds == nil || *applied.RetryInSeconds != 3600 {
		t.Fatalf("snooze %+v %v", applied, err)
	}
	// Sent again (its answer lost, say), the same snooze is answered the same.
	again, err := client.Snooze(ctx, other.ID, claimed[0].Lease, time.Hour)
	if err != nil || again.Status != Pending {
		t.Fatalf("the snooze sent again: %+v %v", again, err)
	}
}
