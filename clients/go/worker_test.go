package jobqueue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeServer plays the HTTP worker protocol's server side, in memory.
type fakeServer struct {
	t      *testing.T
	mu     sync.Mutex
	due    []*Job
	held   map[string]int64 // lease -> job id
	cancel map[int64]bool   // the job was asked to stop
	claims []ClaimRequest
	beats  [][]string // each POST /heartbeats' leases
	ended  map[int64]Outcome
	calls  map[string]int // outcomes posts, by their size
	// released: the jobs handed back (POST /jobs/{id}/release), by id: their lease.
	released map[int64]string
	// releaseAs, if it names a job, answers its release "cancelled" (asked to stop
	// meanwhile) or "lost" (409).
	releaseAs map[int64]string
	// refuse, if set, answers POST /outcomes itself.
	refuse     func(outcomes []Outcome) (int, string)
	claimError int
	next       int
}

func newFake(t *testing.T, jobs ...*Job) (*fakeServer, *httptest.Server) {
	f := &fakeServer{
		t: t, due: jobs, held: map[string]int64{}, cancel: map[int64]bool{},
		ended: map[int64]Outcome{}, calls: map[string]int{}, released: map[int64]string{},
		releaseAs: map[int64]string{},
	}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, srv
}

func job(id int64, jobType string, payload string) *Job {
	return &Job{ID: id, Type: jobType, Queue: "default", Payload: json.RawMessage(payload), Attempt: 1, MaxAttempts: 3}
}

func (f *fakeServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	if r.Header.Get("Authorization") != "Bearer secret" {
		w.WriteHeader(401)
		_, _ = io.WriteString(w, `{"detail": "unknown token"}`)
		return
	}
	switch r.URL.Path {
	case "/claims":
		f.claim(w, r)
	case "/heartbeats":
		f.heartbeats(w, r)
	case "/outcomes":
		f.outcomes(w, r)
	default:
		if strings.HasPrefix(r.URL.Path, "/jobs/") && strings.HasSuffix(r.URL.Path, "/release") {
			f.release(w, r)
			return
		}
		f.t.Errorf("unexpected %s %s", r.Method, r.URL.Path)
		w.WriteHeader(404)
	}
}

func (f *fakeServer) claim(w http.ResponseWriter, r *http.Request) {
	var req ClaimRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		f.t.Error(err)
	}
	f.mu.Lock()
	f.claims = append(f.claims, req)
	if f.claimError != 0 {
		f.mu.Unlock()
		w.WriteHeader(f.claimError)
		_, _ = io.WriteString(w, `{"detail": "this token lacks the scope jobs:work"}`)
		return
	}
	n := req.Max
	if n > len(f.due) {
		n = len(f.due)
	}
	jobs := f.due[:n]
	f.due = f.due[n:]
	out := []map[string]any{}
	for _, j := range jobs {
		f.next++
		lease := fmt.Sprintf("%d.%d.%s", j.ID, f.next, req.Worker)
		f.held[lease] = j.ID
		out = append(out, map[string]any{
			"id": j.ID, "type": j.Type, "queue": j.Queue, "payload": j.Payload, "attempt": j.Attempt,
			"max_attempts": j.MaxAttempts, "lease": lease, "lease_expires_at": time.Now().Add(time.Minute),
			"trace_id": nil, "parent_results": nil,
		})
	}
	f.mu.Unlock()
	if len(out) == 0 { // a short long poll
		select {
		case <-time.After(50 * time.Millisecond):
		case <-r.Context().Done():
		}
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"jobs": out})
}

func (f *fakeServer) heartbeats(w http.ResponseWriter, r *http.Request) {
	var req struct{ Leases []string }
	_ = json.NewDecoder(r.Body).Decode(&req)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.beats = append(f.beats, req.Leases)
	out := []map[string]any{}
	for _, lease := range req.Leases {
		id, ok := f.held[lease]
		out = append(out, map[string]any{"lease": lease, "ok": ok, "cancel_requested": ok && f.cancel[id]})
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"leases": out})
}

