// Command worker is a jobqueue worker in Go with stand-in handlers: a way to try
// the client against a server, and the worker the acceptance tests run.
//
//	go build -o jobqueue-go-worker ./cmd/worker
//	JOBQUEUE_TOKEN=... ./jobqueue-go-worker -url http://127.0.0.1:5001 \
//	    -queue images -type resize -concurrency 50
//
// Each handler, by -mode:
//
//	echo   returns {"worker": <name>, "id": <job id>, "attempt": <attempt>} at once
//	noop   returns nil at once: no result (the drain figure of bench/http_workers.py)
//	block  prints "running job=<id> attempt=<n> lease=<lease>", then waits until its
//	       ctx is cancelled (a cancel request, a lost lease, the shutdown's grace
//	       period) and returns ctx.Err()
//	sleep  sleeps the payload's "ms" milliseconds (ctx permitting), then as echo
//	stamp  prints "started <job id> <unix time in ns>" as it starts, then as echo
//	       (the pickup figure of bench/http_workers.py)
//
// With -ledger FILE, each handler run appends "<job id> <attempt> <name>" to FILE.
// SIGINT or SIGTERM stops it: no more claims, running jobs get -grace to finish,
// then are handed back (pending again at once, their attempt not counted).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"jobqueue"
)

func main() {
	var (
		url         = flag.String("url", envOr("JOBQUEUE_URL", "http://127.0.0.1:5001"), "the API's address (JOBQUEUE_URL)")
		name        = flag.String("name", "", "the worker's name (default <host>-<pid>)")
		queues      = flag.String("queue", "default", "queues to claim from, comma-separated")
		types       = flag.String("type", "echo", "job types to run, comma-separated")
		mode        = flag.String("mode", "echo", "what the handlers do: echo, noop, block, sleep or stamp")
		concurrency = flag.Int("concurrency", 10, "jobs run at once")
		lease       = flag.Float64("lease", 30, "lease seconds")
		wait        = flag.Float64("wait", 20, "a claim's long poll, in seconds")
		grace       = flag.Duration("grace", 30*time.Second, "how long running jobs may finish at shutdown")
		ledgerPath  = flag.String("ledger", "", "append each handler run to this file")
	)
	flag.Parse()
	token := os.Getenv("JOBQUEUE_TOKEN")
	logger := log.New(os.Stdout, "", log.LstdFlags|log.Lmicroseconds)

	var ledger *os.File
	var ledgerMu sync.Mutex
	if *ledgerPath != "" {
		f, err := os.OpenFile(*ledgerPath, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			logger.Fatal(err)
		}
		defer f.Close()
		ledger = f
	}

	w := jobqueue.NewWorker(jobqueue.WorkerConfig{
		URL: *url, Token: token, Name: *name, Queues: split(*queues),
		Concurrency: *concurrency, LeaseSeconds: *lease, WaitSeconds: *wait,
		GracePeriod: *grace, Logger: logger,
	})
	handler := func(ctx context.Context, job *jobqueue.Job) (any, error) {
		if ledger != nil {
			ledgerMu.Lock()
			_, err := fmt.Fprintf(ledger, "%d %d %s\n", job.ID, job.Attempt, w.Name())
			ledgerMu.Unlock()
			if err != nil {
				return nil, err
			}
		}
		switch *mode {
		case "noop":
			return nil, nil
		case "stamp":
			fmt.Printf("started %d %d\n", job.ID, time.Now().UnixNano())
		case "block":
			logger.Printf("running job=%d attempt=%d lease=%s", job.ID, job.Attempt, job.Lease)
			<-ctx.Done()
			return nil, ctx.Err()
		case "sleep":
			var p struct {
				Ms float64 `json:"ms"`
			}
			if err := job.Decode(&p); err != nil {
				return nil, jobqueue.Discard(err)
			}
			t := time.NewTimer(time.Duration(p.Ms * float64(time.Millisecond)))
			defer t.Stop()
			select {
			case <-t.C:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return map[string]any{"worker": w.Name(), "id": job.ID, "attempt": job.Attempt}, nil
	}
	for _, t := range split(*types) {
		w.Handle(t, handler)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	started := time.Now()
	err := w.Run(ctx)
	s := w.Stats()
	summary, _ := json.Marshal(map[string]any{
		"claimed": s.Claimed, "completed": s.Completed, "retried": s.Retried, "failed": s.Failed,
		"cancelled": s.Cancelled, "lost": s.Lost, "released": s.Released,
		"seconds": time.Since(started).Seconds(),
	})
	logger.Printf("stats %s", summary)
	if err != nil {
		logger.Printf("error: %v", err)
		os.Exit(1)
	}
}

func envOr(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}

func split(list string) []string {
	var out []string
	for _, s := range strings.Split(list, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}
