//! The queueing worker pool (`workers`): at most N requests are served at once; the others wait
//! for a free worker in arrival order (tokio's `Semaphore` is fair: its waiters are a FIFO
//! queue, and a released permit goes to the first of them, never to a newcomer). Waiting is not
//! refused (that is `pool`, with 503): a request waits until a worker is free, its client goes
//! away, or its deadline (`timeout_s`) passes.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::time::Instant;

use tokio::sync::{Semaphore, SemaphorePermit};

use crate::timer::Timer;

/// The pool and its gauges.
pub struct Workers {
    /// None: no limit (every admitted request is served at once).
    sem: Option<Semaphore>,
    /// Requests being served now.
    pub serving: AtomicUsize,
    /// Requests waiting for a worker now.
    pub queued: AtomicUsize,
    /// The most that waited at once since the start or the last reset.
    pub max_queued: AtomicUsize,
    /// Requests that had to wait (since the start or the last reset).
    pub queued_total: AtomicU64,
    /// Requests whose deadline passed while they waited (each also counted `timed_out`).
    pub queue_timeouts: AtomicU64,
}

/// A worker held by one request; dropping it frees the worker for the first in the queue.
pub struct Worker<'a> {
    workers: &'a Workers,
    _permit: Option<SemaphorePermit<'a>>,
    /// The requests being served when this one started, counting it (the USL's n).
    pub n: usize,
}

impl Drop for Worker<'_> {
    fn drop(&mut self) {
        self.workers.serving.fetch_sub(1, Relaxed);
    }
}

/// Counts a request out of the queue however its wait ends (served, deadline, client gone).
struct Waiting<'a>(&'a Workers);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.queued.fetch_sub(1, Relaxed);
    }
}

impl Workers {
    /// `limit` workers (0: no limit).
    pub fn new(limit: usize) -> Workers {
        Workers {
            sem: (limit > 0).then(|| Semaphore::new(limit)),
            serving: AtomicUsize::new(0),
            queued: AtomicUsize::new(0),
            max_queued: AtomicUsize::new(0),
            queued_total: AtomicU64::new(0),
            queue_timeouts: AtomicU64::new(0),
        }
    }

