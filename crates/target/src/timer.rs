//! A sleeping timer finer than tokio's (which rounds every deadline up to the next millisecond).
//!
//! Service times at a few hundred microseconds (the `web` profile) and the ±10 % accuracy the
//! tests hold the USL curve to need sub-millisecond wake-ups. One thread keeps a heap of
//! deadlines and sleeps on a condition variable until the earliest (the kernel's high-resolution
//! timers, ~50 µs slack); due entries are woken through a oneshot channel. It waits, it never spins.

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread;
use std::time::Instant;

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

fn run(inner: &Inner) {
    let mut due = Vec::new();
    let mut st = inner.lock();
    loop {
        if st.shutdown {
            return;
        }
        let now = Instant::now();
        while st.heap.peek().is_some_and(|e| e.at <= now) {
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
        st = match st.heap.peek().map(|e| e.at - now) {
            Some(wait) => inner.cv.wait_timeout(st, wait).unwrap_or_else(|e| e.into_inner()).0,
            None => inner.cv.wait(st).unwrap_or_else(|e| e.into_inner()),
        };
    }
}