func (f *fakeServer) outcomes(w http.ResponseWriter, r *http.Request) {
	var req struct{ Outcomes []Outcome }
	_ = json.NewDecoder(r.Body).Decode(&req)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[fmt.Sprint(len(req.Outcomes))]++
	if f.refuse != nil {
		if status, body := f.refuse(req.Outcomes); status != 0 {
			w.WriteHeader(status)
			_, _ = io.WriteString(w, body)
			return
		}
	}
	out := []map[string]any{}
	for _, o := range req.Outcomes {
		id, ok := f.held[o.Lease]
		answer := map[string]any{"lease": o.Lease, "ok": ok, "id": id}
		if ok {
			delete(f.held, o.Lease)
			f.ended[id] = o
			switch {
			case o.Error == nil:
				answer["status"] = "completed"
			case f.cancel[id]:
				answer["status"] = "cancelled"
			case o.Discard:
				answer["status"] = "failed"
			default:
				answer["status"] = "pending"
			}
		}
		out = append(out, answer)
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"outcomes": out})
}

func (f *fakeServer) release(w http.ResponseWriter, r *http.Request) {
	var req struct{ Lease string }
	_ = json.NewDecoder(r.Body).Decode(&req)
	var id int64
	if _, err := fmt.Sscanf(r.URL.Path, "/jobs/%d/release", &id); err != nil {
		f.t.Errorf("%s: %v", r.URL.Path, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if held, ok := f.held[req.Lease]; !ok || held != id || f.releaseAs[id] == "lost" {
		w.WriteHeader(409)
		_, _ = io.WriteString(w, `{"detail": "this lease no longer holds its job; nothing changed"}`)
		return
	}
	delete(f.held, req.Lease)
	f.released[id] = req.Lease
	status := "pending"
	if f.cancel[id] || f.releaseAs[id] == "cancelled" {
		status = "cancelled"
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"id": id, "status": status, "retry_in_seconds": nil})
}

func (f *fakeServer) outcome(id int64) (Outcome, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	o, ok := f.ended[id]
	return o, ok
}

// eventually polls cond until it holds, failing the test after a deadline.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within 10s: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func quiet() *log.Logger { return log.New(io.Discard, "", 0) }

func testWorker(srv *httptest.Server, cfg WorkerConfig) *Worker {
	cfg.Client = quick(srv.URL)
	if cfg.Logger == nil {
		cfg.Logger = quiet()
	}
	if cfg.Name == "" {
		cfg.Name = "w1"
	}
	if cfg.LeaseSeconds == 0 {
		cfg.LeaseSeconds = 1 // a heartbeat every 333 ms
	}
	return NewWorker(cfg)
}

// running runs the worker until the test ends, then checks it stopped cleanly.
func start(t *testing.T, w *Worker) (stop func() error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case err = <-done:
			case <-time.After(20 * time.Second):
				t.Fatal("the worker did not stop")
			}
		})
		return err
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

