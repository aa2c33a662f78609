//! Where a client's next operation comes from (`Source`): closed loop, the client's own previous end plus think
//! time, under its group's stop rule; open loop, the next arrival in its thread's queue of the group (`OpenQueue`),
//! which the thread's scheduler for the group fills (threads.rs, `open_group`).

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::{watch, Notify};

use crate::cancel::sleep_unless_stopped;
use crate::pacer::{Closed, Previous};
use crate::recorder::GroupRec;
use crate::spec::StopRule;
use crate::threads::GroupShared;

/// One thread's open-loop queue for one group: arrivals waiting for a free client.
pub(crate) struct OpenQueue {
    /// Each arrival's intended start, and whether a client of this thread was free for it when it was issued.
    pub pending: RefCell<VecDeque<(Instant, bool)>>,
    /// Clients running an operation.
    pub busy: Cell<usize>,
    /// The scheduler has issued its last arrival.
    pub closed: Cell<bool>,
    /// This thread's clients of the group that have not stopped for want of a row.
    pub clients: Cell<usize>,
    pub notify: Notify,
}

/// Where a client's next operation comes from: the pacer.
pub(crate) enum Source {
    /// Closed loop: the previous operation's end plus think time (and think time on failure).
    Closed { pacer: Closed, prev: Option<Previous> },
    /// Open loop: the next arrival in this thread's queue of the group.
    Open(Rc<OpenQueue>),
}

/// An operation the pacer says to start now.
pub(crate) struct Start {
    /// When it was meant to start (open loop; closed loop: `began`).
    pub intended: Instant,
    /// When the client took it (the clock is read once for the checks and the operation's start).
    pub began: Instant,
    /// An open-loop arrival due inside the measured window.
    pub measured_arrival: bool,
    /// An open-loop arrival issued while a client was free for it: if it started late, the load side lagged.
    pub free: bool,
}

impl OpenQueue {
    /// Fewer arrivals wait than this thread's clients are idle: one is free for the next arrival.
    pub fn a_client_is_free(&self) -> bool {
        self.pending.borrow().len() < self.clients.get().saturating_sub(self.busy.get())
    }
}

impl Source {
    /// The next operation, or None when the client must stop: its group's stop rule, the group's
    /// end, the run's stop, or (open loop) no more arrivals. Waits until the operation is due.
    pub async fn next(
        &mut self,
        group: &GroupShared,
        measured: u64,
        stop: &mut watch::Receiver<bool>,
        stopped: &AtomicBool,
        rec: &RefCell<Vec<GroupRec>>,
        g: usize,
    ) -> Option<Start> {
        match self {
            Source::Closed { pacer, prev } => {
                // Operations that fail at once (spawn errors, refused connects) must not starve the thread.
                tokio::task::coop::consume_budget().await;
                // One clock read serves every check and the start, unless the client waits (think time).
                let mut now = Instant::now();
                let proceed = match group.spec.stop {
                    StopRule::PerClient(n) => measured < n,
                    // A refused claim takes no ticket: it would keep one that a warm-up operation gives back.
                    StopRule::Total(n) => group
                        .tickets
                        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |t| (t < n).then_some(t + 1))
                        .is_ok(),
                    StopRule::DurationMs(_) => group.end_at().is_some_and(|e| now < e),
                    StopRule::WhileOthers(_) => true,
                };
                if !proceed || stopped.load(Ordering::Relaxed) || group.data_stop.load(Ordering::Relaxed) {
                    return None;
                }
                let mut due = pacer.next_start(*prev, now);
                if let Some(curve) = &group.clients_curve {
                    let origin = group.measured_start() - Duration::from_millis(group.spec.warmup_ms);
                    // One whose turn never comes again waits out the group's duration (as a spike's end does).
                    due = pacer.turn(curve, origin, due).or(group.end_at())?;
                }
                if due > now {
                    let wake = group.end_at().map_or(due, |e| due.min(e));
                    if !sleep_unless_stopped(wake, stop, stopped).await {
                        return None;
                    }
                    now = Instant::now();
                }
                if group.end_at().is_some_and(|e| now >= e) {
                    return None;
                }
                Some(Start {
                    intended: now,
                    began: now,
                    measured_arrival: false,
                    free: false,
                })
            }
            Source::Open(q) => loop {
                // Asked before an arrival is taken: one taken and not started would be neither started nor dropped.
                if group.data_stop.load(Ordering::Relaxed) {
                    return None;
                }
                let next = q.pending.borrow_mut().pop_front();
                let Some((intended, free)) = next else {
                    if q.closed.get() || stopped.load(Ordering::Relaxed) {
                        return None;
                    }
                    tokio::select! {
                        _ = q.notify.notified() => continue,
                        _ = stop.wait_for(|s| *s) => return None,
                    }
                };
                let now = Instant::now();
                if group.end_at().is_some_and(|e| now >= e) {
                    // Due inside the window, but no client was free before it ended: it never starts. Back in the
                    // queue, dropped with the arrivals still waiting behind it (open_group counts them).
                    q.pending.borrow_mut().push_front((intended, free));
                    return None;
                }
                let measured_arrival = intended >= group.measured_start();
                if now.saturating_duration_since(intended) > Duration::from_millis(group.spec.timeout_ms) {
                    if measured_arrival {
                        rec.borrow_mut()[g].drop_arrival(intended);
                    }
                    group.in_flight.fetch_sub(1, Ordering::Relaxed);
                    tokio::task::coop::consume_budget().await; // a long run of stale arrivals yields now and then
                    continue;
                }
                return Some(Start {
                    intended,
                    began: now,
                    measured_arrival,
                    free,
                });
            },
        }
    }

    pub fn begin(&self) {
        if let Source::Open(q) = self {
            q.busy.set(q.busy.get() + 1);
        }
    }

    /// The operation has ended at `end` (`failed`: as a failure); `warmup`: it ended before the
    /// measurement started.
    pub fn end(&mut self, group: &GroupShared, end: Instant, failed: bool, warmup: bool) {
        match self {
            Source::Closed { prev, .. } => {
                *prev = Some(Previous { end, failed });
                // A warm-up operation does not use up a `total` ticket.
                if warmup && matches!(group.spec.stop, StopRule::Total(_)) {
                    group.tickets.fetch_sub(1, Ordering::Relaxed);
                }
            }
            Source::Open(q) => {
                q.busy.set(q.busy.get() - 1);
                group.in_flight.fetch_sub(1, Ordering::Relaxed);
            }
        }
    }
}

