// Package jobqueue is a Go client of jobqueue's HTTP API: enqueue jobs and wait
// for them (Client), and run them in Go (Worker) over the HTTP worker protocol,
// with the guarantees of a Python worker: leases renewed by heartbeats, every
// write fenced by its lease, a dead worker's jobs rescued and run again.
//
// It uses the standard library only.
//
//	client := jobqueue.NewClient("http://127.0.0.1:5001", token)
//	job, err := client.Enqueue(ctx, "resize", map[string]any{"path": "a.png"},
//		&jobqueue.EnqueueOptions{Queue: "images"})
//	done, err := client.Wait(ctx, job.ID)
//
//	w := jobqueue.NewWorker(jobqueue.WorkerConfig{URL: url, Token: token,
//		Queues: []string{"images"}, Concurrency: 20})
//	w.Handle("resize", func(ctx context.Context, job *jobqueue.Job) (any, error) {
//		var p struct{ Path string }
//		if err := job.Decode(&p); err != nil {
//			return nil, jobqueue.Discard(err)
//		}
//		return map[string]any{"width": 100}, nil
//	})
//	err = w.Run(ctx) // until ctx is cancelled, then drains
//
// Every refusal of the server is an *Error carrying its status and message;
// errors.Is tells them apart: ErrUnauthorized (401), ErrForbidden (403),
// ErrNotFound (404), ErrLeaseLost (409), ErrInvalid (422), ErrUnavailable (503).
package jobqueue
