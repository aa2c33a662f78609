//! Worker threads: each runs a tokio current-thread runtime with its share of the clients
//! (round-robin over threads) and owns its recorder; nothing is shared on the hot path but a few
//! relaxed atomics for live snapshots.
//!
//! Closed loop: one task per client. Open loop (`PacerSpec::Rate`): per thread and group, one
//! scheduler task issues arrivals at the thread's share of the rate (its share of the slots) into a
//! queue that the thread's client slots drain; late and dropped arrivals are counted.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{watch, Notify};

use crate::cancel::{sleep_unless_stopped, Cancel};
use crate::clients::{Client, OpReport, Outcome, Prepared};
use crate::pacer::{Closed, Schedule, LATE_AFTER};
use crate::recorder::{GroupRec, LiveGroup};
use crate::result::GroupResult;
use crate::spec::{GroupSpec, PacerSpec, StopRule};

/// One group as every thread sees it.
pub(crate) struct GroupShared {
    pub spec: GroupSpec,
    pub prep: Arc<Prepared>,
    pub live: LiveGroup,
    /// Operations claimed so far (for `StopRule::Total`).
    pub tickets: AtomicU64,
    /// Start of the measurement (start + warm-up).
    pub measured_start: Instant,
    /// End of the group for duration stops.
    pub end_at: Option<Instant>,
}

/// Everything the threads share.
pub(crate) struct Shared {
    pub start: Instant,
    pub interval: Duration,
    pub groups: Vec<GroupShared>,
    pub stop_tx: watch::Sender<bool>,
    pub stopped: AtomicBool,
    /// The stop of background groups (`while_others`): sent by `stop()` and when the last
    /// foreground task ends.
    pub bg_stop_tx: watch::Sender<bool>,
    pub bg_stopped: AtomicBool,
    /// Foreground tasks still running (closed-loop clients and open-loop schedulers), plus one for
    /// each thread that has not yet counted its own in: starts at the number of threads.
    pub foreground_left: AtomicU64,
}

impl Shared {
    /// Stop everything (`Engine::stop`).
    pub fn stop_all(&self) {
        self.stopped.store(true, Ordering::Relaxed);
        self.bg_stopped.store(true, Ordering::Relaxed);
        self.stop_tx.send_replace(true);
        self.bg_stop_tx.send_replace(true);
    }

    /// The stop signal group `g`'s tasks obey, and its flag.
    fn stop_of(&self, g: usize) -> (watch::Receiver<bool>, &AtomicBool) {
        if self.groups[g].spec.stop.is_background() {
            (self.bg_stop_tx.subscribe(), &self.bg_stopped)
        } else {
            (self.stop_tx.subscribe(), &self.stopped)
        }
    }
}

/// Held by a foreground task while it runs; the last one to end stops the background groups.
struct Foreground<'a>(&'a Shared);

impl<'a> Foreground<'a> {
    fn enter(shared: &'a Shared, g: usize) -> Option<Foreground<'a>> {
        (!shared.groups[g].spec.stop.is_background()).then(|| Foreground(shared))
    }
}

impl Drop for Foreground<'_> {
    fn drop(&mut self) {
        if self.0.foreground_left.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.bg_stopped.store(true, Ordering::Relaxed);
            self.0.bg_stop_tx.send_replace(true);
        }
    }
}

/// What one thread hands back for one group.
pub(crate) struct ThreadGroup {
    pub res: GroupResult,
    /// (client index, succeeded) of this thread's clients.
    pub per_client: Vec<(u64, u64)>,
    pub last_end: Option<Instant>,
}

/// What one thread hands back, per group.
pub(crate) struct ThreadOutput {
    pub groups: Vec<ThreadGroup>,
}