/// What a running operation holds, given back when it ends: its place in the live in-flight count (`live`), and,
/// should its task panic (a defect of knee: `joined` says it), an open loop's arrival slot (`slots`, against
/// `max_in_flight`) and busy client, which `Source::end` gives back otherwise.
pub(crate) struct Running<'a> {
    pub live: &'a AtomicI64,
    pub slots: &'a AtomicUsize,
    pub open: Option<&'a OpenQueue>,
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.live.fetch_sub(1, Ordering::Relaxed);
        if let Some(q) = self.open.filter(|_| std::thread::panicking()) {
            q.busy.set(q.busy.get() - 1);
            q.clients.set(q.clients.get() - 1); // its client is gone: not free for the arrivals after it
            self.slots.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{OpenQueue, Running};
    use std::cell::{Cell, RefCell};
    use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};

    /// An operation whose task panics gives back its place in the live in-flight count and, in an open loop, its
    /// arrival slot and busy client (the cap, `max_in_flight`, lost one for each before); one that ends gives back
    /// its place, the rest being `Source::end`'s.
    #[test]
    fn a_panicking_operation_gives_back_what_it_held() {
        let (live, slots) = (AtomicI64::new(0), AtomicUsize::new(0));
        let q = OpenQueue {
            pending: RefCell::default(),
            busy: Cell::new(0),
            closed: Cell::new(false),
            clients: Cell::new(1),
            notify: tokio::sync::Notify::new(),
        };
        let hold = || {
            live.fetch_add(1, Ordering::Relaxed);
            slots.fetch_add(1, Ordering::Relaxed);
            q.busy.set(q.busy.get() + 1);
            Running {
                live: &live,
                slots: &slots,
                open: Some(&q),
            }
        };
        drop(hold());
        assert_eq!(
            (
                live.load(Ordering::Relaxed),
                slots.load(Ordering::Relaxed),
                q.busy.get()
            ),
            (0, 1, 1)
        );
        slots.store(0, Ordering::Relaxed);
        q.busy.set(0);
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _running = hold();
            panic!("a defect of knee");
        }));
        assert!(caught.is_err());
        assert_eq!(
            (
                live.load(Ordering::Relaxed),
                slots.load(Ordering::Relaxed),
                q.busy.get()
            ),
            (0, 0, 0)
        );
    }
}