    /// A free worker for a request admitted with `in_flight` requests in the server (counting
    /// it): at once if one is free, else after those queued before it, or None when `deadline`
    /// passes first. Without a limit the request is served at once with n = `in_flight`.
    pub async fn take(&self, in_flight: usize, deadline: Option<Instant>, timer: &Timer) -> Option<Worker<'_>> {
        let Some(sem) = &self.sem else {
            self.serving.fetch_add(1, Relaxed);
            return Some(self.worker(None, in_flight));
        };
        // try_acquire never jumps the queue: while requests wait, released permits go to them.
        let permit = match sem.try_acquire() {
            Ok(p) => p,
            Err(_) => {
                let q = self.queued.fetch_add(1, Relaxed) + 1;
                let _waiting = Waiting(self);
                self.max_queued.fetch_max(q, Relaxed);
                self.queued_total.fetch_add(1, Relaxed);
                let acquired = match deadline {
                    None => sem.acquire().await.ok(),
                    Some(d) => tokio::select! {
                        p = sem.acquire() => p.ok(),
                        () = timer.sleep_until(d) => None,
                    },
                };
                let Some(p) = acquired else {
                    self.queue_timeouts.fetch_add(1, Relaxed);
                    return None;
                };
                p
            }
        };
        let n = self.serving.fetch_add(1, Relaxed) + 1;
        Some(self.worker(Some(permit), n))
    }

    fn worker<'a>(&'a self, permit: Option<SemaphorePermit<'a>>, n: usize) -> Worker<'a> {
        Worker {
            workers: self,
            _permit: permit,
            n,
        }
    }

    /// `POST /admin/reset`: totals zeroed, the peak back to the queue now.
    pub fn reset(&self) {
        self.max_queued.store(self.queued.load(Relaxed), Relaxed);
        self.queued_total.store(0, Relaxed);
        self.queue_timeouts.store(0, Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use super::*;

    /// Run `test` on a current-thread runtime (`spawn_local` allowed) with a timer, stopped after.
    fn with_timer<F: Future<Output = ()>>(test: impl FnOnce(Timer) -> F) {
        let timer = Timer::start().unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        tokio::task::LocalSet::new().block_on(&rt, test(timer.clone()));
        timer.shutdown();
    }

    /// (serving, queued, max_queued, queued_total, queue_timeouts)
    fn gauges(w: &Workers) -> (usize, usize, usize, u64, u64) {
        let g = |a: &AtomicUsize| a.load(Relaxed);
        let t = |a: &AtomicU64| a.load(Relaxed);
        (
            g(&w.serving),
            g(&w.queued),
            g(&w.max_queued),
            t(&w.queued_total),
            t(&w.queue_timeouts),
        )
    }

    #[test]
    fn at_most_n_are_served_and_the_rest_are_served_in_arrival_order() {
        let workers = Arc::new(Workers::new(3));
        let order = Arc::new(Mutex::new(Vec::new()));
        let most = Arc::new(AtomicUsize::new(0));
        let (w0, o0, m0) = (Arc::clone(&workers), Arc::clone(&order), Arc::clone(&most));
        with_timer(|timer| async move {
            let (workers, order, most) = (w0, o0, m0);
            let mut tasks = Vec::new();
            for i in 0..10usize {
                let (w, order, most, timer) = (
                    Arc::clone(&workers),
                    Arc::clone(&order),
                    Arc::clone(&most),
                    timer.clone(),
                );
                tasks.push(tokio::task::spawn_local(async move {
                    let worker = w.take(i + 1, None, &timer).await.unwrap();
                    assert!(worker.n <= 3, "n = {}", worker.n);
                    order.lock().unwrap().push(i);
                    most.fetch_max(w.serving.load(Relaxed), Relaxed);
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }));
                // Arrivals 1 ms apart: the queue's order is the arrival order.
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            assert_eq!(workers.queued.load(Relaxed), 7);
            for t in tasks {
                t.await.unwrap();
            }
        });
        assert_eq!(*order.lock().unwrap(), (0..10).collect::<Vec<_>>());
        assert_eq!(most.load(Relaxed), 3);
        assert_eq!(gauges(&workers), (0, 0, 7, 7, 0));
        workers.reset();
        assert_eq!(gauges(&workers), (0, 0, 0, 0, 0));
    }

    #[test]
    fn a_wait_past_its_deadline_gives_up_and_leaves_the_queue() {
        let workers = Workers::new(1);
        with_timer(|timer| async move {
            let held = workers.take(1, None, &timer).await.unwrap();
            assert_eq!(held.n, 1);
            let t0 = Instant::now();
            let got = workers.take(2, Some(t0 + Duration::from_millis(30)), &timer).await;
            assert!(got.is_none());
            let waited = t0.elapsed();
            assert!(
                waited >= Duration::from_millis(29) && waited < Duration::from_millis(300),
                "{waited:?}"
            );
            assert_eq!(gauges(&workers), (1, 0, 1, 1, 1));
            drop(held);
            // The worker is free again: the next one gets it at once, without queueing.
            assert!(workers.take(1, Some(Instant::now()), &timer).await.is_some());
            assert_eq!(gauges(&workers), (0, 0, 1, 1, 1));
        });
    }

    #[test]
    fn without_a_limit_every_request_is_served_at_once_with_its_in_flight_count() {
        let workers = Workers::new(0);
        with_timer(|timer| async move {
            let (a, b) = (workers.take(1, None, &timer).await, workers.take(7, None, &timer).await);
            assert_eq!((a.map(|w| w.n), b.map(|w| w.n)), (Some(1), Some(7)));
            assert_eq!(gauges(&workers), (0, 0, 0, 0, 0), "never queued (and both done)");
        });
    }
}