/// Run this thread's clients (`(group, client index)` pairs) to the end.
pub(crate) fn run_thread(shared: Arc<Shared>, thread: usize, clients: Vec<(usize, u64)>) -> ThreadOutput {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime can be built");
    let local = tokio::task::LocalSet::new();
    let rec: Rc<RefCell<Vec<GroupRec>>> = Rc::new(RefCell::new(
        shared
            .groups
            .iter()
            .map(|g| GroupRec::new(&g.spec.name, g.spec.client.kind()))
            .collect(),
    ));
    local.block_on(&rt, async {
        let ticker = tokio::task::spawn_local(publish_recent(shared.clone(), rec.clone(), thread));
        // Closed-loop clients run on their own; open-loop groups get one scheduler per thread
        // feeding this thread's share of the group's client slots.
        let mut open: Vec<Vec<u64>> = vec![Vec::new(); shared.groups.len()];
        let mut tasks: Vec<_> = Vec::new();
        let mut foreground = 0u64;
        for (g, c) in clients {
            if matches!(shared.groups[g].spec.pacer, PacerSpec::Rate { .. }) {
                open[g].push(c);
            } else {
                foreground += u64::from(!shared.groups[g].spec.stop.is_background());
                tasks.push(tokio::task::spawn_local(client_loop(shared.clone(), rec.clone(), g, c)));
            }
        }
        for (g, slots) in open.into_iter().enumerate().filter(|(_, s)| !s.is_empty()) {
            foreground += u64::from(!shared.groups[g].spec.stop.is_background());
            tasks.push(tokio::task::spawn_local(open_group(
                shared.clone(),
                rec.clone(),
                g,
                slots,
            )));
        }
        // None of them has run yet: count them in, then give up this thread's own place (each
        // task's Foreground guard gives up its place when the task ends).
        shared.foreground_left.fetch_add(foreground, Ordering::AcqRel);
        drop(Foreground(&shared));
        for t in tasks {
            let _ = t.await;
        }
        ticker.abort();
    });
    drop(local);
    drop(rt);
    let recs = Rc::try_unwrap(rec).map_or_else(|rc| rc.replace(Vec::new()), RefCell::into_inner);
    ThreadOutput {
        groups: recs
            .into_iter()
            .map(|r| ThreadGroup {
                res: r.res,
                per_client: r.per_client,
                last_end: r.last_end,
            })
            .collect(),
    }
}

/// Once a second hand each group's last-second latency histogram to the live view.
async fn publish_recent(shared: Arc<Shared>, rec: Rc<RefCell<Vec<GroupRec>>>, thread: usize) {
    let mut tick = tokio::time::interval_at((shared.start + Duration::from_secs(1)).into(), Duration::from_secs(1));
    loop {
        tick.tick().await;
        let mut recs = rec.borrow_mut();
        for (g, r) in shared.groups.iter().zip(recs.iter_mut()) {
            let h = std::mem::replace(&mut r.recent, crate::histo::new_histogram());
            *g.live.recent[thread].lock().unwrap_or_else(|e| e.into_inner()) = Some(h);
        }
    }
}

/// One operation under its timeout (and the group's end and stop), counted in flight while it runs.
/// Both pacers run operations through here; returns the report and the instant it ended.
async fn run_one(
    op: &mut Client,
    group: &GroupShared,
    iteration: u64,
    timeout_at: Instant,
    stop: &mut watch::Receiver<bool>,
) -> (OpReport, Instant) {
    group.live.in_flight.fetch_add(1, Ordering::Relaxed);
    let mut cancel = Cancel {
        timeout_at,
        end_at: group.end_at,
        stop,
    };
    let report = op.run(iteration, &mut cancel).await;
    let end = Instant::now();
    group.live.in_flight.fetch_sub(1, Ordering::Relaxed);
    (report, end)
}

