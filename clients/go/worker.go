package jobqueue

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"math"
	"net/http"
	"os"
	"regexp"
	"runtime/debug"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// HandlerFunc runs one job. What it returns completes the job (its result: any
// value JSON encodes, nil for null); an error fails the attempt, which is retried
// while attempts are left (Discard and RetryIn say otherwise). ctx is cancelled
// when the job is asked to stop (a cancel request, seen at a heartbeat), when its
// lease is lost, and when the worker stops and the grace period has passed (an
// error then hands the job back, Release: its attempt not counted).
type HandlerFunc func(ctx context.Context, job *Job) (any, error)

// WorkerConfig configures a Worker. Zero fields take their defaults.
type WorkerConfig struct {
	URL   string // the API's address, e.g. "http://127.0.0.1:5001"
	Token string // a token with the scope jobs:work
	// Client, if given, is used instead of a new one of URL and Token.
	Client *Client
	// Name is the worker's name (GET /workers shows http:<token name>:<name>): 1 to
	// 100 of A-Z a-z 0-9 . _ : @ -. Default: <host>-<pid>.
	Name string
	// Queues to claim from, in this order. Default: ["default"].
	Queues []string
	// Types: only jobs of these types are claimed. Default: the types with a handler.
	Types []string
	// Concurrency: jobs run at once. Default 10.
	Concurrency int
	// LeaseSeconds: how long each job is held without a heartbeat (1 to 3600);
	// leases are renewed every third of it. Default 30.
	LeaseSeconds float64
	// WaitSeconds: how long a claim waits for a job when none is due (0 to 60).
	// Default 20.
	WaitSeconds float64
	// GracePeriod: at shutdown, how long running handlers may take to finish before
	// their ctx is cancelled. Default 30 s.
	GracePeriod time.Duration
	// BatchWindow: how long outcomes are gathered before they are sent together
	// (POST /outcomes), and how long a busy worker gathers freed slots before it
	// claims for them (at most; at once when half its slots are free). Default 1 ms:
	// a no-op drain ran 1.3 times faster than at 5 ms, for no more of the server's
	// CPU per job, and with 10 ms handlers at the same rate and within a few percent
	// of the CPU. A longer window sends fewer, larger requests, each outcome later.
	BatchWindow time.Duration
	// Logger receives the worker's few lines (start, stop, failures to reach the
	// server, lost leases). Default: log.Default(); log.New(io.Discard, "", 0)
	// silences it.
	Logger *log.Logger
}

// Worker runs jobs of the types it has handlers for, claimed over HTTP.
type Worker struct {
	cfg      WorkerConfig
	client   *Client
	handlers map[string]HandlerFunc
	log      *log.Logger
	once     int32

	mu      sync.Mutex
	running map[string]*running // by lease: claimed, outcome not yet answered
	free    int                 // slots free for claims
	pending []pendingOutcome    // outcomes not yet sent

	freed      chan struct{} // a slot was freed
	outcomesIn chan struct{} // an outcome is pending
	active     sync.WaitGroup

	stats Stats
}

// Stats counts what a worker did.
type Stats struct {
	Claimed   int64 // jobs claimed
	Completed int64 // completions applied
	Retried   int64 // failed attempts, the job retried
	Snoozed   int64 // snoozes applied: the job due again later, the attempt not counted
	Failed    int64 // failed attempts, the job failed for good
	Cancelled int64 // jobs ended cancelled (asked to stop)
	Lost      int64 // leases lost: the job was rescued, ended, or deleted meanwhile
	Released  int64 // jobs interrupted by the shutdown, handed back: pending again, attempt not counted
}

// running is a job a worker holds.
type running struct {
	job             *Job
	ctx             context.Context
	cancel          context.CancelFunc
	cancelRequested int32
	lost            int32
	shutdown        int32
	finished        int32 // the handler returned
	slotFreed       bool  // its slot is free for another claim (under Worker.mu)
}

func (r *running) requestCancel() {
	atomic.StoreInt32(&r.cancelRequested, 1)
	r.cancel()
}

func (r *running) markLost() {
	atomic.StoreInt32(&r.lost, 1)
	r.cancel()
}