func TestAWorkerRunsJobsAndReportsTheirOutcomesTogether(t *testing.T) {
	var jobs []*Job
	for i := int64(1); i <= 40; i++ {
		jobs = append(jobs, job(i, "resize", fmt.Sprintf(`{"n": %d}`, i)))
	}
	jobs = append(jobs, job(41, "boom", `{}`), job(42, "fatal", `{}`), job(43, "later", `{}`), job(44, "panics", `{}`))
	f, srv := newFake(t, jobs...)
	w := testWorker(srv, WorkerConfig{Concurrency: 50, BatchWindow: 50 * time.Millisecond})
	w.Handle("resize", func(ctx context.Context, job *Job) (any, error) {
		var p struct{ N int }
		if err := job.Decode(&p); err != nil {
			return nil, err
		}
		return map[string]int{"twice": 2 * p.N}, nil
	})
	w.Handle("boom", func(ctx context.Context, job *Job) (any, error) {
		return nil, fmt.Errorf("resizing: %w", &resizeError{9000})
	})
	w.Handle("fatal", func(ctx context.Context, job *Job) (any, error) {
		return nil, Discard(errors.New("no such image"))
	})
	w.Handle("later", func(ctx context.Context, job *Job) (any, error) {
		return nil, RetryIn(90*time.Second, quotaError{})
	})
	w.Handle("panics", func(ctx context.Context, job *Job) (any, error) {
		var m map[string]int
		m["x"] = 1
		return nil, nil
	})
	stop := start(t, w)
	eventually(t, "every job ended", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return len(f.ended) == 44
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	for i := int64(1); i <= 40; i++ {
		o, _ := f.outcome(i)
		if o.Error != nil || string(o.Result) != fmt.Sprintf(`{"twice":%d}`, 2*i) {
			t.Fatalf("job %d: %+v %s", i, o, o.Result)
		}
	}
	o, _ := f.outcome(41)
	if *o.Error != (JobError{Type: "resizeError", Message: "resizing: too wide: 9000"}) || o.Discard || o.RetryInSeconds != nil {
		t.Fatalf("boom: %+v", o)
	}
	if o, _ = f.outcome(42); o.Error.Type != "Error" || !o.Discard {
		t.Fatalf("fatal: %+v", o)
	}
	if o, _ = f.outcome(43); o.Error.Type != "QuotaExceeded" || *o.RetryInSeconds != 90 {
		t.Fatalf("later: %+v", o)
	}
	if o, _ = f.outcome(44); o.Error.Type != "panic" || !strings.Contains(o.Error.Message, "nil map") ||
		!strings.Contains(o.Error.Traceback, "worker_test.go") {
		t.Fatalf("panics: %+v", o)
	}
	// Claimed together, as many as slots were free; the outcomes gathered.
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.claims[0].Max != 50 || f.claims[0].Worker != "w1" || f.claims[0].LeaseSeconds != 1 ||
		strings.Join(f.claims[0].Types, ",") != "boom,fatal,later,panics,resize" {
		t.Fatalf("first claim %+v", f.claims[0])
	}
	posts := 0
	for _, n := range f.calls {
		posts += n
	}
	if posts > 10 {
		t.Fatalf("44 outcomes in %d posts: %v", posts, f.calls)
	}
	if s := w.Stats(); s.Claimed != 44 || s.Completed != 40 || s.Retried != 3 || s.Failed != 1 {
		t.Fatalf("%+v", s)
	}
}

func TestRunningJobsAreRenewedTogetherAndACancelRequestCancelsTheHandler(t *testing.T) {
	f, srv := newFake(t, job(1, "wait", `{}`), job(2, "wait", `{}`), job(3, "wait", `{}`))
	w := testWorker(srv, WorkerConfig{Concurrency: 3, GracePeriod: 100 * time.Millisecond})
	started := make(chan *Job, 3)
	w.Handle("wait", func(ctx context.Context, job *Job) (any, error) {
		started <- job
		<-ctx.Done()
		if job.CancelRequested() {
			return nil, ctx.Err()
		}
		return "interrupted", nil
	})
	stop := start(t, w)
	for i := 0; i < 3; i++ {
		<-started
	}
	eventually(t, "a heartbeat renewed the three leases", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return len(f.beats) > 0 && len(f.beats[len(f.beats)-1]) == 3
	})
	f.mu.Lock()
	f.cancel[2] = true
	f.mu.Unlock()
	eventually(t, "job 2 ended", func() bool { _, ok := f.outcome(2); return ok })
	o, _ := f.outcome(2)
	if o.Error == nil || o.Error.Type != "Canceled" {
		t.Fatalf("%+v", o)
	}
	if _, ok := f.outcome(1); ok {
		t.Fatal("job 1 was not asked to stop")
	}
	_ = stop()
	if s := w.Stats(); s.Cancelled != 1 {
		t.Fatalf("%+v", s)
	}
}