async fn client_loop(shared: Arc<Shared>, rec: Rc<RefCell<Vec<GroupRec>>>, g: usize, client: u64) {
    let group = &shared.groups[g];
    let spec = &group.spec;
    let global_client = spec.client_offset + client;
    let _foreground = Foreground::enter(&shared, g);
    let (mut stop, stopped) = shared.stop_of(g);
    let timeout = Duration::from_millis(spec.timeout_ms);
    let interval = shared.interval.as_secs_f64();
    let pacer = Closed::new(spec.think_ms);
    let mut op = Client::new(group.prep.clone(), global_client);
    let (mut iteration, mut measured, mut succeeded) = (0u64, 0u64, 0u64);
    let mut prev_end = None;
    if !sleep_unless_stopped(shared.start, &mut stop, stopped).await {
        rec.borrow_mut()[g].per_client.push((client, 0));
        return;
    }
    loop {
        let proceed = match spec.stop {
            StopRule::PerClient(n) => measured < n,
            StopRule::Total(n) => group.tickets.fetch_add(1, Ordering::Relaxed) < n,
            StopRule::DurationMs(_) => group.end_at.is_some_and(|e| Instant::now() < e),
            StopRule::WhileOthers(_) => true,
        };
        if !proceed || stopped.load(Ordering::Relaxed) {
            break;
        }
        // Operations that fail at once (spawn errors, refused connects) must not starve the thread.
        tokio::task::coop::consume_budget().await;
        let intended = pacer.next_start(prev_end, Instant::now());
        let wake = group.end_at.map_or(intended, |e| intended.min(e));
        if !sleep_unless_stopped(wake, &mut stop, stopped).await {
            break;
        }
        if group.end_at.is_some_and(|e| Instant::now() >= e) {
            break;
        }
        let began = Instant::now();
        let (report, end) = run_one(&mut op, group, iteration, began + timeout, &mut stop).await;
        prev_end = Some(end);
        iteration += 1;
        // Only operations that end inside a duration window count.
        if matches!(report.outcome, Outcome::Abandoned) || group.end_at.is_some_and(|e| end > e) {
            break;
        }
        if end < group.measured_start {
            rec.borrow_mut()[g].res.warmup_ops += 1;
            if let StopRule::Total(_) = spec.stop {
                group.tickets.fetch_sub(1, Ordering::Relaxed);
            }
            continue;
        }
        group.live.count(&report.outcome);
        let tick = ((end - group.measured_start).as_secs_f64() / interval) as usize;
        measured += 1;
        if rec.borrow_mut()[g].record(report, end - began, None, tick, global_client, end) {
            succeeded += 1;
        }
    }
    rec.borrow_mut()[g].per_client.push((client, succeeded));
}

/// The timer granularity the open-loop scheduler compensates for.
const TIMER_SLACK: Duration = Duration::from_millis(1);

/// One thread's open-loop queue for one group: arrivals waiting for a free client slot.
struct OpenQueue {
    pending: RefCell<VecDeque<Instant>>,
    /// Slots running an operation.
    busy: Cell<usize>,
    /// The scheduler has issued its last arrival.
    closed: Cell<bool>,
    notify: Notify,
}