// pendingOutcome is an outcome to report or, with release, a job to hand back.
type pendingOutcome struct {
	run     *running
	outcome Outcome
	release bool // interrupted by the shutdown: handed back (POST /jobs/{id}/release)
}

// NewWorker returns a worker; give it handlers (Handle), then Run it.
func NewWorker(cfg WorkerConfig) *Worker {
	client := cfg.Client
	if client == nil {
		client = NewClient(cfg.URL, cfg.Token)
	}
	if cfg.Name == "" {
		cfg.Name = defaultName()
	}
	logger := cfg.Logger
	if logger == nil {
		logger = log.Default()
	}
	return &Worker{
		cfg:        cfg,
		client:     client,
		handlers:   map[string]HandlerFunc{},
		log:        logger,
		running:    map[string]*running{},
		freed:      make(chan struct{}, 1),
		outcomesIn: make(chan struct{}, 1),
	}
}

// Handle registers the handler of jobs of type jobType. Call it before Run.
func (w *Worker) Handle(jobType string, handler HandlerFunc) {
	w.handlers[jobType] = handler
}

// Stats returns the worker's counts so far.
func (w *Worker) Stats() Stats {
	return Stats{
		Claimed:   atomic.LoadInt64(&w.stats.Claimed),
		Completed: atomic.LoadInt64(&w.stats.Completed),
		Retried:   atomic.LoadInt64(&w.stats.Retried),
		Snoozed:   atomic.LoadInt64(&w.stats.Snoozed),
		Failed:    atomic.LoadInt64(&w.stats.Failed),
		Cancelled: atomic.LoadInt64(&w.stats.Cancelled),
		Lost:      atomic.LoadInt64(&w.stats.Lost),
		Released:  atomic.LoadInt64(&w.stats.Released),
	}
}

// Name is the worker's name, as its claims give it.
func (w *Worker) Name() string { return w.cfg.Name }