func TestALostLeaseCancelsTheHandlerAndReportsNothing(t *testing.T) {
	f, srv := newFake(t, job(1, "wait", `{}`))
	w := testWorker(srv, WorkerConfig{})
	returned := make(chan struct{})
	w.Handle("wait", func(ctx context.Context, job *Job) (any, error) {
		f.mu.Lock()
		delete(f.held, job.Lease) // rescued meanwhile
		f.mu.Unlock()
		<-ctx.Done()
		close(returned)
		return "late", nil
	})
	stop := start(t, w)
	<-returned
	eventually(t, "the slot freed", func() bool { return w.Stats().Lost == 1 })
	_ = stop()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.calls) != 0 {
		t.Fatalf("an outcome was sent for a lost lease: %v", f.calls)
	}
}

func TestAtShutdownRunningJobsFinishWithinTheGracePeriodThenAreHandedBack(t *testing.T) {
	f, srv := newFake(t, job(1, "quick", `{}`), job(2, "stuck", `{}`))
	w := testWorker(srv, WorkerConfig{Concurrency: 2, GracePeriod: 300 * time.Millisecond})
	started := make(chan struct{}, 2)
	release := make(chan struct{})
	w.Handle("quick", func(ctx context.Context, job *Job) (any, error) {
		started <- struct{}{}
		<-release
		return "finished", nil
	})
	w.Handle("stuck", func(ctx context.Context, job *Job) (any, error) {
		started <- struct{}{}
		<-ctx.Done()
		return nil, ctx.Err()
	})
	stop := start(t, w)
	<-started
	<-started
	stopped := make(chan error)
	go func() { stopped <- stop() }()
	time.Sleep(50 * time.Millisecond) // the worker is draining: let job 1 finish
	close(release)
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	if o, _ := f.outcome(1); string(o.Result) != `"finished"` {
		t.Fatalf("job 1: %+v", o)
	}
	// Job 2, interrupted: handed back with its lease, no outcome reported.
	if o, ok := f.outcome(2); ok {
		t.Fatalf("job 2 was not to be failed: %+v", o)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if lease := f.released[2]; lease == "" || len(f.released) != 1 {
		t.Fatalf("released %v", f.released)
	}
	if len(f.claims) != 1 {
		// One claim took both jobs; the next, waiting for a free slot, never went.
		t.Fatalf("claims after the shutdown: %d", len(f.claims))
	}
	if s := w.Stats(); s.Released != 1 || s.Completed != 1 || s.Retried != 0 || s.Failed != 0 {
		t.Fatalf("%+v", s)
	}
}

func TestAJobHandedBackAtShutdownMayEndCancelledOrHaveLostItsLease(t *testing.T) {
	f, srv := newFake(t, job(1, "stuck", `{}`), job(2, "stuck", `{}`), job(3, "stuck", `{}`), job(4, "asked", `{}`))
	f.releaseAs[2] = "cancelled" // asked to stop after the last heartbeat
	f.releaseAs[3] = "lost"
	w := testWorker(srv, WorkerConfig{Concurrency: 4, GracePeriod: 100 * time.Millisecond})
	started := make(chan struct{}, 4)
	stuck := func(ctx context.Context, job *Job) (any, error) {
		started <- struct{}{}
		<-ctx.Done()
		return nil, ctx.Err()
	}
	w.Handle("stuck", stuck)
	// Asked to stop while it ran: failed, and so ended cancelled, never handed back.
	w.Handle("asked", func(ctx context.Context, job *Job) (any, error) {
		started <- struct{}{}
		<-ctx.Done()
		for !job.CancelRequested() {
			time.Sleep(5 * time.Millisecond)
		}
		return nil, ctx.Err()
	})
	stop := start(t, w)
	for i := 0; i < 4; i++ {
		<-started
	}
	f.mu.Lock()
	f.cancel[4] = true
	f.mu.Unlock()
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.released) != 2 || f.released[1] == "" || f.released[2] == "" {
		t.Fatalf("released %v", f.released)
	}
	if o, ok := f.ended[4]; !ok || o.Error == nil || o.Error.Type != "Canceled" || len(f.ended) != 1 {
		t.Fatalf("ended %+v", f.ended)
	}
	s := w.Stats()
	if s.Claimed != 4 || s.Released != 1 || s.Cancelled != 2 || s.Lost != 1 || s.Retried != 0 || s.Failed != 0 {
		t.Fatalf("%+v", s)
	}
}