/// Open loop for this thread's `slots` of group `g`: a scheduler issues arrivals at the thread's
/// share of the group's rate; idle slots take them in order. An arrival that finds more than the
/// cap (`max_in_flight`, split over threads like the rate) waiting or running is dropped; one that
/// waits longer than `timeout_ms` for a slot is dropped too. Both are counted, never skipped.
async fn open_group(shared: Arc<Shared>, rec: Rc<RefCell<Vec<GroupRec>>>, g: usize, slots: Vec<u64>) {
    let group = &shared.groups[g];
    let spec = &group.spec;
    let PacerSpec::Rate {
        rate_hz,
        poisson,
        max_in_flight,
    } = spec.pacer
    else {
        return;
    };
    let share = slots.len() as f64 / spec.clients as f64;
    let first = slots[0];
    // Threads start one group-wide gap apart, so constant schedules interleave evenly.
    let phase = Duration::from_secs_f64(first as f64 / rate_hz);
    let mut sched = Schedule::new(
        rate_hz * share,
        poisson,
        shared.start,
        phase,
        spec.client_offset + first,
    );
    let cap = max_in_flight.map(|m| ((m as f64 * share).round() as usize).max(1));
    rec.borrow_mut()[g].res.open_loop = true;
    let q = Rc::new(OpenQueue {
        pending: RefCell::new(VecDeque::new()),
        busy: Cell::new(0),
        closed: Cell::new(false),
        notify: Notify::new(),
    });
    let workers: Vec<_> = slots
        .iter()
        .map(|&c| tokio::task::spawn_local(open_slot(shared.clone(), rec.clone(), g, c, q.clone())))
        .collect();
    let _foreground = Foreground::enter(&shared, g);
    let (mut stop, stopped) = shared.stop_of(g);
    let per_thread_limit = match spec.stop {
        StopRule::PerClient(n) => Some(n.saturating_mul(slots.len() as u64)),
        _ => None,
    };
    let mut issued = 0u64;
    loop {
        if stopped.load(Ordering::Relaxed) || group.end_at.is_some_and(|e| sched.peek() >= e) {
            break;
        }
        let more = match spec.stop {
            StopRule::Total(n) => group.tickets.fetch_add(1, Ordering::Relaxed) < n,
            _ => per_thread_limit.is_none_or(|l| issued < l),
        };
        // Timers tick in whole milliseconds and fire late, which would add up to 1 ms to every
        // corrected latency; aim 1 ms early instead (an early start counts from its actual start).
        let wake = sched.peek().checked_sub(TIMER_SLACK).unwrap_or(shared.start);
        if !more || !sleep_unless_stopped(wake, &mut stop, stopped).await {
            break;
        }
        let at = sched.next_arrival();
        issued += 1;
        let measured = at >= group.measured_start;
        if measured {
            rec.borrow_mut()[g].res.offered += 1;
        }
        if cap.is_some_and(|c| q.pending.borrow().len() + q.busy.get() >= c) {
            if measured {
                rec.borrow_mut()[g].res.dropped += 1;
            }
            continue;
        }
        q.pending.borrow_mut().push_back(at);
        q.notify.notify_one();
    }
    q.closed.set(true);
    q.notify.notify_waiters();
    for w in workers {
        let _ = w.await;
    }
}

/// One open-loop client slot: take the next waiting arrival, run it, record from its intended start.
async fn open_slot(shared: Arc<Shared>, rec: Rc<RefCell<Vec<GroupRec>>>, g: usize, client: u64, q: Rc<OpenQueue>) {
    let group = &shared.groups[g];
    let spec = &group.spec;
    let global_client = spec.client_offset + client;
    let (mut stop, stopped) = shared.stop_of(g);
    let timeout = Duration::from_millis(spec.timeout_ms);
    let interval = shared.interval.as_secs_f64();
    let mut op = Client::new(group.prep.clone(), global_client);
    let (mut iteration, mut succeeded) = (0u64, 0u64);
    loop {
        let next = q.pending.borrow_mut().pop_front();
        let Some(intended) = next else {
            if q.closed.get() || stopped.load(Ordering::Relaxed) {
                break;
            }
            tokio::select! {
                _ = q.notify.notified() => continue,
                _ = stop.wait_for(|s| *s) => break,
            }
        };
        let began = Instant::now();
        if group.end_at.is_some_and(|e| began >= e) {
            break;
        }
        let measured = intended >= group.measured_start;
        let waited = began.saturating_duration_since(intended);
        if waited > timeout {
            if measured {
                rec.borrow_mut()[g].res.dropped += 1;
            }
            continue;
        }
        q.busy.set(q.busy.get() + 1);
        let (report, end) = run_one(&mut op, group, iteration, began + timeout, &mut stop).await;
        q.busy.set(q.busy.get() - 1);
        iteration += 1;
        if matches!(report.outcome, Outcome::Abandoned) || group.end_at.is_some_and(|e| end > e) {
            break;
        }
        if end < group.measured_start {
            rec.borrow_mut()[g].res.warmup_ops += 1;
            continue;
        }
        group.live.count(&report.outcome);
        let tick = ((end - group.measured_start).as_secs_f64() / interval) as usize;
        let recorded = {
            let mut r = rec.borrow_mut();
            if measured && waited > LATE_AFTER {
                r[g].res.late += 1;
            }
            let from = intended.min(began);
            r[g].record(report, end - from, Some(end - began), tick, global_client, end)
        };
        if recorded {
            succeeded += 1;
        }
        // Operations that fail at once must not starve the scheduler.
        tokio::task::coop::consume_budget().await;
    }
    rec.borrow_mut()[g].per_client.push((client, succeeded));
}
