//! A sleeping timer finer than tokio's (which rounds every deadline up to the next millisecond).
//!
//! Service times at a few hundred microseconds (the `web` profile) and the ±10 % accuracy the
//! tests hold the USL curve to need sub-millisecond wake-ups. One thread keeps a heap of
//! deadlines and sleeps on a condition variable until the earliest (the kernel's high-resolution
//! timers, ~50 µs slack); due entries are woken through a oneshot channel. It waits, it never spins.
//!
//! Wake-ups come late by the kernel's timer slack plus scheduling delay: ~0.1 ms on an idle
//! machine, a millisecond or more on a busy or virtualized one. That lateness adds to every
//! service time and bends the configured curve, so the thread learns it (a moving average of
//! how late each timed wake-up was) and asks to be woken that much early.

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

struct Entry {
    at: Instant,
    seq: u64,
    tx: oneshot::Sender<()>,
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Entry {
    // Reversed: BinaryHeap is a max-heap and the earliest deadline must come out first.
    fn cmp(&self, other: &Self) -> Ordering {
        (other.at, other.seq).cmp(&(self.at, self.seq))
    }
}

#[derive(Default)]
struct State {
    heap: BinaryHeap<Entry>,
    seq: u64,
    shutdown: bool,
}

#[derive(Default)]
struct Inner {
    state: Mutex<State>,
    cv: Condvar,
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A handle on the timer thread; clones share it.
#[derive(Clone)]
pub struct Timer {
    inner: Arc<Inner>,
}

impl Timer {
    /// Start the timer thread.
    pub fn start() -> std::io::Result<Timer> {
        let inner = Arc::new(Inner::default());
        let worker = Arc::clone(&inner);
        thread::Builder::new()
            .name("knee-target-timer".into())
            .spawn(move || run(&worker))?;
        Ok(Timer { inner })
    }

    /// Wait until `at` (at once if it has passed). Dropping the future cancels the wait.
    pub fn sleep_until(&self, at: Instant) -> impl std::future::Future<Output = ()> + Send + 'static {
        let rx = if at <= Instant::now() {
            None
        } else {
            let (tx, rx) = oneshot::channel();
            let mut st = self.inner.lock();
            if st.shutdown {
                None
            } else {
                st.seq += 1;
                let seq = st.seq;
                let earliest = !matches!(st.heap.peek(), Some(e) if e.at <= at);
                st.heap.push(Entry { at, seq, tx });
                drop(st);
                if earliest {
                    self.inner.cv.notify_one();
                }
                Some(rx)
            }
        };
        async move {
            if let Some(rx) = rx {
                let _ = rx.await;
            }
        }
    }

    /// Stop the thread; pending sleeps end at once.
    pub fn shutdown(&self) {
        let mut st = self.inner.lock();
        st.shutdown = true;
        st.heap.clear();
        drop(st);
        self.inner.cv.notify_one();
    }
}

/// The most the thread will ever ask to be woken early.
const MAX_LEAD: Duration = Duration::from_millis(2);

/// How early to ask for wake-ups: a moving average of the lateness seen, in nanoseconds.
#[derive(Default)]
struct Lead {
    ns: f64,
}

impl Lead {
    fn get(&self) -> Duration {
        Duration::from_nanos(self.ns as u64)
    }

    /// Learn from a timed wake-up for a deadline `at` that came at `now` (early is negative).
    fn learn(&mut self, at: Instant, now: Instant) {
        let late = if now >= at {
            (now - at).as_nanos() as f64
        } else {
            -((at - now).as_nanos() as f64)
        };
        let max = MAX_LEAD.as_nanos() as f64;
        // A 1/16 step: a lone stall moves it little, a machine's steady lateness is learnt in
        // a few dozen wake-ups.
        self.ns = (self.ns + late.clamp(-max, max) / 16.0).clamp(0.0, max);
    }
}

fn run(inner: &Inner) {
    let mut due = Vec::new();
    let mut lead = Lead::default();
    let mut timed: Option<Instant> = None;
    let mut st = inner.lock();
    loop {
        if st.shutdown {
            return;
        }
        let now = Instant::now();
        if let (Some(at), Some(first)) = (timed.take(), st.heap.peek()) {
            if first.at == at {
                lead.learn(at, now);
            }
        }
        let horizon = now + lead.get();
        while st.heap.peek().is_some_and(|e| e.at <= horizon) {
            if let Some(e) = st.heap.pop() {
                due.push(e.tx);
            }
        }
        if !due.is_empty() {
            drop(st);
            for tx in due.drain(..) {
                let _ = tx.send(());
            }
            st = inner.lock();
            continue;
        }
        st = match st.heap.peek().map(|e| e.at) {
            Some(at) => {
                let (guard, res) = inner
                    .cv
                    .wait_timeout(st, at.saturating_duration_since(horizon))
                    .unwrap_or_else(|e| e.into_inner());
                if res.timed_out() {
                    timed = Some(at);
                }
                guard
            }
            None => inner.cv.wait(st).unwrap_or_else(|e| e.into_inner()),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lead_learns_a_steady_lateness_and_stays_bounded() {
        let mut lead = Lead::default();
        let at = Instant::now();
        // Every wake-up asked for at `at - lead` comes 700 µs after that.
        for _ in 0..200 {
            let woke = at - lead.get() + Duration::from_micros(700);
            lead.learn(at, woke);
        }
        let learnt = lead.get().as_micros();
        assert!((650..=700).contains(&learnt), "{learnt} µs");
        // A 5 s stall moves it by at most MAX_LEAD / 16 and never past MAX_LEAD.
        lead.learn(at, at + Duration::from_secs(5));
        assert!(lead.get() <= MAX_LEAD);
        // Wake-ups on time bring it back down, never below zero.
        for _ in 0..500 {
            lead.learn(at, at - Duration::from_micros(300));
        }
        assert_eq!(lead.get(), Duration::ZERO);
    }

    #[test]
    fn sleeps_last_their_length_on_the_median() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let timer = Timer::start().unwrap();
        let mut took: Vec<Duration> = rt.block_on(async {
            let mut took = Vec::new();
            for _ in 0..60 {
                let t0 = Instant::now();
                timer.sleep_until(t0 + Duration::from_millis(4)).await;
                took.push(t0.elapsed());
            }
            took
        });
        timer.shutdown();
        took.sort();
        let median = took[took.len() / 2];
        // tokio's own timer would give ≥ 4 ms and often 5; the learnt lead keeps it near 4.
        assert!(
            median >= Duration::from_micros(3500) && median < Duration::from_micros(4500),
            "{median:?}"
        );
    }
}