func TestARefusedClaimStopsTheWorkerWithItsError(t *testing.T) {
	f, srv := newFake(t)
	f.claimError = 403
	w := testWorker(srv, WorkerConfig{})
	w.Handle("x", func(ctx context.Context, job *Job) (any, error) { return nil, nil })
	err := w.Run(context.Background())
	var refused *Error
	if !errors.Is(err, ErrForbidden) || !errors.As(err, &refused) || refused.Detail != "this token lacks the scope jobs:work" {
		t.Fatalf("%v", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.claims) != 1 {
		t.Fatalf("a 403 was retried: %d claims", len(f.claims))
	}
}

func TestAnOutcomeTheServerRefusesIsSentAloneAndBecomesAFailure(t *testing.T) {
	f, srv := newFake(t, job(1, "x", `{"ok": true}`), job(2, "x", `{"ok": false}`))
	f.refuse = func(outcomes []Outcome) (int, string) {
		for i, o := range outcomes {
			if string(o.Result) == `"bad"` {
				return 422, fmt.Sprintf(`{"detail": [{"field": "outcomes.%d.result", "msg": "not storable", "type": "x"}]}`, i)
			}
		}
		return 0, ""
	}
	w := testWorker(srv, WorkerConfig{Concurrency: 2, BatchWindow: 100 * time.Millisecond})
	w.Handle("x", func(ctx context.Context, job *Job) (any, error) {
		var p struct{ OK bool }
		_ = job.Decode(&p)
		if p.OK {
			return "good", nil
		}
		return "bad", nil
	})
	start(t, w)
	eventually(t, "both ended", func() bool {
		_, one := f.outcome(1)
		_, two := f.outcome(2)
		return one && two
	})
	if o, _ := f.outcome(1); string(o.Result) != `"good"` {
		t.Fatalf("%+v", o)
	}
	o, _ := f.outcome(2)
	if o.Error == nil || o.Error.Type != "InvalidResult" || !strings.Contains(o.Error.Message, "not storable") {
		t.Fatalf("%+v", o)
	}
}

func TestAResultJSONCannotEncodeFailsTheAttempt(t *testing.T) {
	f, srv := newFake(t, job(1, "x", `{}`), job(2, "nul", `{}`))
	w := testWorker(srv, WorkerConfig{})
	w.Handle("x", func(ctx context.Context, job *Job) (any, error) { return func() {}, nil })
	w.Handle("nul", func(ctx context.Context, job *Job) (any, error) { return "a\x00b", nil })
	start(t, w)
	eventually(t, "both ended", func() bool {
		_, one := f.outcome(1)
		_, two := f.outcome(2)
		return one && two
	})
	for _, id := range []int64{1, 2} {
		if o, _ := f.outcome(id); o.Error == nil || o.Error.Type != "InvalidResult" {
			t.Fatalf("job %d: %+v", id, o)
		}
	}
}

func TestAWorkerNeedsAHandlerAndAValidName(t *testing.T) {
	_, srv := newFake(t)
	if err := testWorker(srv, WorkerConfig{}).Run(context.Background()); err == nil {
		t.Fatal("no handler")
	}
	w := testWorker(srv, WorkerConfig{Name: "not a name"})
	w.Handle("x", func(ctx context.Context, job *Job) (any, error) { return nil, nil })
	if err := w.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "not a name") {
		t.Fatalf("%v", err)
	}
	w = testWorker(srv, WorkerConfig{Types: []string{"y"}})
	w.Handle("x", func(ctx context.Context, job *Job) (any, error) { return nil, nil })
	if err := w.Run(context.Background()); err == nil || !strings.Contains(err.Error(), `"y"`) {
		t.Fatalf("%v", err)
	}
	if !workerName.MatchString(defaultName()) {
		t.Fatalf("default name %q", defaultName())
	}
}