var workerName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:@-]{0,99}$`)
var unnamed = regexp.MustCompile(`[^A-Za-z0-9._:@-]`)

func defaultName() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "go"
	}
	name := unnamed.ReplaceAllString(host, "-")
	if len(name) > 80 {
		name = name[:80]
	}
	name = fmt.Sprintf("%s-%d", name, os.Getpid())
	if !workerName.MatchString(name) {
		name = fmt.Sprintf("go-%d", os.Getpid())
	}
	return name
}

// configure fills the defaults in and checks the configuration.
func (w *Worker) configure() error {
	c := &w.cfg
	if len(w.handlers) == 0 {
		return errors.New("jobqueue: a worker needs a handler (Handle) before Run")
	}
	if !workerName.MatchString(c.Name) {
		return fmt.Errorf("jobqueue: worker name %q: 1 to 100 of A-Z a-z 0-9 . _ : @ -, starting with a letter or digit", c.Name)
	}
	if len(c.Queues) == 0 {
		c.Queues = []string{"default"}
	}
	if len(c.Types) == 0 {
		for t := range w.handlers {
			c.Types = append(c.Types, t)
		}
		sort.Strings(c.Types)
	}
	for _, t := range c.Types {
		if w.handlers[t] == nil {
			return fmt.Errorf("jobqueue: type %q has no handler", t)
		}
	}
	if c.Concurrency <= 0 {
		c.Concurrency = 10
	}
	if c.LeaseSeconds == 0 {
		c.LeaseSeconds = 30
	}
	if c.LeaseSeconds < 1 || c.LeaseSeconds > 3600 || math.IsNaN(c.LeaseSeconds) {
		return fmt.Errorf("jobqueue: LeaseSeconds %g: 1 to 3600", c.LeaseSeconds)
	}
	if c.WaitSeconds == 0 {
		c.WaitSeconds = 20
	}
	if c.WaitSeconds < 0 || c.WaitSeconds > 60 || math.IsNaN(c.WaitSeconds) {
		return fmt.Errorf("jobqueue: WaitSeconds %g: 0 to 60", c.WaitSeconds)
	}
	if c.GracePeriod <= 0 {
		c.GracePeriod = 30 * time.Second
	}
	if c.BatchWindow <= 0 {
		c.BatchWindow = time.Millisecond
	}
	w.free = c.Concurrency
	return nil
}

// heartbeatEvery is how often leases are renewed: a third of the lease.
func (w *Worker) heartbeatEvery() time.Duration {
	return time.Duration(w.cfg.LeaseSeconds / 3 * float64(time.Second))
}

// Run claims and runs jobs until ctx is cancelled, then drains: it stops claiming,
// lets running handlers finish within the grace period, then cancels their ctx and
// hands their jobs back (Release: pending again at once, their attempt not counted),
// reports every outcome, and returns. It returns an error if the worker cannot run:
// a bad configuration, or a claim the server refuses (401, 403, 422); a server that
// cannot be reached is retried.
func (w *Worker) Run(ctx context.Context) error {
	if !atomic.CompareAndSwapInt32(&w.once, 0, 1) {
		return errors.New("jobqueue: a worker runs once")
	}
	if err := w.configure(); err != nil {
		return err
	}
	// The protocol's own calls (heartbeats, outcomes) outlive ctx: they go on while
	// the worker drains.
	protocol, stopProtocol := context.WithCancel(context.Background())
	defer stopProtocol()
	jobs, stopJobs := context.WithCancel(context.Background())
	defer stopJobs()

	beating := make(chan struct{})
	stopBeating := make(chan struct{})
	go func() { defer close(beating); w.heartbeats(protocol, stopBeating) }()
	sending := make(chan struct{})
	flush := make(chan struct{})
	go func() { defer close(sending); w.sendOutcomes(protocol, flush) }()

	w.log.Printf("jobqueue: worker %s started: queues %v, types %v, concurrency %d",
		w.cfg.Name, w.cfg.Queues, w.cfg.Types, w.cfg.Concurrency)
	err := w.claimLoop(ctx, jobs)

	// Drain: no more claims; running handlers get the grace period.
	handlersDone := make(chan struct{})
	go func() { w.active.Wait(); close(handlersDone) }()
	if n := w.holding(); n > 0 {
		w.log.Printf("jobqueue: worker %s stopping: waiting up to %s for %d running job(s)",
			w.cfg.Name, w.cfg.GracePeriod, n)
	}
	grace := time.NewTimer(w.cfg.GracePeriod)
	select {
	case <-handlersDone:
		grace.Stop()
	case <-grace.C:
		w.interrupt()
		stuck := time.NewTimer(10 * time.Second)
		select {
		case <-handlersDone:
			stuck.Stop()
		case <-stuck.C:
			w.log.Printf("jobqueue: worker %s: handlers still running 10s after their ctx was cancelled; "+
				"their leases will run out", w.cfg.Name)
		}
	}
	close(flush)
	flushed := time.NewTimer(30 * time.Second)
	select {
	case <-sending:
		flushed.Stop()
	case <-flushed.C:
		w.log.Printf("jobqueue: worker %s: outcomes not reported within 30s; their leases will run out", w.cfg.Name)
		stopProtocol()
		<-sending
	}
	close(stopBeating)
	<-beating
	s := w.Stats()
	w.log.Printf("jobqueue: worker %s stopped: claimed %d, completed %d, retried %d, snoozed %d, failed %d, cancelled %d, lost %d, released %d",
		w.cfg.Name, s.Claimed, s.Completed, s.Retried, s.Snoozed, s.Failed, s.Cancelled, s.Lost, s.Released)
	return err
}

// claimLoop claims jobs for the free slots until ctx is done, or the server refuses
// the claims for good (its error).
func (w *Worker) claimLoop(ctx context.Context, jobs context.Context) error {
	failures := 0
	for ctx.Err() == nil {
		free := w.freeSlots()
		if free <= 0 {
			select {
			case <-w.freed:
			case <-ctx.Done():
			}
			continue
		}
		free = w.gatherSlots(ctx, free)
		if free > 100 {
			free = 100
		}
		claimed, err := w.client.Claim(ctx, ClaimRequest{
			Worker: w.cfg.Name, Queues: w.cfg.Queues, Types: w.cfg.Types, Max: free,
			WaitSeconds: w.cfg.WaitSeconds, LeaseSeconds: w.cfg.LeaseSeconds,
		})
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			var refused *Error
			if errors.As(err, &refused) && refused.Status != http.StatusServiceUnavailable &&
				refused.Status < 500 {
				w.log.Printf("jobqueue: worker %s: claims refused: %v", w.cfg.Name, err)
				return err
			}
			failures++
			delay := backoff(RetryPolicy{MinDelay: 200 * time.Millisecond, MaxDelay: 10 * time.Second}, failures)
			w.log.Printf("jobqueue: worker %s: claim failed (retrying in %s): %v", w.cfg.Name, delay.Round(time.Millisecond), err)
			_ = sleep(ctx, delay)
			continue
		}
		failures = 0
		for _, job := range claimed {
			w.start(jobs, job)
		}
	}
	return nil
}

// gatherSlots waits, while fewer than half the slots are free, for more of them to
// free up, up to BatchWindow: a claim for every slot as it frees
// would claim one job at a time, and each claim costs the server a statement whatever
// it claims. An idle worker claims at once. Returns the slots free now.
func (w *Worker) gatherSlots(ctx context.Context, free int) int {
	if 2*free >= w.cfg.Concurrency {
		return free
	}
	timer := time.NewTimer(w.cfg.BatchWindow)
	defer timer.Stop()
	for {
		select {
		case <-w.freed:
		case <-timer.C:
			return w.freeSlots()
		case <-ctx.Done():
			return w.freeSlots()
		}
		if free = w.freeSlots(); 2*free >= w.cfg.Concurrency {
			return free
		}
	}
}

// freeSlots is how many jobs a claim may take now.
func (w *Worker) freeSlots() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	free := w.free
	// Jobs whose outcome is not answered yet hold no slot, but are held: at most
	// Concurrency of them, so that an unreachable server stops the claims.
	if room := 2*w.cfg.Concurrency - len(w.running); free > room {
		free = room
	}
	return free
}

// start runs a claimed job's handler in a goroutine of its own.
func (w *Worker) start(jobs context.Context, job *Job) {
	ctx, cancel := context.WithCancel(jobs)
	r := &running{job: job, ctx: ctx, cancel: cancel}
	job.run = r
	job.client = w.client
	job.leaseSeconds = w.cfg.LeaseSeconds
	atomic.AddInt64(&w.stats.Claimed, 1)
	w.mu.Lock()
	w.running[job.Lease] = r
	w.free--
	w.mu.Unlock()
	w.active.Add(1)
	go w.execute(r)
}

// holding is how many jobs the worker holds.
func (w *Worker) holding() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.running)
}

// interrupt cancels the ctx of every handler still running: the grace period is over.
func (w *Worker) interrupt() {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, r := range w.running {
		if atomic.LoadInt32(&r.finished) == 0 {
			atomic.StoreInt32(&r.shutdown, 1)
			r.cancel()
			n++
		}
	}
	if n > 0 {
		w.log.Printf("jobqueue: worker %s: grace period over: cancelling %d job(s), to be handed back", w.cfg.Name, n)
	}
}

// execute runs the handler and queues the job's outcome, or its release.
func (w *Worker) execute(r *running) {
	defer w.active.Done()
	result, err := w.call(r)
	atomic.StoreInt32(&r.finished, 1)
	defer r.cancel()
	if atomic.LoadInt32(&r.lost) == 1 {
		// Its lease lost the job: any write about it would be refused.
		atomic.AddInt64(&w.stats.Lost, 1)
		w.freeSlot(r)
		return
	}
	outcome := Outcome{Lease: r.job.Lease}
	if err == nil {
		raw, encodeErr := json.Marshal(result)
		switch {
		case encodeErr != nil:
			err = &resultError{fmt.Sprintf("the result cannot be encoded as JSON: %v", encodeErr)}
		case bytes.Contains(raw, []byte(`\u0000`)):
			err = &resultError{"the result holds a NUL character, which PostgreSQL cannot store"}
		default:
			outcome.Result = raw
		}
	}
	var snoozed *snoozeError
	switch {
	case err != nil && errors.As(err, &snoozed):
		s := snoozed.delay.Seconds()
		outcome.SnoozeSeconds = &s
	case err != nil:
		if atomic.LoadInt32(&r.shutdown) == 1 && atomic.LoadInt32(&r.cancelRequested) == 0 {
			// Interrupted by the shutdown, not at fault: hand it back, pending again at
			// once for another worker, this attempt not counted.
			w.queue(pendingOutcome{run: r, release: true})
			return
		}
		jobErr, opts := failure(err)
		outcome.Error = &jobErr
		outcome.Discard = opts.Discard
		if opts.RetryIn != nil {
			s := opts.RetryIn.Seconds()
			outcome.RetryInSeconds = &s
		}
	}
	w.queue(pendingOutcome{run: r, outcome: outcome})
	// The handler is done: its slot takes another job while its outcome is sent.
	w.releaseSlot(r)
}

// releaseSlot frees the job's slot, once: its handler is done, or its job is no
// longer held.
func (w *Worker) releaseSlot(r *running) {
	w.mu.Lock()
	if !r.slotFreed {
		r.slotFreed = true
		w.free++
	}
	w.mu.Unlock()
	select {
	case w.freed <- struct{}{}:
	default:
	}
}

// queue adds an outcome (or a release) to those sendOutcomes sends.
func (w *Worker) queue(p pendingOutcome) {
	w.mu.Lock()
	w.pending = append(w.pending, p)
	w.mu.Unlock()
	select {
	case w.outcomesIn <- struct{}{}:
	default:
	}
}

// resultError: a handler returned a result the server cannot store.
type resultError struct{ msg string }

func (e *resultError) Error() string     { return e.msg }
func (e *resultError) ErrorType() string { return "InvalidResult" }

// call runs the job's handler, a panic becoming a *PanicError.
func (w *Worker) call(r *running) (result any, err error) {
	handler := w.handlers[r.job.Type]
	if handler == nil {
		return nil, Discard(&resultError{fmt.Sprintf("no handler for type %q", r.job.Type)})
	}
	defer func() {
		if p := recover(); p != nil {
			result, err = nil, &PanicError{Value: p, Stack: string(debug.Stack())}
		}
	}()
	return handler(r.ctx, r.job)
}

// freeSlot lets the job go: its outcome was answered, or it will never be sent.
func (w *Worker) freeSlot(r *running) {
	w.mu.Lock()
	if w.running[r.job.Lease] == r {
		delete(w.running, r.job.Lease)
	}
	w.mu.Unlock()
	w.releaseSlot(r)
}

// sendOutcomes reports the pending outcomes, gathered for the batch window, and hands
// back the jobs to release, until flush is closed and none is left.
func (w *Worker) sendOutcomes(ctx context.Context, flush chan struct{}) {
	for {
		select {
		case <-w.outcomesIn:
		case <-flush:
		}
		_ = sleep(ctx, w.cfg.BatchWindow)
		w.mu.Lock()
		batch := w.pending
		if len(batch) > MaxBatch {
			batch, w.pending = batch[:MaxBatch:MaxBatch], append([]pendingOutcome(nil), batch[MaxBatch:]...)
		} else {
			w.pending = nil
		}
		left := len(w.pending)
		w.mu.Unlock()
		if len(batch) == 0 {
			select {
			case <-flush:
				return
			default:
				continue
			}
		}
		var outcomes, releases []pendingOutcome
		for _, p := range batch {
			if p.release {
				releases = append(releases, p)
			} else {
				outcomes = append(outcomes, p)
			}
		}
		if len(outcomes) > 0 {
			w.send(ctx, outcomes)
		}
		if len(releases) > 0 {
			w.handBack(ctx, releases)
		}
		if left > 0 {
			select {
			case w.outcomesIn <- struct{}{}:
			default:
			}
		}
	}
}

// send reports a batch of outcomes: retried while the server cannot be reached (the
// heartbeats keep their leases meanwhile). A batch refused as invalid or too large
// is sent again in halves, down to the outcome at fault, whose result becomes a
// failure saying why.
func (w *Worker) send(ctx context.Context, batch []pendingOutcome) {
	outcomes := make([]Outcome, len(batch))
	for i, p := range batch {
		outcomes[i] = p.outcome
	}
	for failures := 1; ; failures++ {
		answers, err := w.client.Outcomes(ctx, outcomes)
		if err == nil {
			for i, a := range answers {
				w.applied(batch[i].run, batch[i].outcome, a)
			}
			return
		}
		var refused *Error
		if errors.As(err, &refused) && refused.Status < 500 {
			invalid := refused.Status == http.StatusUnprocessableEntity ||
				refused.Status == http.StatusRequestEntityTooLarge
			switch {
			case invalid && len(batch) > 1:
				// One outcome refuses the whole batch: find it, halving.
				half := len(batch) / 2
				w.send(ctx, batch[:half])
				w.send(ctx, batch[half:])
				return
			case invalid && batch[0].outcome.Error == nil:
				batch[0].outcome.Result = nil
				batch[0].outcome.Error = &JobError{
					Type: "InvalidResult", Message: storable("the server refused the result: "+refused.Detail, maxErrorMessage),
				}
				outcomes[0] = batch[0].outcome
				continue
			}
			w.log.Printf("jobqueue: worker %s: outcomes refused, their jobs left to their leases: %v", w.cfg.Name, err)
			for _, p := range batch {
				atomic.AddInt64(&w.stats.Lost, 1)
				w.freeSlot(p.run)
			}
			return
		}
		if ctx.Err() != nil {
			return
		}
		delay := backoff(RetryPolicy{MinDelay: 200 * time.Millisecond, MaxDelay: 5 * time.Second}, failures)
		w.log.Printf("jobqueue: worker %s: outcomes not reported (retrying in %s): %v", w.cfg.Name, delay.Round(time.Millisecond), err)
		if sleep(ctx, delay) != nil {
			return
		}
	}
}

// handBack releases the jobs interrupted by the shutdown (POST /jobs/{id}/release,
// one call each, a few at once).
func (w *Worker) handBack(ctx context.Context, batch []pendingOutcome) {
	at := make(chan struct{}, 16)
	var wg sync.WaitGroup
	for _, p := range batch {
		at <- struct{}{}
		wg.Add(1)
		go func(r *running) {
			defer wg.Done()
			w.releaseJob(ctx, r)
			<-at
		}(p.run)
	}
	wg.Wait()
}

// releaseJob hands one job back: retried while the server cannot be reached (the
// heartbeats keep its lease meanwhile); refused, the job is left to its lease.
func (w *Worker) releaseJob(ctx context.Context, r *running) {
	for failures := 1; ; failures++ {
		applied, err := w.client.Release(ctx, r.job.ID, r.job.Lease)
		if err == nil {
			if applied.Status == Cancelled {
				atomic.AddInt64(&w.stats.Cancelled, 1)
			} else {
				atomic.AddInt64(&w.stats.Released, 1)
			}
			w.freeSlot(r)
			return
		}
		var refused *Error
		if errors.As(err, &refused) && refused.Status < 500 {
			atomic.AddInt64(&w.stats.Lost, 1)
			if errors.Is(err, ErrLeaseLost) {
				w.log.Printf("jobqueue: worker %s: job %d: lease lost, not handed back: %s", w.cfg.Name, r.job.ID, refused.Detail)
			} else {
				w.log.Printf("jobqueue: worker %s: job %d: release refused, the job left to its lease: %v", w.cfg.Name, r.job.ID, err)
			}
			w.freeSlot(r)
			return
		}
		if ctx.Err() != nil {
			return
		}
		delay := backoff(RetryPolicy{MinDelay: 200 * time.Millisecond, MaxDelay: 5 * time.Second}, failures)
		w.log.Printf("jobqueue: worker %s: job %d: not handed back (retrying in %s): %v",
			w.cfg.Name, r.job.ID, delay.Round(time.Millisecond), err)
		if sleep(ctx, delay) != nil {
			return
		}
	}
}

// applied counts an outcome's answer and frees its slot.
func (w *Worker) applied(r *running, sent Outcome, a Applied) {
	switch {
	case !a.OK:
		atomic.AddInt64(&w.stats.Lost, 1)
		w.log.Printf("jobqueue: worker %s: job %d: outcome refused: %s", w.cfg.Name, r.job.ID, a.Detail)
	case a.Status == Pending && sent.SnoozeSeconds != nil:
		atomic.AddInt64(&w.stats.Snoozed, 1)
	case a.Status == Completed:
		atomic.AddInt64(&w.stats.Completed, 1)
	case a.Status == Pending:
		atomic.AddInt64(&w.stats.Retried, 1)
	case a.Status == Failed:
		atomic.AddInt64(&w.stats.Failed, 1)
	case a.Status == Cancelled:
		atomic.AddInt64(&w.stats.Cancelled, 1)
	}
	w.freeSlot(r)
}

// heartbeats renews the leases of every job held, every third of the lease, until
// stop is closed; it cancels the ctx of a job asked to stop, or whose lease was lost.
func (w *Worker) heartbeats(ctx context.Context, stop chan struct{}) {
	every := w.heartbeatEvery()
	ticker := time.NewTicker(every)
	defer ticker.Stop()
	for {
		select {
		case <-stop:
			return
		case <-ticker.C:
		}
		w.mu.Lock()
		held := make([]*running, 0, len(w.running))
		for _, r := range w.running {
			if atomic.LoadInt32(&r.lost) == 0 {
				held = append(held, r)
			}
		}
		w.mu.Unlock()
		for start := 0; start < len(held); start += MaxBatch {
			end := start + MaxBatch
			if end > len(held) {
				end = len(held)
			}
			w.beat(ctx, held[start:end], every)
		}
	}
}

func (w *Worker) beat(ctx context.Context, held []*running, every time.Duration) {
	leases := make([]string, len(held))
	for i, r := range held {
		leases[i] = r.job.Lease
	}
	// Answered within the interval, or tried again at the next tick.
	ctx, cancel := context.WithTimeout(ctx, every)
	defer cancel()
	renewals, err := w.client.Heartbeats(ctx, leases, w.cfg.LeaseSeconds)
	if err != nil {
		w.log.Printf("jobqueue: worker %s: heartbeat failed: %v", w.cfg.Name, err)
		return
	}
	for i, renewal := range renewals {
		r := held[i]
		switch {
		case !renewal.OK:
			if atomic.LoadInt32(&r.finished) == 0 {
				w.log.Printf("jobqueue: worker %s: job %d: lease lost, its handler cancelled: %s",
					w.cfg.Name, r.job.ID, renewal.Detail)
			}
			r.markLost()
		case renewal.CancelRequested:
			r.requestCancel()
		}
	}
}

// Progress reports the job's progress: fraction from 0 to 1 (below 0: none) and a
// message (may be empty), shown with the job. It also renews the job's lease; a
// job asked to stop has its ctx cancelled, as at a heartbeat. A lease that lost its
// job is ErrLeaseLost, and the handler's ctx is cancelled.
func (j *Job) Progress(ctx context.Context, fraction float64, message string) error {
	if j.client == nil || j.Lease == "" {
		return errors.New("jobqueue: Progress is for a claimed job")
	}
	update := &ProgressUpdate{Message: storable(message, 1000)}
	if fraction >= 0 {
		if fraction > 1 {
			fraction = 1
		}
		update.Fraction = &fraction
	}
	renewal, err := j.client.Heartbeat(ctx, j.ID, j.Lease, j.leaseSeconds, update)
	if err != nil {
		if errors.Is(err, ErrLeaseLost) && j.run != nil {
			j.run.markLost()
		}
		return err
	}
	if renewal.CancelRequested && j.run != nil {
		j.run.requestCancel()
	}
	return nil
}

// CancelRequested reports whether the job was asked to stop while it ran.
func (j *Job) CancelRequested() bool {
	return j.run != nil && atomic.LoadInt32(&j.run.cancelRequested) == 1
}
